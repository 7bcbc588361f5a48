"""The report of one run (pre-flight, analyze or bandwidth): the contract behind every verdict command's
``--json`` and what the store saves."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from probes.contracts import SCHEMA_VERSION, Contract, EvidenceValue, Finding, VerdictName
from probes.runner import RunStatus


class RunKind(str, Enum):
    PREFLIGHT = "preflight"
    ANALYZE = "analyze"
    BANDWIDTH = "bandwidth"


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


class Recommendation(Contract):
    """Placement advice for one node or the job: e.g. the GPU->NIC rail and NUMA binding per local rank."""

    node: str | None = None
    kind: str  #: "rank-binding", "nccl-env", "exclude", ...
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

    collective: str
    nodes: list[str]
    nranks: int
    backend: str  #: "nccl", "gloo", "nccl-tests"
    points: list[BusbwPoint]


class RunReport(Contract):
    """One run. ``exit_code`` equals the verdict's Nagios value; ``exclude`` is the compressed Slurm hostlist
    of nodes with a critical finding (empty string when none); ``simulated`` is true when nodes were
    simulated and their probes replayed bundles instead of running commands."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    kind: RunKind
    started_at: float  #: Unix time
    finished_at: float
    level: str | None = None
    verdict: VerdictName
    exit_code: int
    simulated: bool = False
    nodes: list[NodeReport]
    findings: list[Finding]
    exclude: str = ""
    recommendations: list[Recommendation] = Field(default_factory=list)
    curves: list[BusbwCurve] = Field(default_factory=list)
