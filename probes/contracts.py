"""The shared vocabulary and contracts of every layer: the base model, run status, probe level, collective,
verdicts, severities and the job model. Findings, their codes and the report envelope are the orchestrator's
judgement (:mod:`fleetdx.orchestrator.judgement`).

Every ``--json`` output of fleetdx is a dump of a model built on :class:`Contract`.
Verdicts and exit codes follow the Nagios plugin convention (OK 0, WARNING 1, CRITICAL 2, UNKNOWN 3),
as LBNL NHC and Meta GCM health checks use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum, IntEnum
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

#: version of every JSON contract (reports, bundles, spool files). 2: ``Finding.nodes`` (a list) replaces
#: ``Finding.node``; ``RunReport.schedule`` holds a bandwidth run's schedule, ``level`` only a probe level.
#: 3: one finding and one report envelope for every job: a finding's ``evidence`` is its raw lines (file, line,
#: text) and its figures are ``details``; it has a ``scope``, ``rank``, ``gpu``, ``action`` and ``time``;
#: postmortem and steps reports carry ``schema_version``, ``kind``, ``verdict``, ``exit_code`` and ``findings``.
#: Older documents are read and upgraded (the validators of ``Finding``, ``RunReport`` and ``PostmortemReport``).
SCHEMA_VERSION = 3

JsonScalar = str | int | float | bool | None
EvidenceValue = JsonScalar | list[JsonScalar] | dict[str, JsonScalar]


class Contract(BaseModel):
    """Base of every data contract: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Verdict(IntEnum):
    """Nagios plugin verdicts; the value is the process exit code."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3

    @staticmethod
    def worst(verdicts: Iterable[Verdict]) -> Verdict:
        """The worst of ``verdicts`` (CRITICAL > WARNING > UNKNOWN > OK); OK for an empty iterable.

        UNKNOWN ranks below WARNING and CRITICAL: a run where one node is CRITICAL and another could not be
        judged is CRITICAL; a run that is otherwise OK but has an unjudged node is UNKNOWN.
        """
        rank = {Verdict.OK: 0, Verdict.UNKNOWN: 1, Verdict.WARNING: 2, Verdict.CRITICAL: 3}
        out = Verdict.OK
        for v in verdicts:
            if rank[v] > rank[out]:
                out = v
        return out


class RunStatus(str, Enum):
    """How one command ended."""

    OK = "ok"  #: exited 0
    FAILED = "failed"  #: exited non-zero or was killed by a signal
    TIMEOUT = "timeout"  #: ran past its deadline; its process group was killed
    SKIPPED = "skipped"  #: not run (binary missing, not permitted, not applicable); ``reason`` says why


class Level(str, Enum):
    """How much a node collection does: ``quick`` reads state only (no GPU work, a few seconds per node);
    ``standard`` adds the GPU micro-benchmark and the intra-node nccl-tests sweep; ``full`` is ``standard`` on a
    node plus, orchestrated across nodes, the cross-node bandwidth screen."""

    QUICK = "quick"
    STANDARD = "standard"
    FULL = "full"


class Collective(str, Enum):
    """The collective a ``*_perf`` binary measures (the binary name without ``_perf``)."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALLTOALL = "alltoall"
    ALLTOALLV = "alltoallv"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    SENDRECV = "sendrecv"
    GATHER = "gather"
    SCATTER = "scatter"
    HYPERCUBE = "hypercube"

    @property
    def binary(self) -> str:
        """The nccl-tests binary that measures it: ``all_reduce`` -> ``all_reduce_perf``."""
        return f"{self.value}_perf"


class Severity(str, Enum):
    """Severity of one finding."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"
    UNKNOWN = "unknown"

    @property
    def verdict(self) -> Verdict:
        return {
            Severity.INFO: Verdict.OK,
            Severity.WARNING: Verdict.WARNING,
            Severity.CRITICAL: Verdict.CRITICAL,
            Severity.UNKNOWN: Verdict.UNKNOWN,
        }[self]


def _verdict_in(v: object) -> object:
    if isinstance(v, str) and v.upper() in Verdict.__members__:
        return Verdict[v.upper()]
    return v


#: a Verdict that serialises as its name ("CRITICAL") in JSON and accepts the name or the number on input
VerdictName = Annotated[
    Verdict, BeforeValidator(_verdict_in), PlainSerializer(lambda v: v.name, return_type=str, when_used="json")
]


class SchedulerKind(str, Enum):
    """Which scheduler ran a job."""

    SLURM = "slurm"
    KUBERNETES = "kubernetes"
    RAY = "ray"
    NONE = "none"  #: no scheduler: a command run by hand on one or more hosts


class RankPlacement(Contract):
    """Where one rank of a job ran: ``host`` (a node name, on Kubernetes the node's, never the pod's),
    ``local_rank`` on that host and the GPU it used (``"GPU3"``, or a UUID) when known."""

    rank: int = Field(ge=0)
    host: str
    local_rank: int | None = Field(default=None, ge=0)
    gpu: str | None = None


class Job(Contract):
    """A job as fleetdx knows it: every run and postmortem carries the one it was about.

    ``nodes`` are host names in allocation order (a Slurm ``NodeList`` expanded; on Kubernetes the nodes the
    pods were scheduled on). ``start_time``/``end_time`` are Unix seconds; ``state`` is the scheduler's own
    word (Slurm: ``RUNNING``, ``COMPLETED``, ``FAILED``, ``TIMEOUT``, ``NODE_FAIL``, ``CANCELLED``...);
    ``exit_code`` and ``signal`` are the job's (Slurm ``ExitCode=code:signal``), ``None`` while it runs or
    when unknown. ``ranks`` maps each rank to its host, local rank and GPU when that can be known (empty
    otherwise). ``submit`` keeps what is needed to submit the same job again (Slurm: partition, account, QOS,
    time limit, node count, GPUs per node, command).
    """

    scheduler: SchedulerKind
    job_id: str | None = None
    name: str | None = None
    user: str | None = None
    nodes: list[str] = Field(default_factory=list)
    gpus_per_node: int | None = Field(default=None, ge=0)
    start_time: float | None = None
    end_time: float | None = None
    state: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    ranks: list[RankPlacement] = Field(default_factory=list)
    submit: dict[str, str] = Field(default_factory=dict)
