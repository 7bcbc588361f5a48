"""The finding codes and scopes: stable names, each code with one row in ``codes.yaml``
(:mod:`fleetdx.orchestrator.judgement.catalog`)."""

from __future__ import annotations

from enum import Enum


class FindingCode(str, Enum):
    """Stable finding codes. Never rename one; add new ones, each with its row in ``codes.yaml`` and a test that
    emits it (``STRAGGLER_GPU`` was listed but emitted by nothing: the catalog dropped it)."""

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
    IB_PORT_ERRORS = "IB_PORT_ERRORS"
    IB_LINK_FLAP = "IB_LINK_FLAP"
    IB_LINK_DEGRADED = "IB_LINK_DEGRADED"
    DCGM_DIAG_FAILED = "DCGM_DIAG_FAILED"
    DCGM_HEALTH = "DCGM_HEALTH"
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
    SLURM_PREEMPTED = "SLURM_PREEMPTED"
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
    STEP_LOW_MFU = "STEP_LOW_MFU"
    # a running job followed live (fleetdx watch)
    STEP_HANG = "STEP_HANG"
    STEP_JOB_SLOWDOWN = "STEP_JOB_SLOWDOWN"


class Scope(str, Enum):
    """What a finding is about."""

    NODE = "node"
    GPU = "gpu"
    LINK = "link"  #: an NVLink/PCIe link, or a pair or group of nodes measured together
    NIC = "nic"
    RANK = "rank"
    JOB = "job"
