"""The one finding of every job: pre-flight, analyze, bandwidth, postmortem and steps all judge with
:class:`Finding`, and every code a finding can carry is a :class:`FindingCode` with one row in the code catalog
(:mod:`fleetdx.orchestrator.judgement.catalog`).

A finding is about a ``scope`` (a node, a GPU, a link, a NIC, a rank or the whole job), names every host it
is about in ``nodes`` (the first is where it happened), the ``rank`` and ``gpu`` when they are known, and what
inside them it is about in ``subject``. ``evidence`` lists the raw lines it rests on (file, 1-based line, text
as read: a log line, a kernel-log line, a row of a tool's output); ``details`` holds the figures and cells a
rule computed from them (typed JSON scalars, lists and flat objects), so a person can check it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

from pydantic import Field, model_validator

from fleetdx.probes.contracts import Contract, EvidenceValue, Severity


class FindingCode(str, Enum):
    """Stable finding codes. Never rename one; add new ones, each with its row in ``codes.yaml``."""

    # topology (node graph analyses)
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
    # postmortem causes of a failed job
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
    # step-time decomposition of a slow job
    STEP_DATA_BOUND = "STEP_DATA_BOUND"
    STEP_COMM_BOUND = "STEP_COMM_BOUND"
    STEP_LAUNCH_BOUND = "STEP_LAUNCH_BOUND"
    STEP_COMPUTE_BOUND = "STEP_COMPUTE_BOUND"
    STEP_H2D_BOUND = "STEP_H2D_BOUND"
    STEP_BURSTY = "STEP_BURSTY"
    STEP_STRAGGLER_RANK = "STEP_STRAGGLER_RANK"


class Scope(str, Enum):
    """What a finding is about."""

    NODE = "node"
    GPU = "gpu"
    LINK = "link"  #: an NVLink/PCIe link, or a pair or group of nodes measured together
    NIC = "nic"
    RANK = "rank"
    JOB = "job"


class EvidenceLine(Contract):
    """One raw line a finding rests on: the file as given (or the probe's output name), its 1-based line
    number (0 when the source has no lines), the text as read."""

    file: str
    line: int = Field(ge=0)
    text: str


class Finding(Contract):
    """One diagnosed fact of any job (see the module doc).

    ``nodes`` lists every host the finding is about, sorted as its producer gave them, the host where it
    happened first: one for a node finding, two or more for a pair or group (a slow pair, a hung collective),
    none for a job-wide one (a time limit). ``rank`` is the torch global rank, ``gpu`` the device as the
    evidence names it (``GPU3``, ``cuda:3``, ``PCI:0000:3b:00``); ``time`` ISO 8601 UTC when the stamp had a
    full date, else the stamp as printed. ``action`` says what to do (the catalog's when the producer gives
    none); ``scope`` defaults to the catalog's.

    Version-2 documents (``evidence`` a dict of figures, ``node`` for one host) are read and upgraded: the dict
    becomes ``details``.
    """

    code: FindingCode
    severity: Severity
    scope: Scope = Scope.JOB  #: filled from the catalog when not given (this default is never used)
    nodes: list[str] = Field(default_factory=list)
    rank: int | None = None
    gpu: str | None = None
    subject: str = ""
    message: str
    action: str = ""
    evidence: list[EvidenceLine] = Field(default_factory=list)
    time: str | None = None
    details: dict[str, EvidenceValue] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _upgrade_and_default(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "node" in data:
            node = data.pop("node")
            if "nodes" in data:
                raise ValueError("give either node or nodes, not both")
            data["nodes"] = [node] if node else []
        if isinstance(data.get("evidence"), dict):  # version 2: figures in ``evidence``
            if "details" in data:
                raise ValueError("a dict evidence (version 2) and details together")
            data["details"] = data.pop("evidence")
        if data.get("scope") is None or not data.get("action"):
            from fleetdx.orchestrator.judgement.catalog import spec

            try:
                row = spec(FindingCode(data.get("code")))
            except ValueError:
                return data  # an unknown code: the field's own validation says so
            if data.get("scope") is None:
                data["scope"] = row.scope
            if not data.get("action"):
                data["action"] = row.action
        return data

    @property
    def node(self) -> str | None:
        """The host when the finding is about exactly one node, else ``None`` (job-wide or several)."""
        return self.nodes[0] if len(self.nodes) == 1 else None

    @property
    def host(self) -> str | None:
        """The host where it happened (the first of ``nodes``), ``None`` for a job-wide finding."""
        return self.nodes[0] if self.nodes else None


_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.UNKNOWN: 2, Severity.INFO: 3}


def severity_rank(s: Severity) -> int:
    """0 for critical, 1 warning, 2 unknown, 3 info: the report order of severities."""
    return _SEVERITY_ORDER[s]


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` in report order: most severe first (critical, warning, unknown, info), then by nodes
    (job-wide findings first), finding code and subject. Postmortem causes keep their own ranked order."""
    return sorted(findings, key=lambda f: (_SEVERITY_ORDER[f.severity], f.nodes, f.code.value, f.subject))
