"""The report of one run (pre-flight, analyze or bandwidth): the contract behind every verdict command's
``--json`` and what the store saves."""

from __future__ import annotations

from enum import Enum

from pydantic import Field, ValidationInfo, field_validator

from fleetdx.orchestrator.preflight.schedules import Schedule
from fleetdx.probes.commands import Level
from fleetdx.probes.contracts import SCHEMA_VERSION, Contract, EvidenceValue, Finding, VerdictName
from fleetdx.probes.parsers.nccl_tests import Collective
from fleetdx.probes.runner import RunStatus


class RunKind(str, Enum):
    PREFLIGHT = "preflight"
    ANALYZE = "analyze"
    BANDWIDTH = "bandwidth"


def level_of(kind: RunKind | None, value: object) -> object:
    """A run's ``level`` as read from JSON or the store: the :class:`~fleetdx.orchestrator.preflight.schedules.Schedule` of a
    bandwidth run, the :class:`~fleetdx.probes.commands.Level` of any other ("quick" is a value of both); enum
    members and ``None`` pass unchanged. Raises ``ValueError`` for a value of neither."""
    if isinstance(value, str) and not isinstance(value, Enum):
        return Schedule(value) if kind is RunKind.BANDWIDTH else Level(value)
    return value


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
    of nodes with a critical finding (empty string when none); ``simulated`` is true when nodes were
    simulated and their probes replayed bundles instead of running commands."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    kind: RunKind
    started_at: float  #: Unix time
    finished_at: float
    level: Level | Schedule | None = None  #: the pre-flight's probe level, or a bandwidth run's schedule
    verdict: VerdictName
    exit_code: int
    simulated: bool = False
    nodes: list[NodeReport]
    findings: list[Finding]
    exclude: str = ""
    recommendations: list[Recommendation] = Field(default_factory=list)
    curves: list[BusbwCurve] = Field(default_factory=list)

    @field_validator("level", mode="before")
    @classmethod
    def _level(cls, value: object, info: ValidationInfo) -> object:
        return level_of(info.data.get("kind"), value)
