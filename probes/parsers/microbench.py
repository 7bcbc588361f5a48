"""Parser for ``torch_microbench.json``, the output of ``python -m fleetdx.probes.microbench``.

Two shapes are read:

* one GPU, flat (the captured fixtures ``tests/fixtures/hosts/h100-vm-*/torch_microbench.json``)::

    {"gemm_bfloat16": 772.6, "gemm_float16": 738.4, "gemm_float32": 51.2, "d2d_copy_GBps_rw": 2992.1,
     "h2d_GBps_pinnedTrue": 54.7, "d2h_GBps_pinnedTrue": 55.0, "h2d_GBps_pinnedFalse": 18.2,
     "d2h_GBps_pinnedFalse": 13.8, "device": "NVIDIA H100 80GB HBM3", "sm_count": 132,
     "total_mem": 85017493504}

* the probe's own output: ``{"status": "ok", ..., "gpus": [<the flat object plus "index">, ...]}``.

Units: GEMM in TFLOP/s (1e12 FLOP/s), copies in GB/s (1e9 B/s); ``d2d_copy_GBps_rw`` counts bytes read plus
bytes written. A ``{"status": "skipped"|"failed", "reason": ...}`` document holds no measurement and raises
:class:`~fleetdx.probes.errors.ParseError`, as do malformed JSON, a non-number figure and a negative or non-finite
one.
"""

from __future__ import annotations

import json
import math

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError

FMT = "microbench"


class Microbench(Contract):
    """GPU micro-benchmark figures for one GPU; ``None`` where not measured.

    Units: TFLOP/s (1e12 FLOP/s) for GEMM, GB/s (1e9 B/s) for copies; the device-to-device copy counts
    bytes read plus bytes written. ``gpu_index`` is ``None`` in the flat one-GPU shape, which names no index.
    """

    gpu_index: int | None = None
    gpu_name: str | None = None
    gemm_bf16_tflops: float | None = None
    gemm_fp16_tflops: float | None = None
    gemm_fp32_tflops: float | None = None
    d2d_gbps: float | None = None
    h2d_pinned_gbps: float | None = None
    d2h_pinned_gbps: float | None = None
    h2d_pageable_gbps: float | None = None
    d2h_pageable_gbps: float | None = None


class MicrobenchReport(Contract):
    """One ``torch_microbench.json``: the measured GPUs and, where printed, how they were measured."""

    gpus: list[Microbench] = Field(default_factory=list)
    torch_version: str | None = None
    cuda_version: str | None = None
    gemm_n: int | None = None
    iters: int | None = None


#: JSON key -> Microbench field
KEYS: dict[str, str] = {
    "gemm_bfloat16": "gemm_bf16_tflops",
    "gemm_float16": "gemm_fp16_tflops",
    "gemm_float32": "gemm_fp32_tflops",
    "d2d_copy_GBps_rw": "d2d_gbps",
    "h2d_GBps_pinnedTrue": "h2d_pinned_gbps",
    "d2h_GBps_pinnedTrue": "d2h_pinned_gbps",
    "h2d_GBps_pinnedFalse": "h2d_pageable_gbps",
    "d2h_GBps_pinnedFalse": "d2h_pageable_gbps",
}


def _figure(key: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(FMT, None, f"a number for {key!r}", repr(value))
    if not math.isfinite(value) or value < 0:
        raise ParseError(FMT, None, f"a finite non-negative number for {key!r}", repr(value))
    return float(value)


def _one(obj: object) -> Microbench:
    if not isinstance(obj, dict):
        raise ParseError(FMT, None, "a JSON object per GPU", type(obj).__name__)
    figures = {field: _figure(key, obj.get(key)) for key, field in KEYS.items()}
    if all(v is None for v in figures.values()):
        raise ParseError(FMT, None, "at least one measurement (" + ", ".join(KEYS) + ")", str(obj)[:80])
    index = obj.get("index")
    if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
        raise ParseError(FMT, None, "an integer GPU index", repr(index))
    name = obj.get("device")
    if name is not None and not isinstance(name, str):
        raise ParseError(FMT, None, "a device name string", repr(name))
    return Microbench(gpu_index=index, gpu_name=name, **figures)


def _opt(doc: dict[str, object], key: str, typ: type) -> object:
    v = doc.get(key)
    if v is not None and (isinstance(v, bool) or not isinstance(v, typ)):
        raise ParseError(FMT, None, f"{typ.__name__} for {key!r}", repr(v))
    return v


def parse_microbench(text: str) -> MicrobenchReport:
    """One :class:`Microbench` per measured GPU, in the order printed, in a :class:`MicrobenchReport`."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ParseError(FMT, getattr(exc, "lineno", None), "JSON", str(exc)) from None
    if not isinstance(doc, dict):
        raise ParseError(FMT, None, "a JSON object", type(doc).__name__)
    status = doc.get("status")
    if status is not None and status != "ok":
        raise ParseError(FMT, None, "status 'ok' with measurements", f"{status}: {doc.get('reason')}")
    if "gpus" in doc:
        gpus = doc["gpus"]
        if not isinstance(gpus, list) or not gpus:
            raise ParseError(FMT, None, "a non-empty 'gpus' list", repr(gpus)[:80])
        return MicrobenchReport(
            gpus=[_one(g) for g in gpus],
            torch_version=_opt(doc, "torch", str),
            cuda_version=_opt(doc, "cuda", str),
            gemm_n=_opt(doc, "gemm_n", int),
            iters=_opt(doc, "iters", int),
        )
    return MicrobenchReport(gpus=[_one(doc)])
