"""The contracts of step-time decomposition: one rank's steps broken into stages, GPU time shares, kernel and
op statistics, and the report ``fleetdx steps --json`` prints.

Units: milliseconds for step and stage times (``*_ms``), microseconds for GPU activity sums (``*_us``, as
traces and HTA give them), percent (0-100) for ``*_pct``.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import Field

from fleetdx.orchestrator.judgement.envelope import Report
from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import FleetdxError


class StepsError(FleetdxError):
    """An input that cannot be decomposed into steps: no ``ProfilerStep#N`` span, no step line, no rank."""


class Stage(str, Enum):
    """The stages of a training step, in order (issue 13; PyTorch performance tuning guide's vocabulary)."""

    DATA = "data"  #: waiting for the next batch
    H2D = "h2d"  #: host-to-device copy of the batch
    FORWARD = "forward"
    BACKWARD = "backward"
    GRAD_SYNC = "grad_sync"  #: exposed gradient communication (the part not hidden under other work)
    OPTIMIZER = "optimizer"
    CHECKPOINT = "checkpoint"  #: checkpointing and logging
    OTHER = "other"  #: step time in no stage


STAGE_ORDER = [s.value for s in Stage]
#: the one stage of a step read from a training log: its stages are not printed
UNKNOWN_STAGE = "unknown"


class GpuStep(Contract):
    """GPU activity of one step (kernels attributed to the step by their CPU launch), ms."""

    busy_ms: float  #: union of every kernel, memcpy and memset
    compute_ms: float  #: union of computation kernels (HTA's COMPUTATION)
    comm_ms: float  #: union of communication kernels (``^nccl.*Kernel``)
    comm_exposed_ms: float  #: communication not overlapped by computation
    memory_ms: float  #: union of memcpy/memset
    kernels: int  #: kernels launched (memcpy/memset not counted)


class StepSample(Contract):
    """One step of one rank: its time and the stage partition of it (ms; stages sum to ``step_ms``). From a
    trace with GPU activity, ``step_ms`` is the step's period on the GPU timeline and the stages partition it
    (``orchestrator/steps/decompose.py``); the training thread's own view is kept in ``host_step_ms`` and
    ``host_stages_ms``."""

    step: int
    step_ms: float
    stages_ms: dict[str, float]
    gpu: GpuStep | None = None
    #: floating-point operations of the step's CPU ops (a trace's FLOPs: ``args.flops`` or matmul shapes)
    flops: float | None = None
    host_step_ms: float | None = None  #: the ``ProfilerStep#N`` span (GPU traces only)
    host_stages_ms: dict[str, float] | None = None  #: the host partition of that span (GPU traces only)


class TemporalBreakdown(Contract):
    """HTA's temporal breakdown of one rank (``get_temporal_breakdown``): over the span from the first GPU
    activity's start to the last one's end, the time no kernel runs (idle), the union of computation kernels
    (compute), and the rest of the busy time (non-compute: communication and memory kernels)."""

    idle_us: float
    compute_us: float
    non_compute_us: float
    kernel_us: float  #: the span

    def pct(self) -> dict[str, float]:
        """``{"idle", "compute", "non_compute"}`` in percent of the span (HTA rounds to 2 decimals too)."""
        k = self.kernel_us or 1.0
        return {
            "idle": round(100 * self.idle_us / k, 2),
            "compute": round(100 * self.compute_us / k, 2),
            "non_compute": round(100 * self.non_compute_us / k, 2),
        }


class KernelStats(Contract):
    """Size distribution of the GPU kernels (memcpy/memset excluded) of the decomposed steps."""

    count: int
    per_step: float
    median_us: float
    p90_us: float
    tiny_pct: float  #: kernels shorter than 10 us
    short_pct: float | None  #: kernels shorter than their CPU launch call (HTA kernel launch stats)


class KernelClassShare(Contract):
    """One class of GPU activity over the decomposed steps (:mod:`fleetdx.orchestrator.steps.kernels`): summed
    duration (us; overlapping streams counted each), its share of all activities' summed duration (%), the
    count, and the time-weighted mean of Kineto's ``est. achieved occupancy %`` of its kernels (``None`` where
    the trace has none)."""

    kernel_class: str
    time_us: float
    share_pct: float
    count: int
    occupancy_pct: float | None = None


class MatmulGroup(Contract):
    """Matrix multiplications of one size counted from their shapes in the decomposed steps: FLOPs and the
    least bytes moved (both per op), and how many ran; their arithmetic intensity is ``flops / bytes``."""

    flops: float
    bytes: float
    count: int


class CpuOpStats(Contract):
    """``cpu_op`` events on the training thread within the steps: the dispatch rate of a CPU-only trace."""

    per_step: float
    median_us: float


class RankSteps(Contract):
    """One rank's decomposition."""

    rank: int
    world_size: int | None = None
    host: str | None = None
    source: str
    input: Literal["kineto", "steptimer", "log"]  #: "log": step times printed in a training log
    timing: str  #: "trace" (profiler timestamps), or the StepTimer's "wall"/"cuda-events"/"synchronize"
    steps: list[StepSample]
    temporal: TemporalBreakdown | None = None
    comm_exposed_pct: float | None = None  #: exposed / total communication time, percent
    kernels: KernelStats | None = None
    cpu_ops: CpuOpStats | None = None
    missing: list[str] = Field(default_factory=list)  #: what this input cannot tell, in words
    device: str | None = None  #: the CUDA device name of a trace's ``deviceProperties`` (one model on the node)
    kernel_classes: list[KernelClassShare] | None = None  #: GPU time by kernel class, largest first
    gemm_dtype: str | None = None  #: the data type most GEMM time runs in, from kernel names (``kernels.py``)
    #: where ``StepSample.flops`` come from: ``"trace args.flops"``, ``"matmul shapes"`` (Input Dims), or both
    flops_from: str | None = None
    #: share (%) of GPU kernel time in kernels a shapes count misses (convolutions, fused attention)
    uncounted_kernel_pct: float | None = None
    #: the matmuls counted from shapes, by size (bytes known): their arithmetic intensity against the roofline
    matmuls: list[MatmulGroup] | None = None
    #: why the trace's FLOPs are a lower bound (``None``: not known to be): GEMM kernels no counted op explains
    flops_lower_bound: str | None = None


class Mfu(Contract):
    """Achieved FLOP/s against the GPU's dense peak (MFU; Chowdhery et al. 2022, "PaLM", appendix B), of one
    rank or of the job. ``flops_per_step``: FLOPs per step on this rank (the job: all ranks analysed);
    ``achieved_tflops``: those FLOPs over the median step time; ``peak_tflops``: the table's dense peak
    (:mod:`fleetdx.orchestrator.steps.peaks`) for ``gpu_model`` and ``dtype``, times the GPUs; ``mfu_pct``:
    achieved over peak. ``None`` where a figure is unknown; ``note`` says why in words."""

    device: str | None = None  #: CUDA device name, ``CPU`` for a CPU-only trace, ``None`` unknown
    gpu_model: str | None = None  #: the peak table's row
    dtype: str | None = None
    dtype_from: str | None = None  #: ``--dtype``, ``GEMM kernel names`` or ``assumed``
    flops_per_step: float | None = None
    flops_from: str | None = None  #: ``--flops-per-step``, ``trace args.flops``, ``matmul shapes``
    achieved_tflops: float | None = None
    peak_tflops: float | None = None
    mfu_pct: float | None = None
    lower_bound: bool = False  #: FLOPs from shapes miss kernels of the trace (convolutions, fused attention)
    #: the GPU's balance point for ``dtype`` (peak FLOP/s over memory bandwidth), FLOPs per byte
    balance_flops_per_byte: float | None = None
    #: of the matmuls counted from shapes, the share (%) of their roofline time (``max(FLOPs / peak, bytes /
    #: bandwidth)`` each) in those whose intensity is under the balance point: memory-bound
    matmul_memory_bound_pct: float | None = None
    note: str | None = None


class JobMfu(Mfu):
    """The job's MFU over the ``ranks`` analysed with a figure, and what the GPU time went to: the median over
    ranks of the GPU busy share (100 - HTA's idle %) and of each kernel class's share of GPU time."""

    ranks: int = 0
    gpu_busy_pct: float | None = None
    kernel_classes_pct: dict[str, float] = Field(default_factory=dict)


class StepTimeMs(Contract):
    median: float
    p95: float


class TemporalPct(Contract):
    idle: float
    compute: float
    non_compute: float


class RankSummary(Contract):
    """One rank in ``fleetdx steps --json`` (issue 13, item 5): medians over its steps."""

    rank: int
    host: str | None
    steps: int
    step_time_ms: StepTimeMs
    stages_ms: dict[str, float]
    temporal_breakdown_pct: TemporalPct | None
    comm_exposed_pct: float | None
    mfu: Mfu | None = None
    kernel_classes: list[KernelClassShare] | None = None


class StageChange(Contract):
    """One stage (or ``step``: the whole step) from a baseline run to this one: job medians (ms), the change,
    and the 95% noise band of the change (``None`` with fewer than 2 steps in a run)."""

    stage: str
    baseline_ms: float
    current_ms: float
    change_ms: float
    change_pct: float | None
    noise_ms: float | None
    significant: bool  #: |change| above the noise band


class RankStageChange(StageChange):
    """One rank's own stage (or ``step``) from the baseline run to this one: that rank's medians (ms), matched
    by rank number, with the same noise band as :class:`StageChange`."""

    rank: int


class BaselineComparison(Contract):
    """``fleetdx steps --baseline DIR``: stage-by-stage change in step time, and in goodput (steps per second).

    ``step``, ``stages`` and ``goodput_change_pct`` compare job medians: a stage that slowed on one rank of many
    (a one-rank straggler) barely moves them, so ``rank_changes`` lists the ranks whose *own* stage or step
    changed beyond its noise band and by at least 5% of that rank's baseline step, largest change first (at most
    :data:`MAX_RANK_CHANGES`)."""

    baseline: str  #: the baseline's path as given
    step: StageChange
    stages: list[StageChange]
    goodput_change_pct: float | None
    rank_changes: list[RankStageChange] = Field(default_factory=list)


#: rank changes kept in a comparison (the largest)
MAX_RANK_CHANGES = 50


class StepsReport(Report):
    """What ``fleetdx steps --json`` prints: the report envelope
    (:class:`~fleetdx.orchestrator.judgement.envelope.Report`: ``missing_evidence`` lists the inputs that could
    not be used), then ``ranks`` and ``baseline`` (``null`` unless ``--baseline`` is given)."""

    kind: Literal["steps"] = "steps"
    ranks: list[RankSummary]
    baseline: BaselineComparison | None = None
    mfu: JobMfu | None = None  #: the job's achieved TFLOP/s and MFU (``note`` says what is unknown)
