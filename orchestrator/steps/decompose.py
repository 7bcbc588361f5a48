"""Decomposition of one rank's steps into stages, from a Kineto trace or a StepTimer log. Pure.

**Stages from a trace** partition each ``ProfilerStep#N`` span (the training thread's wall time of the step) in
this priority order; a moment covered by several stages counts for the first, time in none is ``other``:

1. ``data``: ``enumerate(DataLoader)#...__next__`` spans on the training thread (``torch/utils/data/
   dataloader.py``: the main process waits here for the next batch, whatever the number of workers);
2. ``h2d``: the CUDA runtime calls (``cudaMemcpyAsync``/``cudaMemcpy``) whose correlated GPU activity is a
   ``Memcpy HtoD`` (Kineto's ``correlation`` id links a ``cuda_runtime`` event to its GPU activity);
3. ``optimizer``: ``Optimizer.step#<Cls>.step`` and ``Optimizer.zero_grad#<Cls>.zero_grad``
   (``torch/optim/optimizer.py``) and ``## optimizer ##`` annotations;
4. ``backward``: from the first to the last ``autograd::engine::evaluate_function:`` span of the step, on any
   thread (``torch/csrc/autograd/engine.cpp``; CUDA backward runs on the device's autograd thread), and
   ``## backward ##`` annotations;
5. ``forward``: ``DistributedDataParallel.forward`` / ``FullyShardedDataParallel.forward`` / ``## forward ##``
   spans; without them, the time between the end of the step's data fetch and the start of backward;
6. ``grad_sync``: communication in flight (``nccl:*``/``gloo:*`` record functions on any thread, and NCCL
   kernels on the GPU) while none of the above runs: the **exposed** communication the training thread waits
   for (under DDP the all-reduce overlaps backward; only the wait after it is exposed);
7. ``checkpoint``: not visible in a profiler trace (0; the StepTimer measures it); ``other``: the rest (loss,
   logging, Python between stages).

These stages are host-side. With CUDA the CPU runs ahead of the GPU: in a GPU-bound job ``forward`` and
``backward`` on the host last as long as their kernel launches, and the host's wait for the GPU lands wherever
it blocks (measured on an H100: forward 0.8 ms and ``other`` 27 ms on the host, against 11.7 ms of forward
kernels). So a trace with GPU activity is **partitioned on the GPU timeline**, as the StepTimer's CUDA events
time it: each step's period runs from the end of the previous one (the first lasts as long as its ``ProfilerStep``) to
the end of its own GPU work (kernels,
memcpy and memset attributed to the step whose host code launched them, as HTA attributes kernels to
iterations: ``hta/common/trace.py`` ``add_iteration``), and never ends before its ``ProfilerStep`` does; in it,

* GPU busy time counts for the host stage that launched the work (the launch's ``cuda_runtime`` event, found by
  correlation id), in the order h2d, forward, backward, optimizer, data, checkpoint, other where work of several
  stages overlaps; communication kernels count as ``grad_sync`` where no other GPU work runs (the exposed part);
* GPU idle time counts for the host stage running at that moment (a data wait, a blocking copy, an exposed
  gloo all-reduce), ``other`` when none is.

``step_ms`` is then that period (its median over steps is the host's), and the host view is kept
(``host_step_ms``, ``host_stages_ms``). Each step also gets the GPU totals (:class:`GpuStep`: busy, compute,
communication and its exposed part, memory). On a GPU shared by several processes (time-slicing), a kernel's
duration includes the time it waited for the others' kernels: per-stage GPU time is then inflated where ranks
run side by side.

**Temporal breakdown** (:func:`temporal_breakdown`) is HTA's ``get_temporal_breakdown``
(``hta/analyzers/breakdown_analysis.py``) computed the same way: GPU activities with a stream and a
correlation id, launched before the start of the last ``ProfilerStep`` when the trace has two or more steps
(``Trace._filter_irrelevant_gpu_kernels``); idle = span - union; compute = union of computation kernels;
non-compute = the rest. HTA's "last ProfilerStep" is the latest event so named without a CUDA stream, and newer
Kineto also writes each ``ProfilerStep#N`` on the GPU timeline (``gpu_user_annotation``, no stream argument),
later than the CPU's: fleetdx takes the latest of both, as HTA does (on the H100 captures the last step's first
host-to-device copy counts: 1.5 points). HTA also rounds nanosecond timestamps inward to whole microseconds
(``ceil(ts)``, ``floor(ts + dur)``: ``hta/common/trace_parser.py`` ``round_down_time_stamps``), which takes up
to 2 us off every kernel; fleetdx keeps the nanoseconds. On traces of microsecond kernels the two then differ
(the H100 tiny-ops capture: compute 3.42 % against HTA's 1.50 %); with HTA's own switch
``HTA_DISABLE_NS_ROUNDING=1`` they agree within 0.05 point (tests/test_steps_hta.py).

**Stages from a StepTimer log** are the timer's own stages; ``other`` is the step time outside them.

**Step times printed in a training log** (:mod:`fleetdx.probes.parsers.steptime_log`) have no stages: each
step's whole time is the stage ``unknown`` (:data:`UNKNOWN_STAGE`), so stability and stragglers are judged on
the step time alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fleetdx.orchestrator.steps.contracts import (
    UNKNOWN_STAGE,
    CpuOpStats,
    GpuStep,
    KernelClassShare,
    KernelStats,
    MatmulGroup,
    RankSteps,
    Stage,
    StepSample,
    StepsError,
    TemporalBreakdown,
)
from fleetdx.orchestrator.steps.intervals import F, clip, length, subtract, uncovered
from fleetdx.orchestrator.steps.kernels import classify
from fleetdx.probes.parsers.kineto import GpuKind, KinetoTrace, Marker, Spans
from fleetdx.probes.parsers.steplog import StepLog

if TYPE_CHECKING:  # a training log's parser loads only to read one (steps.load)
    from fleetdx.probes.parsers.steptime_log import StepTimeLog

#: a kernel shorter than this is "tiny" (launch overhead on current GPUs is about 5-10 us: NVIDIA, "CUDA C++
#: Best Practices Guide", and HTA's kernel launch statistics)
TINY_KERNEL_US = 10.0
#: convolution and fused-attention kernels above this share (%) of kernel time make a shapes FLOP count partial
UNCOUNTED_MAX_PCT = 1.0
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)

_MEMORY = [int(k) for k in GpuKind if k.is_memory]
_KERNEL = [int(GpuKind.COMPUTE), int(GpuKind.COMM), int(GpuKind.OTHER)]


class _Sorted:
    """Spans as numpy arrays sorted by start, with the longest duration for window queries."""

    def __init__(self, spans: Spans, tid: int | None = None) -> None:
        ts = np.frombuffer(spans.ts, dtype=np.float64) if len(spans) else np.empty(0)
        dur = np.frombuffer(spans.dur, dtype=np.float64) if len(spans) else np.empty(0)
        if tid is not None and len(spans):
            keep = np.frombuffer(spans.tid, dtype=np.int64) == tid
            ts, dur = ts[keep], dur[keep]
        order = np.argsort(ts, kind="stable")
        self.start: F = ts[order]
        self.end: F = (ts + dur)[order]
        self.maxdur = float(dur.max()) if dur.size else 0.0

    @classmethod
    def of(cls, start: F, end: F) -> _Sorted:
        obj = cls(Spans())
        order = np.argsort(start, kind="stable")
        obj.start, obj.end = start[order], end[order]
        obj.maxdur = float((end - start).max()) if start.size else 0.0
        return obj

    def window(self, lo: float, hi: float) -> tuple[F, F]:
        i = int(np.searchsorted(self.start, lo - self.maxdur, side="left"))
        j = int(np.searchsorted(self.start, hi, side="left"))
        s, e = self.start[i:j], self.end[i:j]
        keep = e > lo
        return clip(s[keep], e[keep], lo, hi)


def rank_hint(source: str) -> int | None:
    """A rank number in a file name (``rank-3.json.gz``, ``steps-rank-3.jsonl``, ``rank3_trace.json``)."""
    m = _RANK_IN_NAME.search(Path(source).name)
    return int(m.group(1)) if m else None


def _gpu_columns(t: KinetoTrace) -> dict[str, np.ndarray]:
    g = t.gpu
    n = len(g)
    if n == 0:
        z = np.empty(0)
        return {"ts": z, "end": z, "stream": z.astype(np.int64), "corr": z.astype(np.int64), "kind": z.astype(np.int8)}
    ts = np.frombuffer(g.ts, dtype=np.float64)
    return {
        "ts": ts,
        "end": ts + np.frombuffer(g.dur, dtype=np.float64),
        "stream": np.frombuffer(g.stream, dtype=np.int64),
        "corr": np.frombuffer(g.correlation, dtype=np.int64),
        "kind": np.frombuffer(g.kind, dtype=np.int8),
    }


def _launch_columns(t: KinetoTrace) -> tuple[np.ndarray, F, F]:
    la = t.launches
    if len(la) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0), np.empty(0)
    corr = np.frombuffer(la.correlation, dtype=np.int64)
    ts = np.frombuffer(la.ts, dtype=np.float64)
    dur = np.frombuffer(la.dur, dtype=np.float64)
    order = np.argsort(corr, kind="stable")
    return corr[order], ts[order], dur[order]


def _lookup(keys_sorted: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index into ``keys_sorted`` of each of ``keys`` and whether it was found."""
    if keys_sorted.size == 0:
        return np.zeros(keys.size, dtype=np.int64), np.zeros(keys.size, dtype=bool)
    idx = np.clip(np.searchsorted(keys_sorted, keys), 0, keys_sorted.size - 1)
    return idx, keys_sorted[idx] == keys


def temporal_breakdown(t: KinetoTrace) -> TemporalBreakdown | None:
    """HTA's temporal breakdown of one rank (see the module docstring); ``None`` without GPU activity."""
    g = _gpu_columns(t)
    sel = (g["stream"] >= 0) & (g["corr"] >= 0)
    if len({s.number for s in t.steps}) >= 2:
        last_start = max(s.ts for s in t.steps)
        if t.gpu_step_last_ts is not None:  # HTA takes every ProfilerStep without a stream, the GPU's too
            last_start = max(last_start, t.gpu_step_last_ts)
        corr, lts, _ = _launch_columns(t)
        allowed = np.unique(corr[lts < last_start])
        _, found = _lookup(allowed, g["corr"])
        sel &= found
    if not sel.any():
        return None
    ts, end, kind = g["ts"][sel], g["end"][sel], g["kind"][sel]
    span = float(end.max() - ts.min())
    # HTA takes the span from the first merged group's start to the last one's end: the same numbers
    busy = length(ts, end)
    comp = kind == int(GpuKind.COMPUTE)
    compute = length(ts[comp], end[comp])
    idle = span - busy
    return TemporalBreakdown(
        idle_us=idle, compute_us=compute, non_compute_us=max(0.0, span - compute - idle), kernel_us=span
    )


def decompose_trace(t: KinetoTrace) -> RankSteps:
    """Decompose one rank's Kineto trace (see the module docstring).

    Raises:
        StepsError: no ``ProfilerStep#N`` span, or no rank (neither ``distributedInfo`` nor ``rank-N`` in the
            file name).
    """
    rank = t.rank if t.rank is not None else rank_hint(t.source)
    if rank is None:
        raise StepsError(f"{t.source}: no rank: the trace has no distributedInfo and the file name no rank-N")
    if not t.steps:
        raise StepsError(
            f"{t.source}: no ProfilerStep#N span: profile with a schedule and call prof.step() every "
            "iteration (torch.profiler.profile(schedule=...)) so that steps can be told apart"
        )
    tids = [s.tid for s in t.steps]
    main_tid = max(set(tids), key=tids.count)
    markers = {
        Marker.DATA: _Sorted(t.markers[Marker.DATA], tid=main_tid),
        Marker.OPTIMIZER: _Sorted(t.markers[Marker.OPTIMIZER]),
        Marker.BACKWARD: _Sorted(t.markers[Marker.BACKWARD]),
        Marker.FORWARD: _Sorted(t.markers[Marker.FORWARD]),
    }
    g = _gpu_columns(t)
    corr, lts, ldur = _launch_columns(t)
    idx, found = _lookup(corr, g["corr"])
    launch_ts = np.where(found, lts[idx] if lts.size else 0.0, g["ts"])
    # the CPU-side H2D copies: launches whose GPU activity is a Memcpy HtoD
    htod = g["kind"] == int(GpuKind.MEMCPY_HTOD)
    h2d_cpu = _Sorted.of(lts[idx[htod & found]], (lts + ldur)[idx[htod & found]]) if lts.size else _Sorted(Spans())
    comm_gpu = g["kind"] == int(GpuKind.COMM)
    cm = _Sorted(t.markers[Marker.COMM])
    comm = _Sorted.of(np.concatenate([cm.start, g["ts"][comm_gpu]]), np.concatenate([cm.end, g["end"][comm_gpu]]))

    starts = np.array([s.ts for s in t.steps])
    ends = starts + np.array([s.dur for s in t.steps])
    step_of = np.searchsorted(starts, launch_ts, side="right") - 1
    inside = (step_of >= 0) & (launch_ts < ends[np.clip(step_of, 0, None)])
    step_of = np.where(inside, step_of, -1)
    order = np.argsort(step_of, kind="stable")
    bounds = np.searchsorted(step_of[order], np.arange(len(t.steps) + 1), side="left")

    parts = [_stage_intervals(s.ts, s.ts + s.dur, markers, h2d_cpu, comm) for s in t.steps]
    flops, flops_in_steps = _step_flops(t, starts, ends)
    on_gpu = bool(len(g["ts"]))
    if on_gpu:
        host = {
            st.value: (
                np.concatenate([ps for p in parts for n, ps, _ in p if n == st.value] or [np.empty(0)]),
                np.concatenate([pe for p in parts for n, _, pe in p if n == st.value] or [np.empty(0)]),
            )
            for st in Stage
        }
        by_start = np.argsort(g["ts"], kind="stable")
        act = _Activities(g["ts"][by_start], g["end"][by_start], _launch_stage(host, launch_ts, g["kind"])[by_start])
        host_spans = {name: _Sorted.of(hs, he) for name, (hs, he) in host.items() if name != Stage.OTHER.value}
    samples: list[StepSample] = []
    comm_total = 0.0
    exposed_total = 0.0
    p1 = t.steps[0].ts if t.steps else 0.0
    for k, s in enumerate(t.steps):
        lo, hi = s.ts, s.ts + s.dur
        host_stages = _stage_ms(parts[k], s.dur)
        if on_gpu:
            sel = order[bounds[k] : bounds[k + 1]]
            gpu = _gpu_step(g, sel)
            comm_total += gpu.comm_ms
            exposed_total += gpu.comm_exposed_ms
            end = max(hi, float(g["end"][sel].max()) if sel.size else hi)
            # the first period is as long as its ProfilerStep: the GPU lags the host by end - hi, and before the
            # first step it ran earlier, unprofiled work the trace does not hold
            p0 = p1 if k else end - (hi - lo)
            p1 = max(p0, end)
            samples.append(
                StepSample(
                    step=s.number,
                    step_ms=round((p1 - p0) / 1000, 4),
                    stages_ms=_gpu_partition(p0, p1, act, host_spans),
                    gpu=gpu,
                    flops=flops[k],
                    host_step_ms=s.dur / 1000,
                    host_stages_ms=host_stages,
                )
            )
        else:
            cs, ce = comm.window(lo, hi)
            comm_total += length(cs, ce) / 1000
            exposed_total += host_stages[Stage.GRAD_SYNC.value]
            samples.append(StepSample(step=s.number, step_ms=s.dur / 1000, stages_ms=host_stages, flops=flops[k]))

    missing: list[str] = []
    temporal = temporal_breakdown(t)
    if temporal is None:
        missing.append(
            "no GPU activity in the trace (a CPU-only run, or the profiler ran without ProfilerActivity.CUDA): "
            "GPU idle/compute/non-compute shares and kernel statistics are not available; stages are from the "
            "CPU timeline"
        )
    if not len(t.markers[Marker.COMM]) and not comm_gpu.any():
        missing.append("no communication seen (no nccl:*/gloo:* record function, no NCCL kernel)")
    classes, dtype, uncounted = classify(t, step_of >= 0)
    devices = sorted(set(t.devices))
    return RankSteps(
        rank=rank,
        world_size=t.world_size,
        host=t.host,
        source=t.source,
        input="kineto",
        timing="trace",
        steps=samples,
        temporal=temporal,
        comm_exposed_pct=round(100 * exposed_total / comm_total, 2) if comm_total > 0 else None,
        kernels=_kernel_stats(g, step_of, ldur[idx] if ldur.size else np.zeros(idx.size), found, len(t.steps)),
        cpu_ops=_cpu_op_stats(t, main_tid, starts, ends),
        missing=missing,
        device=devices[0] if len(devices) == 1 else None,
        kernel_classes=classes or None,
        gemm_dtype=dtype,
        flops_from=_flops_from(t) if any(f is not None for f in flops) else None,
        uncounted_kernel_pct=uncounted if classes else None,
        flops_lower_bound=_lower_bound(t, flops_in_steps, classes, uncounted),
        matmuls=_matmuls(t, starts, ends),
    )


def _matmuls(t: KinetoTrace, starts: F, ends: F) -> list[MatmulGroup] | None:
    """The matmuls counted from shapes with known bytes, within the steps, grouped by (FLOPs, bytes)."""
    fo = t.flop_ops
    if not len(fo):
        return None
    ts = np.frombuffer(fo.ts, dtype=np.float64)
    nb = np.frombuffer(fo.nbytes, dtype=np.float64)
    k = np.searchsorted(starts, ts, side="right") - 1
    keep = (k >= 0) & (ts < ends[np.clip(k, 0, None)]) & (nb > 0)
    if not keep.any():
        return None
    pairs = np.stack([np.frombuffer(fo.flops, dtype=np.float64)[keep], nb[keep]], axis=1)
    uniq, counts = np.unique(pairs, axis=0, return_counts=True)
    return [MatmulGroup(flops=float(f), bytes=float(b), count=int(c)) for (f, b), c in zip(uniq, counts, strict=True)]


def _lower_bound(t: KinetoTrace, counted_ops: int, classes: list[KernelClassShare], uncounted_pct: float) -> str | None:
    """Why FLOPs counted from matmul shapes miss GPU work, or ``None``: every counted op launches at least one
    GEMM kernel, so more GEMM-class kernels than counted ops means GEMMs whose FLOPs nobody counted (a library's
    own GEMMs, an op without shapes); convolutions and fused attention have no shape formula here."""
    if not counted_ops or not len(t.flop_ops) or not np.frombuffer(t.flop_ops.from_shapes, dtype=np.int8).any():
        return None
    gemm = next((c.count for c in classes if c.kernel_class == "gemm"), 0)
    if uncounted_pct > UNCOUNTED_MAX_PCT:
        return f"{uncounted_pct:.0f}% of the kernel time is convolutions or fused attention, not counted from shapes"
    if gemm > counted_ops:
        return f"{gemm} GEMM-class kernels in the steps against {counted_ops} matmul ops counted"
    return None


def _step_flops(t: KinetoTrace, starts: F, ends: F) -> tuple[list[float | None], int]:
    """FLOPs of the CPU ops (any thread) starting within each step's ``ProfilerStep`` span (``None`` for every
    step when the trace counts no FLOPs), and how many ops were counted."""
    fo = t.flop_ops
    if not len(fo):
        return [None] * len(starts), 0
    ts = np.frombuffer(fo.ts, dtype=np.float64)
    fl = np.frombuffer(fo.flops, dtype=np.float64)
    k = np.searchsorted(starts, ts, side="right") - 1
    inside = (k >= 0) & (ts < ends[np.clip(k, 0, None)])
    sums = np.bincount(k[inside], weights=fl[inside], minlength=len(starts))
    return [float(v) for v in sums], int(inside.sum())


def _flops_from(t: KinetoTrace) -> str:
    shapes = np.frombuffer(t.flop_ops.from_shapes, dtype=np.int8)
    if shapes.all():
        return "matmul shapes"
    return "trace args.flops" if not shapes.any() else "trace args.flops and matmul shapes"


def _stage_intervals(
    lo: float, hi: float, markers: dict[Marker, _Sorted], h2d: _Sorted, comm: _Sorted
) -> list[tuple[str, F, F]]:
    """The host stage partition of the step ``[lo, hi)``: per stage, in the module docstring's priority order,
    the disjoint intervals (us) where it runs and no earlier stage does; time in none of them is ``other``."""
    data = markers[Marker.DATA].window(lo, hi)
    bs, be = markers[Marker.BACKWARD].window(lo, hi)
    backward = (bs[:1], be[-1:]) if bs.size else (bs, be)
    if bs.size:
        backward = (np.array([bs.min()]), np.array([be.max()]))
    forward = markers[Marker.FORWARD].window(lo, hi)
    if forward[0].size == 0 and bs.size:
        b0 = float(bs.min())
        before = data[1][data[1] <= b0]
        f0 = float(before.max()) if before.size else lo
        if b0 > f0:
            forward = (np.array([f0]), np.array([b0]))
    labelled = [
        (Stage.DATA, data),
        (Stage.H2D, h2d.window(lo, hi)),
        (Stage.OPTIMIZER, markers[Marker.OPTIMIZER].window(lo, hi)),
        (Stage.BACKWARD, backward),
        (Stage.FORWARD, forward),
        (Stage.GRAD_SYNC, comm.window(lo, hi)),
    ]
    parts: list[tuple[str, F, F]] = []
    cov_s: list[F] = []
    cov_e: list[F] = []
    for stage, (s, e) in labelled:
        if s.size:
            cs = np.concatenate(cov_s) if cov_s else np.empty(0)
            ce = np.concatenate(cov_e) if cov_e else np.empty(0)
            parts.append((stage.value, *subtract(s, e, cs, ce)))
            cov_s.append(s)
            cov_e.append(e)
    return parts


def _stage_ms(parts: list[tuple[str, F, F]], total_us: float) -> dict[str, float]:
    """Stage partition in ms from :func:`_stage_intervals`; ``other`` is the rest of ``total_us``."""
    out = {s.value: 0.0 for s in Stage}
    for name, s, e in parts:
        out[name] += float(np.sum(e - s)) / 1000
    out[Stage.OTHER.value] = max(0.0, total_us / 1000 - sum(out.values()))
    return {k: round(v, 4) for k, v in out.items()}


#: where GPU work launched by several stages overlaps, it counts for the first of these; communication kernels
#: are ``grad_sync`` and count last (only where no other GPU work runs: the exposed part)
_GPU_ORDER = [Stage.H2D, Stage.FORWARD, Stage.BACKWARD, Stage.OPTIMIZER, Stage.DATA, Stage.CHECKPOINT, Stage.OTHER]
_STAGE_CODE = {s.value: i for i, s in enumerate(Stage)}


@dataclass
class _Activities:
    """A trace's GPU activities sorted by start (us), with the stage code of each (:func:`_launch_stage`)."""

    start: F
    end: F
    stage: np.ndarray

    def __post_init__(self) -> None:
        self.maxdur = float((self.end - self.start).max()) if self.start.size else 0.0

    def window(self, lo: float, hi: float) -> tuple[F, F, np.ndarray]:
        """The activities that overlap ``[lo, hi)``, clipped to it, with their stage codes."""
        i = int(np.searchsorted(self.start, lo - self.maxdur, side="left"))
        j = int(np.searchsorted(self.start, hi, side="left"))
        s, e = np.maximum(self.start[i:j], lo), np.minimum(self.end[i:j], hi)
        keep = e > s
        return s[keep], e[keep], self.stage[i:j][keep]


def _gpu_partition(p0: float, p1: float, act: _Activities, host: dict[str, _Sorted]) -> dict[str, float]:
    """The GPU-timeline partition of one step's period ``[p0, p1)`` (us) in ms: GPU busy time by the stage whose
    host code launched it (``act``), idle time by the host stage running at that moment (``host``: every step's
    host partition, per stage but ``other``), the rest ``other``. Reads only what overlaps the period."""
    cs, ce, lab = act.window(p0, p1)
    out = {st.value: 0.0 for st in Stage}
    cov_s, cov_e = np.empty(0), np.empty(0)
    for st in [*_GPU_ORDER, Stage.GRAD_SYNC]:
        m = lab == _STAGE_CODE[st.value]
        if m.any():
            us, ue = subtract(cs[m], ce[m], cov_s, cov_e)
            out[st.value] += float(np.sum(ue - us))
            cov_s, cov_e = np.concatenate([cov_s, cs[m]]), np.concatenate([cov_e, ce[m]])
    idle_s, idle_e = subtract(np.array([p0]), np.array([p1]), cov_s, cov_e)
    idle = float(np.sum(idle_e - idle_s))
    for name, spans in host.items():
        if idle_s.size:
            xs, xe = spans.window(p0, p1)
            out[name] += idle - uncovered(idle_s, idle_e, xs, xe)
    total = (p1 - p0) / 1000
    ms = {k: v / 1000 for k, v in out.items()}
    ms[Stage.OTHER.value] = max(0.0, total - sum(v for k, v in ms.items() if k != Stage.OTHER.value))
    return {k: round(v, 4) for k, v in ms.items()}


def _launch_stage(host: dict[str, tuple[F, F]], launch_ts: F, kind: np.ndarray) -> np.ndarray:
    """Stage code of each GPU activity: ``grad_sync`` for communication kernels, else the host stage running at
    its launch (``other`` outside every stage)."""
    names = [n for n in host if host[n][0].size]
    starts = np.concatenate([host[n][0] for n in names] or [np.empty(0)])
    ends = np.concatenate([host[n][1] for n in names] or [np.empty(0)])
    codes = np.concatenate([np.full(host[n][0].size, _STAGE_CODE[n]) for n in names] or [np.empty(0, dtype=np.int64)])
    out = np.full(launch_ts.size, _STAGE_CODE[Stage.OTHER.value])
    if starts.size:
        order = np.argsort(starts, kind="stable")
        starts, ends, codes = starts[order], ends[order], codes[order]
        i = np.searchsorted(starts, launch_ts, side="right") - 1
        ok = (i >= 0) & (launch_ts < ends[np.clip(i, 0, None)])
        out = np.where(ok, codes[np.clip(i, 0, None)], out)
    return np.where(kind == int(GpuKind.COMM), _STAGE_CODE[Stage.GRAD_SYNC.value], out)


def _gpu_step(g: dict[str, np.ndarray], sel: np.ndarray) -> GpuStep:
    ts, end, kind = g["ts"][sel], g["end"][sel], g["kind"][sel]
    comp = kind == int(GpuKind.COMPUTE)
    comm = kind == int(GpuKind.COMM)
    mem = np.isin(kind, _MEMORY)
    return GpuStep(
        busy_ms=round(length(ts, end) / 1000, 4),
        compute_ms=round(length(ts[comp], end[comp]) / 1000, 4),
        comm_ms=round(length(ts[comm], end[comm]) / 1000, 4),
        comm_exposed_ms=round(uncovered(ts[comm], end[comm], ts[comp], end[comp]) / 1000, 4),
        memory_ms=round(length(ts[mem], end[mem]) / 1000, 4),
        kernels=int((~mem).sum()),
    )


def _kernel_stats(
    g: dict[str, np.ndarray], step_of: np.ndarray, launch_dur: F, found: np.ndarray, n_steps: int
) -> KernelStats | None:
    sel = np.isin(g["kind"], _KERNEL) & (step_of >= 0)
    if not sel.any():
        return None
    dur = (g["end"] - g["ts"])[sel]
    with_launch = found[sel]
    short = None
    if with_launch.any() and launch_dur.size:
        short = round(100 * float(np.mean(dur[with_launch] < launch_dur[sel][with_launch])), 2)
    return KernelStats(
        count=int(sel.sum()),
        per_step=round(float(sel.sum()) / n_steps, 2),
        median_us=round(float(np.median(dur)), 3),
        p90_us=round(float(np.percentile(dur, 90)), 3),
        tiny_pct=round(100 * float(np.mean(dur < TINY_KERNEL_US)), 2),
        short_pct=short,
    )


def _cpu_op_stats(t: KinetoTrace, tid: int, starts: F, ends: F) -> CpuOpStats | None:
    ops = _Sorted(t.cpu_ops, tid=tid)
    if ops.start.size == 0:
        return None
    k = np.searchsorted(starts, ops.start, side="right") - 1
    inside = (k >= 0) & (ops.start < ends[np.clip(k, 0, None)])
    if not inside.any():
        return None
    return CpuOpStats(
        per_step=round(float(inside.sum()) / len(starts), 2),
        median_us=round(float(np.median((ops.end - ops.start)[inside])), 3),
    )


def decompose_steplog(log: StepLog) -> RankSteps:
    """One rank's steps from its StepTimer log: the timer's stages, ``other`` the rest of each step."""
    samples = []
    for r in log.records:
        stages = {s.value: 0.0 for s in Stage}
        for name, ms in r.stages_ms.items():
            stages[name] = stages.get(name, 0.0) + ms
        stages[Stage.OTHER.value] = max(0.0, r.step_ms - sum(v for k, v in stages.items() if k != Stage.OTHER.value))
        samples.append(
            StepSample(
                step=r.step, step_ms=r.step_ms, stages_ms={k: round(v, 4) for k, v in stages.items()}, flops=r.flops
            )
        )
    return RankSteps(
        flops_from="StepTimer flops_per_step" if any(r.flops is not None for r in log.records) else None,
        rank=log.rank,
        world_size=log.world_size,
        host=log.host,
        source=log.source,
        input="steptimer",
        timing=log.timing,
        steps=samples,
        missing=[
            "a StepTimer log: no GPU idle/compute/non-compute shares, no kernel statistics and no split of "
            "communication into overlapped and exposed (profile a few steps with torch.profiler for those)"
        ],
    )


def decompose_steptime_log(log: StepTimeLog) -> list[RankSteps]:
    """The ranks of a training log's step lines, one per series with step times: each step's time is the stage
    ``unknown``. A series without a rank (no prefix, no Megatron world size) gets the rank of the file name's
    ``rank-N``, else its Slurm task id (``srun -l``), else a negative placeholder (-1, -2, ...) said in
    ``missing``; a series whose lines give no step time (torchtitan without time stamps) is left out and said.

    Raises:
        StepsError: no series has a step time.
    """
    out: list[RankSteps] = []
    unknown = 0
    throughput_only = []
    m = _RANK_IN_NAME.search(Path(log.source).name)
    file_rank = int(m.group(1)) if m and len(log.series) == 1 else None
    for s in log.series:
        timed = [st for st in s.steps if st.step_ms is not None]
        if not timed:
            throughput_only.append(s)
            continue
        notes = [
            f"a training log ({s.format.value}): step times only, no stage breakdown (stages unknown); "
            f"{s.timing}; profile a few steps with torch.profiler or time the stages with fleetdx.steps.StepTimer "
            "to name the stage"
        ]
        if s.rank is not None:
            rank = s.rank
            if s.rank_from and "last rank" in s.rank_from:
                notes.append(f"rank from {s.rank_from}")
        elif file_rank is not None:
            rank = file_rank
            notes.append("rank from the file name")
        elif s.task is not None:
            rank = s.task
            notes.append(
                "rank unknown: shown by its srun -l task id (SLURM_PROCID, the rank when srun starts one "
                "process per rank)"
            )
        else:
            unknown += 1
            rank = -unknown
            where = f" (local rank {s.local_rank})" if s.local_rank is not None else ""
            notes.append(f"rank unknown{where}: the lines carry no rank prefix; shown as rank {rank}")
        if s.repeated:
            notes.append(
                f"{s.repeated} lines repeat a step already read (ranks printing without a rank prefix, a logger "
                "with two handlers, or a resumed job): not counted"
            )
        out.append(
            RankSteps(
                rank=rank,
                world_size=log.world_size,
                host=s.host,
                source=log.source,
                input="log",
                timing=s.timing,
                steps=[
                    StepSample(
                        step=st.step, step_ms=round(st.step_ms, 4), stages_ms={UNKNOWN_STAGE: round(st.step_ms, 4)}
                    )
                    for st in timed
                    if st.step_ms is not None
                ],
                missing=notes,
            )
        )
    if not out:
        raise StepsError(
            f"{log.source}: the {throughput_only[0].format.value} lines give throughput only (tps), no step time: "
            "they carry no time stamp to measure the time between steps"
        )
    return out
