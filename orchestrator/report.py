"""The report of one run (pre-flight, analyze or bandwidth): the contract behind every verdict command's
``--json`` and what the store saves, and :func:`assemble_report`, the one function that turns findings and
hosts into a report (node verdicts, run verdict, exit code, exclude hostlist). Pure: no I/O.

Verdicts follow the Nagios plugin convention (:class:`~fleetdx.probes.contracts.Verdict`):

- a node's verdict is the worst severity of the findings that name it (``info`` counts as OK). A node that
  could not be judged (``unjudged``: no GPU inventory) is UNKNOWN unless a finding makes it CRITICAL: fleetdx
  never calls a node healthy, or merely WARNING, on missing evidence (what it could not see may be worse).
  A finding about several nodes counts against each of them, except the codes of :data:`GROUP_ONLY_CODES`
  (a group measured slow says nothing yet about which member is slow: localisation names the straggler with
  a finding of its own);
- the run's verdict is :meth:`Verdict.worst` of the node verdicts and of the findings no node's verdict
  carries (run-wide ones, and group-only ones);
- the exclude hostlist (python-hostlist ``collect_hostlist``, ready for ``sbatch --exclude``) holds the nodes
  named *alone* by a critical finding: a critical finding about a pair or group (a hang) does not say which
  member is at fault, so it makes their verdicts CRITICAL without condemning both to exclusion.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum

import hostlist
from pydantic import Field, model_validator

from fleetdx.probes.contracts import (
    SCHEMA_VERSION,
    Collective,
    Contract,
    EvidenceValue,
    Finding,
    FindingCode,
    Job,
    Level,
    RunStatus,
    Severity,
    Verdict,
    VerdictName,
)


class RunKind(str, Enum):
    PREFLIGHT = "preflight"
    ANALYZE = "analyze"
    BANDWIDTH = "bandwidth"


class Schedule(str, Enum):
    """How ``fleetdx bandwidth`` spends its rounds."""

    ROUNDROBIN = "roundrobin"  #: every pair once: N-1 rounds, per-node scores from N-1 pairs each
    QUICK = "quick"  #: one round of disjoint pairs; flags pairs, does not localise
    LOCALISE = "localise"  #: the quick screen, then adaptive localisation of flagged pairs


class ProbeSummary(Contract):
    name: str
    status: RunStatus
    duration_s: float | None = None
    error: str | None = None


class NodeReport(Contract):
    """One node's verdict. ``unjudged`` says why the node could not be judged (verdict at least UNKNOWN),
    e.g. "no GPU inventory: nvidia-smi_-q_-x.xml: skipped (nvidia-smi: not found on PATH)"; ``None`` when
    it could."""

    host: str
    verdict: VerdictName
    probes: list[ProbeSummary] = Field(default_factory=list)
    unjudged: str | None = None


class RecommendationKind(str, Enum):
    """What a :class:`Recommendation` advises."""

    RANK_BINDING = "rank-binding"  #: the GPU->NIC rail, CPUs and NUMA node a local rank should bind to


class CurveBackend(str, Enum):
    """What measured a :class:`BusbwCurve`: a torch.distributed backend, or the nccl-tests binaries."""

    NCCL = "nccl"
    GLOO = "gloo"
    NCCL_TESTS = "nccl-tests"


class Recommendation(Contract):
    """Placement advice for one node or the job: e.g. the GPU->NIC rail and NUMA binding per local rank."""

    node: str | None = None
    kind: RecommendationKind
    subject: str
    message: str
    data: dict[str, EvidenceValue] = Field(default_factory=dict)


class BusbwPoint(Contract):
    """One point of a busbw-vs-size curve. ``size`` in bytes, bandwidths in GB/s (1e9 B/s), time in µs."""

    size: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float


class BusbwCurve(Contract):
    """A measured collective over a size sweep on a set of nodes (a pair, a group, or one node)."""

    collective: Collective
    nodes: list[str]
    nranks: int
    backend: CurveBackend
    points: list[BusbwPoint]


class RunReport(Contract):
    """One run. ``exit_code`` equals the verdict's Nagios value; ``exclude`` is the compressed Slurm hostlist
    of nodes named alone by a critical finding (empty string when none); ``simulated`` is true when nodes were
    simulated and their probes replayed bundles instead of running commands. ``level`` is a pre-flight's
    probe level, ``schedule`` a bandwidth run's schedule (a pre-flight at level ``full`` may carry both).
    Build one with :func:`assemble_report`."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    kind: RunKind
    started_at: float  #: Unix time
    finished_at: float
    level: Level | None = None
    schedule: Schedule | None = None
    verdict: VerdictName
    exit_code: int
    simulated: bool = False
    nodes: list[NodeReport]
    findings: list[Finding]
    exclude: str = ""
    recommendations: list[Recommendation] = Field(default_factory=list)
    curves: list[BusbwCurve] = Field(default_factory=list)
    job: Job | None = None  #: the job the run was about (its allocation, a past job), when there is one

    @model_validator(mode="before")
    @classmethod
    def _upgrade_v1(cls, data: object) -> object:
        """Schema version 1 kept a bandwidth run's schedule in ``level``: move it to ``schedule``."""
        version = data.get("schema_version", SCHEMA_VERSION) if isinstance(data, dict) else None
        # a non-integer version is left to the field's own validation (a ValidationError, never a TypeError)
        if isinstance(data, dict) and isinstance(version, int) and version < 2:
            data = {**data, "schema_version": SCHEMA_VERSION}
            if data.get("kind") in (RunKind.BANDWIDTH, RunKind.BANDWIDTH.value) and data.get("level"):
                data["schedule"] = data.pop("level")
        return data


#: codes that, when a finding names several nodes, judge the group and not each member (see the module doc)
GROUP_ONLY_CODES = frozenset({FindingCode.NCCL_BUSBW_LOW})

_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.UNKNOWN: 2, Severity.INFO: 3}


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` in report order: most severe first (critical, warning, unknown, info), then by nodes
    (run-wide findings first), finding code and subject."""
    return sorted(findings, key=lambda f: (_SEVERITY_ORDER[f.severity], f.nodes, f.code.value, f.subject))


def blames(finding: Finding) -> list[str]:
    """The hosts whose node verdict ``finding`` counts against (see the module doc)."""
    if len(finding.nodes) > 1 and finding.code in GROUP_ONLY_CODES:
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


def assemble_report(
    kind: RunKind,
    hosts: Sequence[str],
    findings: Iterable[Finding],
    *,
    started_at: float,
    probes: Mapping[str, Sequence[ProbeSummary]] | None = None,
    unjudged: Mapping[str, str] | None = None,
    level: Level | None = None,
    schedule: Schedule | None = None,
    simulated: bool = False,
    curves: Sequence[BusbwCurve] = (),
    recommendations: Sequence[Recommendation] = (),
    run_id: str | None = None,
) -> RunReport:
    """The one way a :class:`RunReport` is made: verdicts, exit code and exclude list from the evidence.

    Args:
        kind: what ran.
        hosts: every host of the run, each once (a host named only by a finding is added).
        findings: every finding of the run, in any order (the report sorts them, :func:`sort_findings`).
        started_at: Unix time the run started; ``finished_at`` is now.
        probes: host -> how each of its probes went (``NodeReport.probes``).
        unjudged: host -> why it could not be judged (its verdict is then at least UNKNOWN).
        level / schedule / simulated / curves / recommendations: copied into the report.
        run_id: default a new random hex id.

    Returns:
        The report; its nodes sorted by host. Raises nothing for odd input (an empty run is OK, exit 0, and
        callers that need at least one node check that first).
    """
    found = sort_findings(findings)
    probes = probes or {}
    unjudged = unjudged or {}
    all_hosts = sorted(set(hosts) | {h for f in found for h in f.nodes})
    mine: dict[str, list[Finding]] = {h: [] for h in all_hosts}
    unblamed: list[Finding] = []
    for f in found:
        blamed = blames(f)
        if not blamed:
            unblamed.append(f)
        for h in blamed:
            mine[h].append(f)
    nodes = [
        NodeReport(
            host=h,
            verdict=node_verdict(mine[h], h in unjudged),
            probes=list(probes.get(h, ())),
            unjudged=unjudged.get(h),
        )
        for h in all_hosts
    ]
    verdict = Verdict.worst([*(n.verdict for n in nodes), *(f.severity.verdict for f in unblamed)])
    return RunReport(
        run_id=run_id or uuid.uuid4().hex,
        kind=kind,
        started_at=started_at,
        finished_at=time.time(),
        level=level,
        schedule=schedule,
        verdict=verdict,
        exit_code=int(verdict),
        simulated=simulated,
        nodes=nodes,
        findings=found,
        exclude=exclude_hostlist(found),
        recommendations=list(recommendations),
        curves=list(curves),
    )
