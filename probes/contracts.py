"""Contracts shared by every layer: the base model, verdicts, severities, finding codes and findings.

Every ``--json`` output of fleetdx is a dump of a model built on :class:`Contract`.
Verdicts and exit codes follow the Nagios plugin convention (OK 0, WARNING 1, CRITICAL 2, UNKNOWN 3),
as LBNL NHC and Meta GCM health checks use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum, IntEnum
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

SCHEMA_VERSION = 1

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
    GEMM_SLOW = "GEMM_SLOW"
    HBM_SLOW = "HBM_SLOW"
    H2D_SLOW = "H2D_SLOW"
    # collective bandwidth
    NCCL_BUSBW_LOW = "NCCL_BUSBW_LOW"
    NCCL_WRONG_RESULTS = "NCCL_WRONG_RESULTS"
    NCCL_TEST_FAILED = "NCCL_TEST_FAILED"
    NCCL_TEST_HANG = "NCCL_TEST_HANG"
    NCCL_TESTS_NOT_MPI = "NCCL_TESTS_NOT_MPI"
    NCCL_TRANSPORT_FALLBACK = "NCCL_TRANSPORT_FALLBACK"
    STRAGGLER_NODE = "STRAGGLER_NODE"
    STRAGGLER_GPU = "STRAGGLER_GPU"


class Finding(Contract):
    """One diagnosed fact about a node, GPU, link or run.

    ``subject`` names what the finding is about inside the node (``GPU3``, ``GPU3-mlx5_2``, ``mlx5_1/1``);
    ``evidence`` holds the raw cells, figures and file names it rests on, so a person can check it.
    """

    code: FindingCode
    severity: Severity
    node: str | None = None
    subject: str
    message: str
    evidence: dict[str, EvidenceValue] = Field(default_factory=dict)


def _verdict_in(v: object) -> object:
    if isinstance(v, str) and v.upper() in Verdict.__members__:
        return Verdict[v.upper()]
    return v


#: a Verdict that serialises as its name ("CRITICAL") in JSON and accepts the name or the number on input
VerdictName = Annotated[
    Verdict, BeforeValidator(_verdict_in), PlainSerializer(lambda v: v.name, return_type=str, when_used="json")
]
