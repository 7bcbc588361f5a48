"""GPU micro-benchmark: GEMM throughput, HBM copy bandwidth and host<->device copy bandwidth per GPU.

Run as a child process (``python -m fleetdx.probes.microbench``) through the runner, so torch (3.4 s to import,
bench/MEASUREMENTS.md) never loads in the collecting process. Prints one JSON document on stdout::

    {"status": "ok", "torch": "2.11.0", "cuda": "13.0", "gemm_n": 8192, "iters": 20,
     "gpus": [{"index": 0, "device": "NVIDIA H100 80GB HBM3", "bus_id": "00000000:00:06.0", "sm_count": 132,
               "total_mem": 85017493504, "gemm_bfloat16": 772.6, "gemm_float16": 738.4, "gemm_float32": 51.2,
               "d2d_copy_GBps_rw": 2992.1, "h2d_GBps_pinnedTrue": 54.7, "d2h_GBps_pinnedTrue": 55.0,
               "h2d_GBps_pinnedFalse": 18.2, "d2h_GBps_pinnedFalse": 13.8}]}

Each ``gpus`` entry has the keys of the captured ``torch_microbench.json`` fixture (read by
:func:`fleetdx.probes.parsers.microbench.parse_microbench`).

Method: operands are random (``torch.randn``; zeros run faster and overstate throughput, bench/MEASUREMENTS.md);
``--warmup`` untimed runs, then ``--iters`` runs each timed with a pair of CUDA events; the median is
reported.
GEMM: ``2 n^3`` FLOP per ``n x n @ n x n`` product, TFLOP/s = 1e12 FLOP/s; fp32 with TF32 disabled
(true FP32).
Device-to-device copy: ``dst.copy_(src)`` of ``--d2d-bytes``, GB/s = 2 x bytes / s / 1e9 (read + write).
Host<->device: ``--h2d-bytes`` from pinned and from pageable host memory, GB/s = bytes / s / 1e9.

Exit codes: 0 measured; 4 skipped (no NVIDIA driver loaded, no CUDA device or no torch:
``{"status": "skipped", "reason": ...}``,
``fleetdx.probes.catalog.MICROBENCH_SKIP_EXIT``); 1 failed while measuring (``{"status": "failed", "reason": ...}``);
2 bad arguments (argparse).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_SKIPPED = 4
GIB = 1 << 30
#: present whenever the NVIDIA kernel driver is loaded (bare metal, VMs, containers with the driver mounted)
NVIDIA_DRIVER_FILE = "/proc/driver/nvidia/version"


def _median_ms(torch: Any, fn: Callable[[], object], warmup: int, iters: int) -> float:
    """Median milliseconds of ``fn`` over ``iters`` CUDA-event-timed runs after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)))
    return statistics.median(times)


def _gemm_tflops(torch: Any, dev: Any, dtype: Any, n: int, warmup: int, iters: int) -> float:
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    ms = _median_ms(torch, lambda: torch.matmul(a, b), warmup, iters)

    return float(2 * n**3 / (ms / 1e3) / 1e12)


def _d2d_gbps(torch: Any, dev: Any, nbytes: int, warmup: int, iters: int) -> float:
    src = torch.randn(nbytes // 4, device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)
    ms = _median_ms(torch, lambda: dst.copy_(src), warmup, iters)
    moved: int = 2 * src.numel() * 4
    return moved / (ms / 1e3) / 1e9


def _host_gbps(
    torch: Any, dev: Any, nbytes: int, pinned: bool, to_device: bool, warmup: int, iters: int
) -> float:
    host = torch.randn(nbytes // 4, dtype=torch.float32)
    if pinned:
        host = host.pin_memory()
    gpu = torch.empty(host.numel(), device=dev, dtype=torch.float32)
    if to_device:
        ms = _median_ms(torch, lambda: gpu.copy_(host, non_blocking=pinned), warmup, iters)
    else:
        ms = _median_ms(torch, lambda: host.copy_(gpu, non_blocking=pinned), warmup, iters)
    moved: int = host.numel() * 4
    return moved / (ms / 1e3) / 1e9


def measure_gpu(torch: Any, index: int, args: argparse.Namespace) -> dict[str, object]:
    """All figures for one GPU, keyed as in ``torch_microbench.json``."""
    dev = torch.device("cuda", index)
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    out: dict[str, object] = {
        "index": index,
        "device": props.name,
        "sm_count": props.multi_processor_count,
        "total_mem": props.total_memory,
    }
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        out["bus_id"] = f"{getattr(props, 'pci_domain_id', 0):08X}:{bus:02X}:{props.pci_device_id:02X}.0"
    torch.backends.cuda.matmul.allow_tf32 = False
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        name = str(dtype).removeprefix("torch.")
        out[f"gemm_{name}"] = _gemm_tflops(torch, dev, dtype, args.gemm_n, args.warmup, args.iters)
    out["d2d_copy_GBps_rw"] = _d2d_gbps(torch, dev, args.d2d_bytes, args.warmup, args.iters)
    for pinned in (True, False):
        for to_device, key in ((True, "h2d"), (False, "d2h")):
            out[f"{key}_GBps_pinned{pinned}"] = _host_gbps(
                torch, dev, args.h2d_bytes, pinned, to_device, args.warmup, args.iters
            )
    torch.cuda.empty_cache()
    return out


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m fleetdx.probes.microbench", description=__doc__.split("\n\n")[0])
    p.add_argument("--gemm-n", type=int, default=8192, help="GEMM size n (n x n @ n x n), default 8192")
    p.add_argument("--iters", type=int, default=20, help="timed runs per figure (median), default 20")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first, default 3")
    p.add_argument("--d2d-bytes", type=int, default=4 * GIB, help="device copy size, default 4 GiB")
    p.add_argument("--h2d-bytes", type=int, default=GIB, help="host<->device copy size, default 1 GiB")
    p.add_argument(
        "--device", type=int, action="append", help="GPU index to measure (repeatable); all if absent"
    )
    a = p.parse_args(argv)
    if a.gemm_n < 1 or a.iters < 1 or a.warmup < 0 or a.d2d_bytes < 4 or a.h2d_bytes < 4:
        p.error("sizes and --iters must be positive")
    return a


def _emit(doc: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Measure and print; returns the exit code (see the module docstring)."""
    args = _args(argv)
    if not os.path.exists(NVIDIA_DRIVER_FILE):  # skip in milliseconds, without the 3.4 s torch import
        _emit(
            {
                "status": "skipped",
                "reason": f"no CUDA device: no NVIDIA driver loaded ({NVIDIA_DRIVER_FILE} absent)",
            }
        )
        return EXIT_SKIPPED
    try:
        import torch
    except ImportError as exc:
        _emit({"status": "skipped", "reason": f"torch is not installed: {exc}"})
        return EXIT_SKIPPED
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        _emit({"status": "skipped", "reason": "no CUDA device (torch.cuda.is_available() is False)"})
        return EXIT_SKIPPED
    indices = args.device if args.device else list(range(torch.cuda.device_count()))
    bad = [i for i in indices if not 0 <= i < torch.cuda.device_count()]
    if bad:
        _emit({"status": "failed", "reason": f"no such GPU index: {bad}"})
        return EXIT_FAILED
    try:
        gpus = [measure_gpu(torch, i, args) for i in indices]
    except (RuntimeError, torch.cuda.OutOfMemoryError) as exc:
        _emit({"status": "failed", "reason": f"{type(exc).__name__}: {exc}"})
        return EXIT_FAILED
    _emit(
        {
            "status": "ok",
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "gemm_n": args.gemm_n,
            "iters": args.iters,
            "gpus": gpus,
        }
    )
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
