"""The report of one run (pre-flight, analyze or bandwidth): the contract behind those commands' ``--json`` and
what the store saves, and :func:`assemble_report`, which turns findings and hosts into a report through the one
assembler of verdicts (:func:`fleetdx.orchestrator.judgement.envelope.judge`: node verdicts, run verdict, exit
code, exclude hostlist). Pure: no I/O.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum

from pydantic import Field, model_validator

from fleetdx.orchestrator.judgement import Finding, sort_findings
from fleetdx.orchestrator.judgement.envelope import Report, judge
from fleetdx.probes.contracts import (
    SCHEMA_VERSION,
    Collective,
    Contract,
    EvidenceValue,
    Level,
    RunStatus,
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


class RunReport(Report):
    """One run: the report envelope (:class:`~fleetdx.orchestrator.judgement.envelope.Report`; ``job`` the job
    the run was about, its allocation or a past job, when there is one), then the run's body. ``exclude`` is the
    compressed Slurm hostlist of nodes named alone by a critical finding (empty string when none);
    ``simulated`` is true when nodes were simulated and their probes replayed bundles instead of running
    commands. ``level`` is a pre-flight's probe level, ``schedule`` a bandwidth run's schedule (a pre-flight at
    level ``full`` may carry both). Build one with :func:`assemble_report`."""

    kind: RunKind
    run_id: str
    started_at: float  #: Unix time
    finished_at: float
    level: Level | None = None
    schedule: Schedule | None = None
    simulated: bool = False
    nodes: list[NodeReport]
    exclude: str = ""
    recommendations: list[Recommendation] = Field(default_factory=list)
    curves: list[BusbwCurve] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _upgrade_v1(cls, data: object) -> object:
        """Schema version 1 kept a bandwidth run's schedule in ``level``: move it to ``schedule``; older findings
        upgrade themselves (:class:`~fleetdx.orchestrator.judgement.Finding`)."""
        version = data.get("schema_version", SCHEMA_VERSION) if isinstance(data, dict) else None
        # a non-integer version is left to the field's own validation (a ValidationError, never a TypeError)
        if isinstance(data, dict) and isinstance(version, int) and version < SCHEMA_VERSION:
            data = {**data, "schema_version": SCHEMA_VERSION}
            if version < 2 and data.get("kind") in (RunKind.BANDWIDTH, RunKind.BANDWIDTH.value) and data.get("level"):
                data["schedule"] = data.pop("level")
        return data


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
    j = judge(found, hosts=hosts, unjudged=unjudged)
    nodes = [
        NodeReport(host=h, verdict=v, probes=list(probes.get(h, ())), unjudged=unjudged.get(h))
        for h, v in j.node_verdicts.items()
    ]
    return RunReport(
        run_id=run_id or uuid.uuid4().hex,
        kind=kind,
        started_at=started_at,
        finished_at=time.time(),
        level=level,
        schedule=schedule,
        verdict=j.verdict,
        exit_code=j.exit_code,
        simulated=simulated,
        nodes=nodes,
        findings=found,
        exclude=j.exclude,
        recommendations=list(recommendations),
        curves=list(curves),
    )


class NodeHistoryEntry(Contract):
    """One node in one past run: the node's verdict and the findings about it (those whose ``nodes`` name
    it, pair and group findings included), newest run first."""

    run_id: str
    kind: RunKind
    level: Level | None = None  #: a pre-flight's probe level
    schedule: Schedule | None = None  #: a bandwidth run's schedule (a pre-flight at level full may have one)
    started_at: float
    verdict: VerdictName  #: the node's verdict in that run (not the run's)
    simulated: bool = False  #: the run replayed bundles on simulated nodes: nothing in it was measured
    job_id: str | None = None  #: the job the run was about
    findings: list[Finding] = Field(default_factory=list)


class NodeHistory(Contract):
    """A node's findings over time (``fleetdx history HOST --json``)."""

    host: str
    entries: list[NodeHistoryEntry]
