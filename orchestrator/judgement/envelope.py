"""The report envelope every job's ``--json`` starts with, and :func:`judge`, the one assembler of verdicts.

Envelope (``schema_version``, ``kind``, ``verdict``, ``exit_code``, ``job``, ``findings``,
``missing_evidence``), then the job's own body: a run's nodes and exclude list (:mod:`fleetdx.orchestrator.report`),
a postmortem's timeline (:mod:`fleetdx.orchestrator.postmortem.contracts`), a step analysis' ranks
(:mod:`fleetdx.orchestrator.steps.contracts`).

Verdicts follow the Nagios plugin convention (:class:`~fleetdx.probes.contracts.Verdict`; the value is the exit
code), as LBNL NHC and Meta GCM health checks use it:

- a node's verdict is the worst severity of the findings that name it (``info`` counts as OK). A node that
  could not be judged (``unjudged``) is UNKNOWN unless a finding makes it CRITICAL: fleetdx never calls a node
  healthy, or merely WARNING, on missing evidence. A finding about several nodes counts against each of them,
  except the catalog's ``group_only`` codes (a group measured slow says nothing yet about which member is slow);
- the verdict is :meth:`Verdict.worst` of the node verdicts, of the findings no node's verdict carries
  (job-wide ones, group-only ones) and of the ``floor`` a job adds (UNKNOWN for inputs it could not read);
- the exclude hostlist (python-hostlist ``collect_hostlist``, ready for ``sbatch --exclude``) holds the nodes
  named *alone* by a critical finding (a critical finding about a group makes each member CRITICAL but
  excludes none of them: which member is at fault is localisation's job).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

import hostlist
from pydantic import Field

from fleetdx.orchestrator.judgement.catalog import group_only_codes
from fleetdx.orchestrator.judgement.findings import Finding
from fleetdx.probes.contracts import SCHEMA_VERSION, Contract, Job, Severity, Verdict, VerdictName


class ReportKind(str, Enum):
    """Which job made a report."""

    PREFLIGHT = "preflight"
    ANALYZE = "analyze"
    BANDWIDTH = "bandwidth"
    POSTMORTEM = "postmortem"
    STEPS = "steps"


#: the keys of every finding object in every job's ``--json`` (tests/test_code_catalog.py holds each job to it)
FINDING_KEYS = frozenset(Finding.model_fields)


class Report(Contract):
    """The envelope of every job's report. ``exit_code`` equals the verdict's Nagios value; ``missing_evidence``
    says, one sentence each, what the job could not see (an input not read, a source not given)."""

    schema_version: int = SCHEMA_VERSION
    kind: str
    verdict: VerdictName
    exit_code: int
    job: Job | None = None
    findings: list[Finding] = Field(default_factory=list)
    missing_evidence: list[str] = Field(default_factory=list)


def blames(finding: Finding) -> list[str]:
    """The hosts whose node verdict ``finding`` counts against (see the module doc)."""
    if len(finding.nodes) > 1 and finding.code in group_only_codes():
        return []
    return list(finding.nodes)


def node_verdict(findings: Iterable[Finding], unjudged: bool) -> Verdict:
    """Worst severity of ``findings``; for a node that could not be judged, CRITICAL when a finding is
    critical, else UNKNOWN (a warning about what could be seen does not judge the rest)."""
    worst = Verdict.worst(f.severity.verdict for f in findings)
    if unjudged and worst is not Verdict.CRITICAL:
        return Verdict.UNKNOWN
    return worst


def exclude_hostlist(findings: Iterable[Finding]) -> str:
    """Compressed Slurm hostlist of the nodes named alone by a critical finding, e.g. ``"gpu[01-03,07]"``;
    "" for none."""
    hosts = sorted({f.nodes[0] for f in findings if f.severity is Severity.CRITICAL and len(f.nodes) == 1})
    return hostlist.collect_hostlist(hosts) if hosts else ""


@dataclass(frozen=True)
class Judgement:
    """What :func:`judge` makes of findings: the verdict and exit code, each host's verdict (sorted by host),
    the exclude hostlist."""

    verdict: Verdict
    exit_code: int
    node_verdicts: dict[str, Verdict] = field(default_factory=dict)
    exclude: str = ""


def judge(
    findings: Sequence[Finding],
    *,
    hosts: Iterable[str] = (),
    unjudged: Mapping[str, str] | None = None,
    floor: Iterable[Verdict] = (),
) -> Judgement:
    """The one assembler of verdicts (see the module doc).

    Args:
        findings: every finding of the job, any order.
        hosts: every host the job judged (a host named only by a finding is added).
        unjudged: host -> why it could not be judged (its verdict is then at least UNKNOWN).
        floor: verdicts the job adds on its own (UNKNOWN for an input it could not read).

    Returns:
        The judgement; an empty job with no floor is OK, exit 0. Raises nothing.
    """
    unjudged = unjudged or {}
    all_hosts = sorted(set(hosts) | {h for f in findings for h in f.nodes})
    mine: dict[str, list[Finding]] = {h: [] for h in all_hosts}
    unblamed: list[Finding] = []
    for f in findings:
        blamed = blames(f)
        if not blamed:
            unblamed.append(f)
        for h in blamed:
            mine[h].append(f)
    nodes = {h: node_verdict(mine[h], h in unjudged) for h in all_hosts}
    verdict = Verdict.worst([*nodes.values(), *(f.severity.verdict for f in unblamed), *floor])
    return Judgement(verdict=verdict, exit_code=int(verdict), node_verdicts=nodes, exclude=exclude_hostlist(findings))
