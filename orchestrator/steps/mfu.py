"""Achieved TFLOP/s and MFU per rank and job, and the finding when the GPU is busy but does little useful math.
Pure.

**MFU** (model FLOPs utilisation; Chowdhery et al. 2022, "PaLM: Scaling Language Modeling with Pathways",
arXiv:2204.02311, appendix B): the model's FLOPs per second over the GPUs' theoretical peak. Per rank:
``FLOPs per step / median step time``, over the dense peak of its GPU model and data type
(:mod:`fleetdx.orchestrator.steps.peaks`); the job: the ranks' achieved FLOP/s summed over their peaks summed.

The FLOPs per step come from, in this order:

1. ``--flops-per-step F``: the **job's** model FLOPs per training step, all ranks together; each of the ``W``
   ranks (the job's world size) is given ``F / W``. For a dense decoder-only transformer of ``N`` parameters
   trained on ``T`` tokens per step (the global batch), ``F ~ 6 N T`` (Kaplan et al. 2020, "Scaling Laws for
   Neural Language Models", arXiv:2001.08361, section 2.1: 2N per token forward, twice that backward; PaLM's
   appendix B adds the attention term ``6 L H Q T`` per token, ``L`` layers, ``H`` heads, ``Q`` head dim, ``T``
   the sequence length). Activation recomputation is *not* counted (that would be hardware FLOPs, HFU);
2. the trace's FLOPs (``with_flops=True``'s ``args.flops``, or the matmuls' shapes under ``record_shapes=True``:
   :mod:`fleetdx.probes.parsers.kineto`), per step, median over steps. A count from shapes misses GPU work no
   counted op explains (a library's own GEMMs, convolutions, fused attention): the MFU is then a lower bound,
   said in ``lower_bound`` and the note, and never condemns.

Without FLOPs there is no MFU: the note says "FLOPs unknown" and how to get them. A CPU-only trace gets its
achieved FLOP/s (the CPU's) but no MFU: the peak table is of GPUs. The data type is ``--dtype``, else the one
the GEMM kernels' names say (:func:`fleetdx.orchestrator.steps.kernels.name_dtype`), else bf16, said as assumed.

**Memory- or compute-bound matmuls**: where the matmuls' FLOPs come from their shapes, so do their bytes (the two
operands read, the result written: :func:`fleetdx.probes.parsers.kineto.matmul_bytes`); a matmul whose intensity
(FLOPs per byte) is under the GPU's balance point (peak FLOP/s over memory bandwidth: the roofline's ridge,
Williams, Waterman & Patterson 2009) is memory-bound. ``matmul_memory_bound_pct`` is the share of the matmuls'
roofline time (``max(FLOPs / peak, bytes / bandwidth)`` each) in memory-bound ones: skinny GEMMs (a small batch
or hidden size) that tensor cores cannot fill.

**STEP_LOW_MFU** (warning): the GPU is busy, HTA's idle share under 10% (the median over ranks), yet the job's
MFU is under 20%, from FLOPs that are not a lower bound. The 20%: well-tuned large-model training reaches 40-55%
(PaLM 540B: 46.2%, Chowdhery et al. 2022 table 3; Megatron-LM's 1T-parameter GPT on 3,072 A100s: 52% of peak,
Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters", SC'21); under half of
that the busy time goes mostly to work that is not the model's math. The finding names the kernel classes that
hold the GPU time (:mod:`fleetdx.orchestrator.steps.kernels`). A small model cannot fill a large GPU and may sit
under 20% by nature: the advice says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.steps.contracts import JobMfu, Mfu, RankSteps, StepsReport
from fleetdx.orchestrator.steps.peaks import DTYPES, PEAKS, GpuPeak, lookup
from fleetdx.probes.contracts import Contract, EvidenceValue, Severity
from fleetdx.probes.errors import ConfigError

#: the finding's thresholds (see the module docstring)
BUSY_IDLE_MAX_PCT = 10.0
LOW_MFU_PCT = 20.0
#: the note when no FLOPs are known
FLOPS_UNKNOWN = (
    "FLOPs unknown: capture with torch.profiler.profile(with_flops=True) (or record_shapes=True) or give "
    "--flops-per-step (about 6 x parameters x tokens per step for a dense transformer)"
)


class MfuOptions(Contract):
    """What ``fleetdx steps`` is told: ``gpu`` (a model of the peak table or a CUDA device name: the traces'
    ``deviceProperties`` otherwise), ``dtype`` (one of :data:`~fleetdx.orchestrator.steps.peaks.DTYPES`), and the
    job's model FLOPs per step (all ranks together)."""

    gpu: str | None = None
    dtype: str | None = None
    flops_per_step: float | None = None

    def check(self) -> None:
        """Raises ConfigError: an unknown GPU, an unknown data type, or FLOPs per step that are not positive."""
        if self.gpu is not None and lookup(self.gpu) is None:
            raise ConfigError(f"--gpu {self.gpu!r}: not in the peak table; one of {', '.join(PEAKS)}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ConfigError(f"--dtype {self.dtype!r}: one of {', '.join(DTYPES)}")
        if self.flops_per_step is not None and not self.flops_per_step > 0:
            raise ConfigError(f"--flops-per-step {self.flops_per_step}: must be positive")


def _median_step_s(rs: RankSteps) -> float:
    return statistics.median(s.step_ms for s in rs.steps) / 1000 if rs.steps else 0.0


def _flops(rs: RankSteps, world: int, opts: MfuOptions) -> tuple[float | None, str | None]:
    if opts.flops_per_step is not None:
        return opts.flops_per_step / world, "--flops-per-step"
    counted = [s.flops for s in rs.steps if s.flops is not None]
    if counted:
        return statistics.median(counted), rs.flops_from
    return None, None


def _dtype(rs: RankSteps, opts: MfuOptions) -> tuple[str, str]:
    if opts.dtype is not None:
        return opts.dtype, "--dtype"
    if rs.gemm_dtype is not None:
        return rs.gemm_dtype, "GEMM kernel names"
    return "bf16", "assumed"


def rank_mfu(rs: RankSteps, world: int, opts: MfuOptions) -> Mfu:
    """One rank's :class:`Mfu` (``world``: the job's ranks, for ``--flops-per-step``)."""
    flops, flops_from = _flops(rs, world, opts)
    step_s = _median_step_s(rs)
    achieved = flops / step_s / 1e12 if flops is not None and step_s > 0 else None
    cpu_only = rs.input == "kineto" and rs.temporal is None
    device = "CPU" if cpu_only else rs.device
    dtype, dtype_from = _dtype(rs, opts)
    lower = flops_from not in (None, "--flops-per-step") and rs.flops_lower_bound is not None
    base = Mfu(
        device=device,
        dtype=dtype,
        dtype_from=dtype_from,
        flops_per_step=flops,
        flops_from=flops_from,
        achieved_tflops=round(achieved, 6) if achieved is not None else None,
        lower_bound=lower,
    )
    if cpu_only:
        return base.model_copy(
            update={
                "dtype": None,
                "dtype_from": None,
                "note": "no GPU in the trace: the CPU's achieved FLOP/s; MFU is against a GPU's peak and does "
                "not apply" + ("" if flops is not None else f"; {FLOPS_UNKNOWN}"),
            }
        )
    peak: GpuPeak | None = lookup(opts.gpu) if opts.gpu else (lookup(rs.device) if rs.device else None)
    notes: list[str] = []
    tflops = peak.tflops(dtype) if peak is not None else None
    if peak is None:
        notes.append(
            f"GPU model {rs.device!r} not in the peak table: give --gpu"
            if rs.device
            else "GPU model unknown (no single device name in deviceProperties, or a log): give --gpu"
        )
    elif tflops is None:
        notes.append(f"{peak.model} has no {dtype} tensor-core mode in its datasheet: give --dtype")
    if flops is None:
        notes.append(FLOPS_UNKNOWN)
    elif lower:
        notes.append(f"a lower bound: {rs.flops_lower_bound}")
    mfu = 100 * achieved / tflops if achieved is not None and tflops else None
    balance = peak.balance(dtype) if peak is not None else None
    return base.model_copy(
        update={
            "gpu_model": peak.model if peak is not None else None,
            "peak_tflops": tflops,
            "mfu_pct": round(mfu, 3) if mfu is not None else None,
            "balance_flops_per_byte": round(balance, 1) if balance is not None else None,
            "matmul_memory_bound_pct": _memory_bound_pct(rs, peak, dtype),
            "note": "; ".join(notes) or None,
        }
    )


def _memory_bound_pct(rs: RankSteps, peak: GpuPeak | None, dtype: str) -> float | None:
    """Of the rank's matmuls counted from shapes, the share (%) of their roofline time in those under the
    balance point (Williams et al. 2009: time = max(FLOPs / peak, bytes / bandwidth))."""
    tflops = peak.tflops(dtype) if peak is not None else None
    if not rs.matmuls or peak is None or not tflops or peak.hbm_tbps <= 0:
        return None
    balance = tflops / peak.hbm_tbps
    total = bound = 0.0
    for g in rs.matmuls:
        t = g.count * max(g.flops / (tflops * 1e12), g.bytes / (peak.hbm_tbps * 1e12))
        total += t
        if g.flops / g.bytes < balance:
            bound += t
    return round(100 * bound / total, 2) if total > 0 else None


def job_mfu(ranks: Sequence[RankSteps], per_rank: Sequence[Mfu]) -> JobMfu:
    """The job's :class:`JobMfu` from the ranks' (same order): sums over the ranks with a figure, medians of the
    GPU busy share and of each kernel class's share over the ranks with GPU activity, and of the matmuls'
    memory-bound share."""
    with_mfu = [m for m in per_rank if m.mfu_pct is not None and m.achieved_tflops and m.peak_tflops]
    gpu = [rs for rs in ranks if rs.temporal is not None]
    busy = statistics.median(100 - rs.temporal.pct()["idle"] for rs in gpu if rs.temporal) if gpu else None
    classes: dict[str, list[float]] = {}
    for rs in gpu:
        for c in rs.kernel_classes or []:
            classes.setdefault(c.kernel_class, []).append(c.share_pct)
    shares = {k: round(statistics.median(v + [0.0] * (len(gpu) - len(v))), 2) for k, v in classes.items()}
    shares = dict(sorted(shares.items(), key=lambda kv: -kv[1]))
    first = per_rank[0] if per_rank else Mfu()
    bound = [m.matmul_memory_bound_pct for m in per_rank if m.matmul_memory_bound_pct is not None]
    common = {
        "balance_flops_per_byte": first.balance_flops_per_byte,
        "matmul_memory_bound_pct": round(statistics.median(bound), 2) if bound else None,
        "device": first.device,
        "gpu_model": first.gpu_model,
        "dtype": first.dtype,
        "dtype_from": first.dtype_from,
        "flops_from": first.flops_from,
        "gpu_busy_pct": round(busy, 2) if busy is not None else None,
        "kernel_classes_pct": shares,
    }
    if not with_mfu:
        achieved = [m.achieved_tflops for m in per_rank if m.achieved_tflops is not None]
        notes = sorted({m.note for m in per_rank if m.note})
        counted = [m.flops_per_step for m in per_rank if m.flops_per_step is not None]
        return JobMfu(
            **common,
            ranks=len(achieved),
            flops_per_step=sum(counted) if counted else None,
            achieved_tflops=round(sum(achieved), 6) if achieved else None,
            lower_bound=any(m.lower_bound for m in per_rank),
            note="; ".join(notes) or FLOPS_UNKNOWN,
        )
    achieved_sum = sum(m.achieved_tflops or 0.0 for m in with_mfu)
    peak_sum = sum(m.peak_tflops or 0.0 for m in with_mfu)
    lower = any(m.lower_bound for m in with_mfu)
    left = len(per_rank) - len(with_mfu)
    notes = sorted({m.note for m in with_mfu if m.note})
    if left:
        notes.append(f"{left} rank(s) without a figure left out")
    return JobMfu(
        **common,
        ranks=len(with_mfu),
        flops_per_step=sum(m.flops_per_step or 0.0 for m in with_mfu),
        achieved_tflops=round(achieved_sum, 6),
        peak_tflops=round(peak_sum, 3),
        mfu_pct=round(100 * achieved_sum / peak_sum, 3),
        lower_bound=lower,
        note="; ".join(notes) or None,
    )


def low_mfu_finding(job: JobMfu, subject: str, nodes: list[str]) -> Finding | None:
    """STEP_LOW_MFU when the GPU is busy (idle under :data:`BUSY_IDLE_MAX_PCT`) and the job's MFU, not a lower
    bound, is under :data:`LOW_MFU_PCT`; ``None`` otherwise (see the module docstring)."""
    if job.mfu_pct is None or job.lower_bound or job.gpu_busy_pct is None:
        return None
    if job.gpu_busy_pct < 100 - BUSY_IDLE_MAX_PCT or job.mfu_pct >= LOW_MFU_PCT:
        return None
    top = [(k, v) for k, v in job.kernel_classes_pct.items() if v > 0][:3]
    where = ", ".join(f"{k} {v:.0f}%" for k, v in top) or "no kernel classes known"
    advice = {
        "elementwise": "fuse elementwise and normalisation kernels (torch.compile; compile time, static shapes)",
        "communication": "overlap or shrink communication (bucketing, gradient accumulation, a faster fabric)",
        "memcpy": "cut copies (pinned memory, fewer host round-trips, no .item() in the step)",
        "gemm": "use the tensor cores (bf16 autocast or TF32: numerics to validate) and larger GEMMs (batch, width)",
        "other": "profile the other kernels (Nsight Compute)",
    }
    tips = "; ".join(advice[k] for k, _ in top if k in advice)
    fp32 = ""
    if job.dtype == "fp32" and job.gpu_model and PEAKS[job.gpu_model].tflops("tf32"):
        fp32 = (
            f"; the GEMMs run in FP32 without tensor cores ({PEAKS[job.gpu_model].fp32:g} TFLOP/s peak against "
            f"{PEAKS[job.gpu_model].tf32:g} with TF32)"
        )
    details: dict[str, EvidenceValue] = {
        "mfu_pct": job.mfu_pct,
        "achieved_tflops": job.achieved_tflops,
        "peak_tflops": job.peak_tflops,
        "gpu_model": job.gpu_model,
        "dtype": job.dtype,
        "flops_from": job.flops_from,
        "gpu_busy_pct": job.gpu_busy_pct,
        "kernel_classes_pct": {k: v for k, v in job.kernel_classes_pct.items()},
        "threshold_mfu_pct": LOW_MFU_PCT,
        "threshold_idle_pct": BUSY_IDLE_MAX_PCT,
        "ranks": job.ranks,
    }
    return Finding(
        code=FindingCode.STEP_LOW_MFU,
        severity=Severity.WARNING,
        nodes=nodes,
        subject=subject,
        message=(
            f"the GPU is busy {job.gpu_busy_pct:.0f}% of the time but does {job.achieved_tflops:.1f} TFLOP/s, "
            f"{job.mfu_pct:.1f}% of the {job.gpu_model} {job.dtype} peak (MFU; well-tuned training reaches "
            f"40-55%); its time goes to {where}{fp32}: {tips}. A small model cannot fill a large GPU: compare "
            "with the MFU of the same model at a larger batch"
        ),
        details=details,
    )


def _tflops(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def summary_lines(rep: StepsReport) -> list[str]:
    """The report's MFU in words, one line each (``fleetdx steps`` and its HTML page): the job's MFU, the note,
    the matmuls' roofline, the GPU time by kernel class; none for an input with neither FLOPs nor a GPU."""
    job = rep.mfu
    if job is None or (job.achieved_tflops is None and not job.kernel_classes_pct and job.device in (None, "CPU")):
        return []
    out: list[str] = []
    if job.mfu_pct is not None:
        bound = "at least " if job.lower_bound else ""
        ranks = f"{job.ranks} rank{'s' if job.ranks != 1 else ''}"
        out.append(
            f"MFU of the job ({ranks}): {bound}{job.mfu_pct:.3g}%: {_tflops(job.achieved_tflops)} of "
            f"{_tflops(job.peak_tflops)} TFLOP/s ({job.gpu_model or '?'} {job.dtype} dense peak, dtype "
            f"{job.dtype_from}; FLOPs from {job.flops_from})"
        )
    if job.note:
        out.append(f"MFU: {job.note}")
    if job.matmul_memory_bound_pct is not None:
        out.append(
            f"matmuls counted from shapes: {job.matmul_memory_bound_pct:.0f}% of their roofline time is "
            f"memory-bound (intensity under {job.balance_flops_per_byte:g} FLOPs/byte, the {job.gpu_model} "
            f"{job.dtype} balance point)"
        )
    if job.kernel_classes_pct:
        occ: dict[str, list[float]] = {}
        for r in rep.ranks:
            for c in r.kernel_classes or []:
                if c.occupancy_pct is not None:
                    occ.setdefault(c.kernel_class, []).append(c.occupancy_pct)
        parts = [
            f"{k} {v:.1f}%" + (f" (occupancy {statistics.median(occ[k]):.0f}%)" if k in occ else "")
            for k, v in job.kernel_classes_pct.items()
        ]
        busy = f"GPU busy {job.gpu_busy_pct:.0f}%; " if job.gpu_busy_pct is not None else ""
        out.append(
            f"{busy}GPU time by kernel class (median over ranks; Kineto's estimated occupancy): {', '.join(parts)}"
        )
    return out
