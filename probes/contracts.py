"""The shared vocabulary and contracts of every layer: the base model, run status, probe level, collective,
verdicts, severities, finding codes and findings.

Every ``--json`` output of fleetdx is a dump of a model built on :class:`Contract`.
Verdicts and exit codes follow the Nagios plugin convention (OK 0, WARNING 1, CRITICAL 2, UNKNOWN 3),
as LBNL NHC and Meta GCM health checks use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum, IntEnum
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator

#: version of every JSON contract (reports, bundles, spool files). 2: ``Finding.nodes`` (a list) replaces
#: ``Finding.node``; ``RunReport.schedule`` holds a bandwidth run's schedule, ``level`` only a probe level.
#: Version-1 documents are read and upgraded (:meth:`Finding._upgrade_v1`, ``RunReport``'s validator).
SCHEMA_VERSION = 2

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


class FindingCode(str, Enum):
    """Stable finding codes. Never rename one; add new ones. The README documents each."""

    # topology/ (node graph analyses)
    TOPO_GPU_PAIR_SYS = "TOPO_GPU_PAIR_SYS"
    TOPO_NVLINK_DEGRADED = "TOPO_NVLINK_DEGRADED"
    TOPO_GPU_NIC_REMOTE = "TOPO_GPU_NIC_REMOTE"
    TOPO_NIC_OVERSUBSCRIBED = "TOPO_NIC_OVERSUBSCRIBED"
    TOPO_AFFINITY_MISSING = "TOPO_AFFINITY_MISSING"
    TOPO_MISMATCH_PEERS = "TOPO_MISMATCH_PEERS"
    # pre-flight node health
    NODE_UNREACHABLE = "NODE_UNREACHABLE"
    PROBE_TIMEOUT = "PROBE_TIMEOUT"
    PROBE_FAILED = "PROBE_FAILED"
    PARSE_FAILED = "PARSE_FAILED"
    GPU_COUNT_MISMATCH = "GPU_COUNT_MISMATCH"
    GPU_FOREIGN_PROCESS = "GPU_FOREIGN_PROCESS"
    GPU_ECC_UNCORRECTABLE = "GPU_ECC_UNCORRECTABLE"
    GPU_ROW_REMAP_PENDING = "GPU_ROW_REMAP_PENDING"
    GPU_ROW_REMAP_FAILURE = "GPU_ROW_REMAP_FAILURE"
    GPU_CLOCKS_THROTTLED = "GPU_CLOCKS_THROTTLED"
    PCIE_LINK_DEGRADED = "PCIE_LINK_DEGRADED"
    IB_PORT_DOWN = "IB_PORT_DOWN"
    GPU_XID = "GPU_XID"
    GPU_LOST = "GPU_LOST"
    GEMM_SLOW = "GEMM_SLOW"
    HBM_SLOW = "HBM_SLOW"
    H2D_SLOW = "H2D_SLOW"
    # collective bandwidth
    NCCL_BUSBW_LOW = "NCCL_BUSBW_LOW"
    NCCL_WRONG_RESULTS = "NCCL_WRONG_RESULTS"
    NCCL_TEST_FAILED = "NCCL_TEST_FAILED"
    NCCL_TEST_HANG = "NCCL_TEST_HANG"
    NCCL_TEST_MISCONFIGURED = "NCCL_TEST_MISCONFIGURED"
    NCCL_TESTS_NOT_MPI = "NCCL_TESTS_NOT_MPI"
    NCCL_TRANSPORT_FALLBACK = "NCCL_TRANSPORT_FALLBACK"
    STRAGGLER_NODE = "STRAGGLER_NODE"
    STRAGGLER_GPU = "STRAGGLER_GPU"
    # postmortem causes of a failed job (orchestrator/postmortem)
    GPU_HW_FAULT = "GPU_HW_FAULT"
    NCCL_TIMEOUT = "NCCL_TIMEOUT"
    NCCL_NETWORK_ERROR = "NCCL_NETWORK_ERROR"
    NCCL_INTERNAL_ERROR = "NCCL_INTERNAL_ERROR"
    CUDA_ERROR = "CUDA_ERROR"
    OOM_GPU = "OOM_GPU"
    OOM_HOST = "OOM_HOST"
    PROCESS_CRASH = "PROCESS_CRASH"
    SLURM_TIME_LIMIT = "SLURM_TIME_LIMIT"
    NODE_FAILURE = "NODE_FAILURE"
    CONFIG_ERROR = "CONFIG_ERROR"
    UNKNOWN = "UNKNOWN"
    # step-time decomposition of a slow job (orchestrator/steps)
    STEP_DATA_BOUND = "STEP_DATA_BOUND"
    STEP_COMM_BOUND = "STEP_COMM_BOUND"
    STEP_LAUNCH_BOUND = "STEP_LAUNCH_BOUND"
    STEP_COMPUTE_BOUND = "STEP_COMPUTE_BOUND"
    STEP_H2D_BOUND = "STEP_H2D_BOUND"
    STEP_BURSTY = "STEP_BURSTY"
    STEP_STRAGGLER_RANK = "STEP_STRAGGLER_RANK"


class Finding(Contract):
    """One diagnosed fact about a node, GPU, link, group of nodes or run.

    ``nodes`` lists every host the finding is about, sorted as the finding's producer gave them: one host for
    a node finding, two or more for a pair or group finding (a slow pair, a hung collective), none for a
    run-wide one. ``subject`` names what the finding is about inside them (``GPU3``, ``GPU3-mlx5_2``,
    ``mlx5_1/1``, ``gpu01,gpu02``); ``evidence`` holds the raw cells, figures and file names it rests on, so a
    person can check it.

    ``node=HOST`` is accepted on input as shorthand for ``nodes=[HOST]`` (and is how version-1 documents
    name their host); it is not a field and never serialised.
    """

    code: FindingCode
    severity: Severity
    nodes: list[str] = Field(default_factory=list)
    subject: str
    message: str
    evidence: dict[str, EvidenceValue] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _upgrade_v1(cls, data: object) -> object:
        if isinstance(data, dict) and "node" in data:
            data = dict(data)
            node = data.pop("node")
            if "nodes" in data:
                raise ValueError("give either node or nodes, not both")
            data["nodes"] = [node] if node else []
        return data

    @property
    def node(self) -> str | None:
        """The host when the finding is about exactly one node, else ``None`` (run-wide or several)."""
        return self.nodes[0] if len(self.nodes) == 1 else None


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
