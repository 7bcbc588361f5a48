"""What a GPU's busy time goes to: GPU activities by kernel class, the data type of the GEMMs, and the occupancy
Kineto estimates. Pure.

**Kernel classes**, by activity kind and kernel name (first match wins):

* ``communication``: NCCL kernels (HTA's ``^nccl.*Kernel``), ``memcpy``: memcpy and memset activities;
* ``gemm``: matrix multiplications and convolutions, the work tensor cores (or the FFMA pipes) do at a high
  arithmetic intensity: cuBLAS/cuBLASLt/CUTLASS names (``gemm``, ``xmma``, ``cutlass``, ``nvjet``, ``wgmma``),
  cuDNN convolutions (``conv``, ``implicit_gemm``, ``fprop``/``dgrad``/``wgrad``, ``winograd``), fused attention
  (``flash``, ``fmha``, ``attention``) and Triton matmul templates (``triton_tem``, ``triton_mm``); ``fbgemm``
  (a library of embedding and quantisation kernels, not a GEMM) is not a match by itself;
* ``elementwise``: elementwise, reduction, normalisation, softmax, optimizer (``multi_tensor_apply``), embedding,
  indexing, copy, sort and Triton pointwise/reduction kernels (``triton_poi``/``triton_red``/``triton_per``):
  a few FLOPs per byte moved, so memory-bound on every GPU of the peak table (an A100's balance point is
  312 TFLOP/s over 2 TB/s: about 150 FLOPs per byte);
* ``other``: the rest (unnamed Triton kernels, custom kernels).

Kineto traces carry no bytes per kernel (CUPTI's kernel activity records launch geometry, not DRAM traffic), so
memory- against compute-bound is judged by class here; the matmuls whose shapes the trace records are placed on
the roofline by their bytes (:mod:`fleetdx.orchestrator.steps.mfu`); Nsight Compute measures any kernel.

**GEMM data type** (:func:`name_dtype`), from the names cuBLAS, CUTLASS and cuDNN give their kernels:
``e4m3``/``e5m2``/``fp8`` FP8; ``bf16`` BF16; ``fp16``, ``f16``, ``h1688``/``h16816``/``h884``, ``hgemm`` FP16;
``tf32``, CUTLASS's ``tensorop_s1688``/``s16816`` (single-precision inputs on TF32 tensor cores) TF32;
``sgemm``, ``ffma``, ``f32f32`` FP32 without tensor cores. :func:`classify` keeps the type holding the most GEMM
time.

**Occupancy**: Kineto's ``est. achieved occupancy %`` (``libkineto/src/output_json.cpp``): the warps a kernel's
launch configuration lets each SM hold, over the SM's maximum -- an estimate from blocks, threads, registers and
shared memory, not a measurement.
"""

from __future__ import annotations

import re

import numpy as np

from fleetdx.orchestrator.steps.contracts import KernelClassShare
from fleetdx.probes.parsers.kineto import GpuKind, KinetoTrace

#: the classes in the order printed
CLASSES = ("gemm", "elementwise", "communication", "memcpy", "other")

_GEMM = re.compile(
    r"gemm|xmma|wgmma|hmma|cutlass|cublas|nvjet|convolution|convolve|conv2d|conv3d|fprop|dgrad|wgrad|winograd"
    r"|flash|fmha|attention|triton_tem|triton_mm|triton_bmm",
    re.IGNORECASE,
)
_ELEMENTWISE = re.compile(
    r"elementwise|vectorized|reduce|reduction|softmax|norm|bn_fw|bn_bw|multi_tensor_apply|adam|sgd|embedding"
    r"|index|gather|scatter|cat|copy|fill|transpose|permute|nchwtonhwc|nhwctonchw|dropout|relu|gelu|silu"
    r"|sigmoid|tanh|pool|cub::|sort|triton_poi|triton_red|triton_per|where|compare|fused_",
    re.IGNORECASE,
)
#: kernels whose FLOPs a count from matmul shapes misses (the convolutions and fused attention of ``gemm``)
_UNCOUNTED = re.compile(r"conv|implicit_?gemm|fprop|dgrad|wgrad|winograd|flash|fmha|attention", re.IGNORECASE)
_DTYPES: list[tuple[str, re.Pattern[str]]] = [
    ("fp8", re.compile(r"e4m3|e5m2|fp8|f8f8", re.IGNORECASE)),
    ("bf16", re.compile(r"bf16", re.IGNORECASE)),
    ("fp16", re.compile(r"fp16|f16|h1688|h16816|h884|hgemm|half", re.IGNORECASE)),
    ("tf32", re.compile(r"tf32|tensorop_s1688|tensorop_s16816|s1688gemm|s16816gemm", re.IGNORECASE)),
    ("fp32", re.compile(r"sgemm|ffma|f32f32|fp32", re.IGNORECASE)),
]


def kernel_class(name: str, kind: GpuKind) -> str:
    """The class (one of :data:`CLASSES`) of a GPU activity of ``kind`` named ``name``."""
    if kind == GpuKind.COMM:
        return "communication"
    if kind.is_memory:
        return "memcpy"
    plain = name.replace("fbgemm", "")
    if _GEMM.search(plain):
        return "gemm"
    if _ELEMENTWISE.search(plain):
        return "elementwise"
    return "other"


def name_dtype(name: str) -> str | None:
    """The data type a GEMM kernel's name says it runs in (see the module doc), or ``None``."""
    for dtype, pattern in _DTYPES:
        if pattern.search(name):
            return dtype
    return None


def classify(t: KinetoTrace, sel: np.ndarray) -> tuple[list[KernelClassShare], str | None, float]:
    """The GPU activities of ``t`` selected by the boolean mask ``sel`` (the decomposed steps' activities) by
    class, largest first; the data type holding the most GEMM time (``None`` when no GEMM name says); and the
    share (%) of kernel time in kernels a matmul-shapes FLOP count misses (convolutions, fused attention).
    Empty and ``None`` when nothing is selected."""
    g = t.gpu
    if not len(g) or not sel.any():
        return [], None, 0.0
    names = g.names
    kinds = np.frombuffer(g.kind, dtype=np.int8)
    name_idx = np.frombuffer(g.name, dtype=np.int64)
    dur = np.frombuffer(g.dur, dtype=np.float64)
    occ = np.frombuffer(g.occupancy, dtype=np.float64)
    kind_of_name = np.zeros(len(names), dtype=np.int8)
    kind_of_name[name_idx] = kinds
    cls_of_name = [CLASSES.index(kernel_class(n, GpuKind(int(kind_of_name[i])))) for i, n in enumerate(names)]
    cls = np.asarray(cls_of_name, dtype=np.int8)[name_idx][sel]
    d, o, idx = dur[sel], occ[sel], name_idx[sel]
    total = float(d.sum()) or 1.0
    shares: list[KernelClassShare] = []
    for c, label in enumerate(CLASSES):
        m = cls == c
        if not m.any():
            continue
        known = m & (o >= 0)
        w = float(d[known].sum())
        shares.append(
            KernelClassShare(
                kernel_class=label,
                time_us=round(float(d[m].sum()), 3),
                share_pct=round(100 * float(d[m].sum()) / total, 2),
                count=int(m.sum()),
                occupancy_pct=round(float((d[known] * o[known]).sum()) / w, 1) if w > 0 else None,
            )
        )
    shares.sort(key=lambda s: -s.time_us)
    by_dtype: dict[str, float] = {}
    gemm = cls == CLASSES.index("gemm")
    per_name = np.bincount(idx[gemm], weights=d[gemm], minlength=len(names))
    uncounted = 0.0
    for i in np.nonzero(per_name)[0]:
        dt = name_dtype(names[i])
        if dt is not None:
            by_dtype[dt] = by_dtype.get(dt, 0.0) + float(per_name[i])
        if _UNCOUNTED.search(names[i]):
            uncounted += float(per_name[i])
    kernel_total = float(d[np.isin(cls, [CLASSES.index(c) for c in ("gemm", "elementwise", "other")])].sum())
    dtype = max(by_dtype, key=lambda k: by_dtype[k]) if by_dtype else None
    return shares, dtype, round(100 * uncounted / kernel_total, 2) if kernel_total > 0 else 0.0
