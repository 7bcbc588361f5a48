"""MFU and "busy but not useful" (issue 24, item 5): the peak table, FLOPs from traces (real captures: the CPU
gloo run with ``with_flops=True``, the A100 traces with ``record_shapes``), the MFU arithmetic, kernel classes of
the real A100 and H100 traces, STEP_LOW_MFU, and the ``fleetdx steps`` output. The one trace built here (the
busy GPU of the finding) is a stand-in and named so: no GPU was lent to capture a real one."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import common, steps_cmd
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.steps.decompose import decompose_trace
from fleetdx.orchestrator.steps.kernels import kernel_class, name_dtype
from fleetdx.orchestrator.steps.load import load_trace
from fleetdx.orchestrator.steps.mfu import FLOPS_UNKNOWN, LOW_MFU_PCT, MfuOptions
from fleetdx.orchestrator.steps.peaks import DTYPES, PEAKS, lookup
from fleetdx.orchestrator.steps.run import StepsRequest, run
from fleetdx.probes.errors import ConfigError
from fleetdx.probes.parsers.kineto import GpuKind, matmul_bytes, matmul_flops, parse_kineto_bytes
from tests.cliapp import cli_app

FIX = Path(__file__).parent / "fixtures" / "traces"
runner = CliRunner()
#: the MLP of train_ddp.py on CPU (256-256-256-10, batch 2048): forward 2 x 2048 x 133,632 weights, backward the
#: weight gradients of the 3 layers and the input gradients of the last 2 (the first layer's is not needed)
CPU_STEP_FLOPS = 2 * 2048 * (133_632 + 133_632 + 256 * 256 + 256 * 10)


# --- the peak table -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "model"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100-PCIE-40GB", "A100"),
        ("NVIDIA A100-PG509-200", "A100"),  # the hta-a100-2rank-nccl trace's device
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H200", "H200-SXM"),
        ("NVIDIA H200 NVL", "H200-NVL"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10", "A10"),
        ("Tesla V100-SXM2-16GB", "V100-SXM2"),
        ("Tesla V100-PCIE-32GB", "V100-PCIe"),
        ("Tesla T4", "T4"),
        ("h100-pcie", "H100-PCIe"),  # a table model, any case
    ],
)
def test_device_names_find_their_row(device: str, model: str) -> None:
    peak = lookup(device)
    assert peak is not None and peak.model == model


@pytest.mark.parametrize("device", ["NVIDIA A10G", "NVIDIA GH200 480GB", "AMD Instinct MI300X", "", "NVIDIA"])
def test_unknown_devices_are_not_guessed(device: str) -> None:
    assert lookup(device) is None


def test_peak_figures_are_the_datasheets_dense_ones() -> None:
    assert PEAKS["A100"].tflops("bf16") == 312.0 and PEAKS["A100"].tflops("tf32") == 156.0
    assert PEAKS["A100"].tflops("fp8") is None  # Ampere has no FP8
    assert PEAKS["H100-SXM"].tflops("bf16") == 989.5 and PEAKS["H100-SXM"].tflops("fp8") == 1979.0
    assert PEAKS["H100-PCIe"].tflops("bf16") == 756.5
    assert PEAKS["V100-SXM2"].tflops("bf16") is None and PEAKS["V100-SXM2"].tflops("fp16") == 125.0
    for p in PEAKS.values():
        assert p.source.startswith("https://") and p.fp32 > 0
        # tensor-core modes: each at least the plain FP32 rate, FP8 twice BF16 where both exist
        assert all((p.tflops(d) or p.fp32) >= p.fp32 for d in DTYPES)
        if p.fp8 and p.bf16:
            assert p.fp8 == pytest.approx(2 * p.bf16, rel=0.02)  # L40S: 733 against 2 x 362.05
    with pytest.raises(ValueError, match="int4"):
        PEAKS["A100"].tflops("int4")


# --- FLOPs from a trace ---------------------------------------------------------------------------------------


def test_matmul_flops_follow_torch_compute_flops() -> None:
    assert matmul_flops("aten::mm", [[64, 256], [256, 32]]) == 2 * 64 * 256 * 32
    assert matmul_flops("aten::addmm", [[32], [64, 256], [256, 32], [], []]) == 2 * 64 * 256 * 32
    assert matmul_flops("aten::bmm", [[8, 64, 16], [8, 16, 64]]) == 2 * 8 * 64 * 16 * 64
    assert matmul_flops("aten::baddbmm", [[8, 64, 64], [8, 64, 16], [8, 16, 64], [], []]) == 2 * 8 * 64 * 16 * 64
    assert matmul_flops("aten::mm", [[64, 256], [128, 32]]) is None  # inner dimensions differ
    assert matmul_flops("aten::mm", [[64, 256]]) is None
    assert matmul_flops("aten::mm", "[[64, 256], [256, 32]]") is None
    assert matmul_flops("aten::bmm", [[8, 64, 16], [4, 16, 64]]) is None


def test_matmul_bytes_are_operands_read_and_result_written() -> None:
    assert matmul_bytes("aten::mm", [[64, 256], [256, 32]], ["float", "float"]) == 4 * (64 * 256 + 256 * 32 + 64 * 32)
    assert matmul_bytes("aten::addmm", [[32], [64, 256], [256, 32], [], []], ["c10::BFloat16"]) is None
    assert matmul_bytes("aten::addmm", [[32], [64, 256], [256, 32], [], []], ["float", "c10::BFloat16", "x"]) == (
        2 * (64 * 256 + 256 * 32 + 64 * 32)
    )
    assert matmul_bytes("aten::bmm", [[8, 64, 16], [8, 16, 64]], ["c10::Half"] * 2) == 2 * 8 * (
        64 * 16 + 16 * 64 + 64 * 64
    )
    assert matmul_bytes("aten::mm", [[64, 256], [256, 32]], ["c10::ComplexFloat"] * 2) is None
    assert matmul_bytes("aten::mm", [[64, 256], [256, 32]], None) is None


def test_balance_points_and_memory_bound_matmuls_of_the_real_a100_trace() -> None:
    """The A100 trace's counted matmuls are skinny (N = 64): 19 and 31 FLOPs per byte, under the A100's TF32
    balance point of 156 / 2.039 = 76.5: memory-bound, all of their roofline time."""
    assert PEAKS["A100"].balance("tf32") == pytest.approx(156 / 2.039)
    assert PEAKS["H100-SXM"].balance("bf16") == pytest.approx(989.5 / 3.35)
    assert PEAKS["V100-SXM2"].balance("bf16") is None
    done = run(StepsRequest(paths=[FIX / "hta-a100-16rank"]))
    groups = done.loaded.ranks[0].matmuls
    assert groups is not None and sum(g.count for g in groups) == 25
    assert sorted(round(g.flops / g.bytes, 1) for g in groups) == [19.3, 30.8]
    m = done.report.ranks[0].mfu
    assert m is not None and m.balance_flops_per_byte == 76.5 and m.matmul_memory_bound_pct == 100.0
    # the CPU capture's matmuls have bytes too, but no GPU roofline
    cpu = run(StepsRequest(paths=[FIX / "cpu-gloo-flops"]))
    assert cpu.loaded.ranks[0].matmuls and cpu.report.ranks[0].mfu is not None
    assert cpu.report.ranks[0].mfu.matmul_memory_bound_pct is None
    # the 128-rank A100 trace (no deviceProperties: --gpu): most, not all, of its matmul time is memory-bound
    logs = run(StepsRequest(paths=[FIX / "hta-sampled-128rank"], mfu=MfuOptions(gpu="A100")))
    bound = [r.mfu.matmul_memory_bound_pct for r in logs.report.ranks if r.mfu]
    assert all(b is not None and 50 < b < 90 for b in bound)


def _event(name: str, cat: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def test_parser_reads_flops_devices_and_occupancy() -> None:
    doc = {
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}, {"id": 1, "name": "NVIDIA H100 80GB HBM3"}],
        "with_flops": 1,
        "traceEvents": [
            _event("aten::mm", "cpu_op", 0, 5, flops=1000),  # args.flops wins over the shapes
            _event("aten::addmm", "cpu_op", 10, 5, **{"Input Dims": [[4], [2, 3], [3, 4], [], []]}),
            _event("aten::mm", "cpu_op", 20, 5, **{"Input Dims": [[2, 3], [5, 4]]}),  # no fit: not counted
            _event("aten::conv2d", "cpu_op", 30, 5, flops=7.5e9),
            _event(
                "sm90_xmma_gemm_bf16bf16", "kernel", 40, 5, stream=7, correlation=1, **{"est. achieved occupancy %": 25}
            ),
            _event("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 50, 5, stream=7, correlation=2, bytes=64),
        ],
    }
    t = parse_kineto_bytes(json.dumps(doc).encode())
    assert t.devices == ["NVIDIA H100 80GB HBM3"] * 2 and t.with_flops
    assert list(t.flop_ops.flops) == [1000.0, 2 * 2 * 3 * 4, 7.5e9] and list(t.flop_ops.from_shapes) == [0, 1, 0]
    assert list(t.gpu.occupancy) == [25.0, -1.0]
    assert [t.gpu.names[i] for i in t.gpu.name] == ["sm90_xmma_gemm_bf16bf16", "Memcpy HtoD (Pageable -> Device)"]


def test_absurd_shapes_are_skipped_not_fatal() -> None:
    """Shapes too large for a float (10**200) or for any real tensor are not counted; the trace still parses."""
    doc = {
        "traceEvents": [
            _event("aten::mm", "cpu_op", 0, 5, **{"Input Dims": [[10**200, 2], [2, 10**200]]}),
            _event("aten::mm", "cpu_op", 10, 5, **{"Input Dims": [[2**62, 2**62], [2**62, 2**62]]}),
            _event("aten::mm", "cpu_op", 20, 5, **{"Input Dims": [[True, 2], [2, 3]]}),
            _event("aten::mm", "cpu_op", 30, 5, **{"Input Dims": [[2, 3], [3, 4]], "Input type": ["float"] * 2}),
        ]
    }
    t = parse_kineto_bytes(json.dumps(doc).encode())
    assert list(t.flop_ops.flops) == [2 * 2 * 3 * 4] and list(t.flop_ops.nbytes) == [4 * (6 + 12 + 8)]


def test_real_cpu_capture_counts_every_matmul_of_every_step() -> None:
    """cpu-gloo-flops: train_ddp.py --with-flops on 4 gloo ranks (torch 2.13 CPU)."""
    for r in range(4):
        t = load_trace(FIX / "cpu-gloo-flops" / f"rank-{r}.json.gz")
        assert t.with_flops and t.devices == []
        rs = decompose_trace(t)
        assert rs.flops_from == "matmul shapes" and rs.flops_lower_bound is None
        assert [s.flops for s in rs.steps] == [CPU_STEP_FLOPS] * 12


def test_cpu_capture_gets_achieved_flops_and_no_mfu() -> None:
    rep = run(StepsRequest(paths=[FIX / "cpu-gloo-flops"])).report
    loaded = run(StepsRequest(paths=[FIX / "cpu-gloo-flops"])).loaded
    for r, rs in zip(rep.ranks, loaded.ranks, strict=True):
        m = r.mfu
        assert m is not None and m.device == "CPU" and m.mfu_pct is None and m.peak_tflops is None
        step_s = statistics.median(s.step_ms for s in rs.steps) / 1000
        assert m.achieved_tflops == pytest.approx(CPU_STEP_FLOPS / step_s / 1e12, rel=1e-4)
        assert m.note is not None and "does not apply" in m.note
    assert rep.mfu is not None and rep.mfu.mfu_pct is None and rep.mfu.ranks == 4
    assert not any(f.code is FindingCode.STEP_LOW_MFU for f in rep.findings)
    # a GPU named for a CPU trace changes nothing: the trace shows no GPU
    again = run(StepsRequest(paths=[FIX / "cpu-gloo-flops"], mfu=MfuOptions(gpu="A100"))).report
    assert again.mfu is not None and again.mfu.mfu_pct is None


# --- kernel classes on the real GPU traces --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "cls"),
    [
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>(cutlass_80_tenso",
            "COMPUTE",
            "gemm",
        ),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma", "COMPUTE", "gemm"),
        ("_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolution", "COMPUTE", "gemm"),
        ("void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int", "COMPUTE", "elementwise"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>",
            "COMPUTE",
            "elementwise",
        ),
        ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float", "COMPUTE", "elementwise"),
        ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>", "COMPUTE", "elementwise"),
        ("triton__0d1d2d3d4d5d6d7d8d9d10d11d12d13d14", "COMPUTE", "other"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "COMM", "communication"),
        ("Memcpy HtoD (Pageable -> Device)", "MEMCPY_HTOD", "memcpy"),
        ("Memset (Device)", "MEMSET", "memcpy"),
    ],
)
def test_kernel_classes_of_real_kernel_names(name: str, kind: str, cls: str) -> None:
    """Names from the real A100 and H100 traces of tests/fixtures/traces."""
    assert kernel_class(name, GpuKind[kind]) == cls


def test_gemm_dtypes_from_kernel_names() -> None:
    assert name_dtype("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>") == "tf32"
    assert name_dtype("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma") == "fp32"
    assert name_dtype("cutlass_80_simt_sgemm_128x256_8x4_nt_align1") == "fp32"
    assert name_dtype("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn") == "bf16"
    assert name_dtype("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x64") == "fp8"
    assert name_dtype("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn") == "fp16"
    assert name_dtype("volta_h884gemm_64x64_ldg8_nn") == "fp16"  # a V100 has an FP16 peak, no BF16 one
    assert name_dtype("void at::native::vectorized_elementwise_kernel<4>") is None


def test_real_a100_trace_kernel_classes_and_lower_bound_mfu() -> None:
    """hta-a100-16rank (real, A100-SXM4-80GB, record_shapes): its matmul ops explain 25 of its 103 GEMM-class
    kernels (fbgemm and the embedding path launch the rest), so its MFU is a lower bound and never condemns."""
    rep = run(StepsRequest(paths=[FIX / "hta-a100-16rank"])).report
    r = rep.ranks[0]
    assert r.kernel_classes is not None
    shares = {c.kernel_class: c for c in r.kernel_classes}
    assert r.kernel_classes[0].kernel_class == "communication" and shares["communication"].share_pct == 42.32
    assert shares["gemm"].count == 103 and shares["gemm"].share_pct == 26.62
    assert shares["elementwise"].occupancy_pct == 47.5 and shares["memcpy"].occupancy_pct is None
    assert sum(c.share_pct for c in r.kernel_classes) == pytest.approx(100, abs=0.05)
    m = r.mfu
    assert m is not None and m.device == "NVIDIA A100-SXM4-80GB" and m.gpu_model == "A100"
    assert m.dtype == "tf32" and m.dtype_from == "GEMM kernel names" and m.peak_tflops == 156.0
    assert m.flops_from == "matmul shapes" and m.lower_bound
    assert m.flops_per_step == 4_505_731_072 and m.mfu_pct == pytest.approx(0.013, abs=0.001)
    assert m.note is not None and "103 GEMM-class kernels" in m.note
    assert rep.mfu is not None and rep.mfu.lower_bound


def test_real_trace_without_flops_says_flops_unknown() -> None:
    """hta-a100-2rank-nccl (real, no shapes, no flops): the kernel classes, but no MFU."""
    rep = run(StepsRequest(paths=[FIX / "hta-a100-2rank-nccl"])).report
    assert rep.mfu is not None and rep.mfu.mfu_pct is None and rep.mfu.achieved_tflops is None
    assert rep.mfu.note is not None and FLOPS_UNKNOWN in rep.mfu.note
    assert next(iter(rep.mfu.kernel_classes_pct)) == "elementwise"


def test_flops_per_step_gives_the_mfu_of_the_real_h100_trace() -> None:
    """h100-nccl1-slow-data (real, one H100 SXM5, fp32 MLP 4096-4096-4096-10, batch 8192): 6 x N x batch."""
    weights = 2 * 4096 * 4096 + 4096 * 10
    flops = 6 * weights * 8192
    done = run(StepsRequest(paths=[FIX / "h100-nccl1-slow-data"], mfu=MfuOptions(flops_per_step=flops)))
    m = done.report.ranks[0].mfu
    step_s = statistics.median(s.step_ms for s in done.loaded.ranks[0].steps) / 1000
    assert m is not None and m.gpu_model == "H100-SXM" and m.dtype == "fp32" and m.peak_tflops == 67.0
    assert m.achieved_tflops == pytest.approx(flops / step_s / 1e12, rel=1e-4)
    assert m.mfu_pct == pytest.approx(100 * flops / step_s / 67e12, rel=1e-3)
    # --dtype and --gpu override the trace: the same FLOPs against an H100 PCIe's bf16 peak
    other = (
        run(
            StepsRequest(
                paths=[FIX / "h100-nccl1-slow-data"],
                mfu=MfuOptions(flops_per_step=flops, gpu="H100-PCIe", dtype="bf16"),
            )
        )
        .report.ranks[0]
        .mfu
    )
    assert other is not None and other.peak_tflops == 756.5 and other.dtype_from == "--dtype"
    assert m.mfu_pct is not None and other.mfu_pct == pytest.approx(m.mfu_pct * 67.0 / 756.5, rel=1e-3)


def test_flops_per_step_is_shared_by_the_world() -> None:
    """StepTimer logs of 4 ranks (real, cpu-gloo-clean): no device, so --gpu; F/4 FLOPs per rank."""
    f = 4e12
    logs = sorted((FIX / "cpu-gloo-clean").glob("steps-rank-*.jsonl"))
    rep = run(StepsRequest(paths=logs, mfu=MfuOptions(flops_per_step=f, gpu="A100"))).report
    assert rep.mfu is not None and rep.mfu.ranks == 4 and rep.mfu.flops_per_step == pytest.approx(f)
    assert rep.mfu.dtype == "bf16" and rep.mfu.dtype_from == "assumed" and rep.mfu.peak_tflops == 4 * 312.0
    assert all(r.mfu is not None and r.mfu.flops_per_step == f / 4 for r in rep.ranks)
    assert rep.mfu.achieved_tflops == pytest.approx(sum(r.mfu.achieved_tflops or 0 for r in rep.ranks if r.mfu))


def test_a_steptimer_told_its_flops_gives_the_mfu(tmp_path: Path) -> None:
    """A real StepTimer (CPU wall clock) told this rank's FLOPs per step writes them in every line; fleetdx steps
    reads them (a GPU named with --gpu: a StepTimer log has no device)."""
    from fleetdx.steps import StepTimer

    for rank in range(2):
        timer = StepTimer(tmp_path, rank=rank, world_size=2, sync="none", flops_per_step=3e12, dump_on_request=False)
        for _ in range(3):
            with timer.step(), timer.stage("forward"):
                sum(range(1000))
        timer.close()
    lines = [json.loads(x) for x in (tmp_path / "steps-rank-0.jsonl").read_text().splitlines()]
    assert [x["flops"] for x in lines] == [3e12] * 3
    done = run(StepsRequest(paths=[tmp_path], mfu=MfuOptions(gpu="H100-SXM")))
    for r, rs in zip(done.report.ranks, done.loaded.ranks, strict=True):
        m = r.mfu
        step_s = statistics.median(s.step_ms for s in rs.steps) / 1000
        assert m is not None and m.flops_from == "StepTimer flops_per_step" and not m.lower_bound
        assert m.flops_per_step == 3e12 and m.achieved_tflops == pytest.approx(3 / step_s, rel=1e-4)
        assert m.peak_tflops == 989.5 and m.dtype_from == "assumed"
    # without --gpu: achieved FLOP/s, and the note asks for the GPU
    bare = run(StepsRequest(paths=[tmp_path])).report
    assert bare.mfu is not None and bare.mfu.mfu_pct is None and "give --gpu" in (bare.mfu.note or "")


def test_bad_options_are_usage_errors() -> None:
    for opts in (MfuOptions(gpu="X100"), MfuOptions(dtype="int4"), MfuOptions(flops_per_step=0)):
        with pytest.raises(ConfigError):
            run(StepsRequest(paths=[FIX / "cpu-gloo-flops"], mfu=opts))


# --- STEP_LOW_MFU: a busy GPU (a stand-in trace) --------------------------------------------------------------


def _busy_trace(tmp: Path, gemm_share: float = 0.2, gap_us: float = 0.0, shapes: bool = False) -> Path:
    """A **stand-in** Kineto trace (built here, not captured: no GPU was lent): one rank on an A100-SXM4-80GB,
    4 steps of 10 kernels of 1 ms back to back on one stream (``gap_us`` idle after each kernel), ``gemm_share``
    of them bf16 GEMMs, the rest elementwise; with ``shapes``, one counted aten::mm per step and no more."""
    events: list[dict[str, Any]] = []
    corr, t = 0, 0.0
    for step in range(4):
        events.append(_event(f"ProfilerStep#{step}", "user_annotation", t, 10 * (1000 + gap_us)))
        if shapes:
            events.append(_event("aten::mm", "cpu_op", t + 1, 1, **{"Input Dims": [[1024, 1024], [1024, 1024]]}))
        for k in range(10):
            corr += 1
            gemm = k < round(10 * gemm_share)
            name = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn" if gemm else "vectorized_elementwise_kernel"
            events.append(_event("cudaLaunchKernel", "cuda_runtime", t + k, 1, correlation=corr))
            events.append(
                _event(
                    name,
                    "kernel",
                    t + k * (1000 + gap_us) + 5,
                    1000,
                    stream=7,
                    correlation=corr,
                    **{"est. achieved occupancy %": 50},
                )
            )
        t += 10 * (1000 + gap_us)
    doc = {
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
        "distributedInfo": {"rank": 0, "world_size": 1, "backend": "nccl"},
        "traceEvents": events,
    }
    path = tmp / "rank-0.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def _low(rep: Any) -> list[Any]:
    return [f for f in rep.findings if f.code is FindingCode.STEP_LOW_MFU]


def test_busy_gpu_with_low_mfu_is_a_finding_naming_the_kernel_classes(tmp_path: Path) -> None:
    trace = _busy_trace(tmp_path)
    rep = run(StepsRequest(paths=[trace], mfu=MfuOptions(flops_per_step=10e12 * 0.010))).report
    (f,) = _low(rep)
    assert rep.verdict.name == "WARNING" and rep.exit_code == 1
    assert not any(
        x.code is FindingCode.STEP_COMPUTE_BOUND for x in rep.findings
    )  # "saturated": not with math this low
    assert rep.mfu is not None and rep.mfu.gpu_busy_pct is not None and rep.mfu.gpu_busy_pct > 99
    # 0.1 TFLOP per 10 ms step: 10 TFLOP/s of the A100's 312 bf16 TFLOP/s
    assert rep.mfu.achieved_tflops == pytest.approx(10.0, rel=0.01) and rep.mfu.mfu_pct == pytest.approx(3.2, abs=0.1)
    assert f.details["kernel_classes_pct"] == {"elementwise": 80.0, "gemm": 20.0}
    assert "elementwise 80%" in f.message and "gemm 20%" in f.message and "fuse elementwise" in f.message
    assert f.details["threshold_mfu_pct"] == LOW_MFU_PCT and f.severity.value == "warning"


def test_no_finding_without_its_evidence(tmp_path: Path) -> None:
    busy = _busy_trace(tmp_path)
    # a high MFU: 0.25 of the peak
    high = run(StepsRequest(paths=[busy], mfu=MfuOptions(flops_per_step=312e12 * 0.25 * 0.010))).report
    assert not _low(high) and high.mfu is not None and high.mfu.mfu_pct == pytest.approx(25, abs=0.5)
    # no FLOPs: nothing said but "FLOPs unknown"
    unknown = run(StepsRequest(paths=[busy])).report
    assert not _low(unknown) and unknown.mfu is not None and FLOPS_UNKNOWN in (unknown.mfu.note or "")
    # a GPU idle 20% of the time is not busy
    idle_dir = tmp_path / "idle"
    idle_dir.mkdir()
    idle = run(StepsRequest(paths=[_busy_trace(idle_dir, gap_us=250.0)], mfu=MfuOptions(flops_per_step=1e9))).report
    assert not _low(idle) and idle.mfu is not None and idle.mfu.gpu_busy_pct == pytest.approx(80, abs=1)
    # FLOPs from shapes that explain 1 of 2 GEMM kernels per step: a lower bound, never a finding
    lb_dir = tmp_path / "lb"
    lb_dir.mkdir()
    lb = run(StepsRequest(paths=[_busy_trace(lb_dir, shapes=True)])).report
    assert not _low(lb) and lb.mfu is not None and lb.mfu.lower_bound and lb.mfu.mfu_pct is not None


# --- the command ----------------------------------------------------------------------------------------------


@pytest.fixture
def width_80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common.console, "width", 80)


def test_cli_prints_mfu_and_kernel_classes_in_80_columns(width_80: None, tmp_path: Path) -> None:
    app = cli_app(steps_cmd)
    res = runner.invoke(app, ["steps", str(_busy_trace(tmp_path)), "-j", "1", "--flops-per-step", "1e11"])
    assert res.exit_code == 1, res.output
    assert all(len(x) <= 80 for x in res.stdout.splitlines())
    assert "MFU of the job (1 rank): 3.21%: 10 of 312 TFLOP/s (A100 bf16 dense" in res.stdout
    assert "STEP_LOW_MFU" in res.stdout and "GPU busy 100%" in res.stdout
    cpu = runner.invoke(app, ["steps", str(FIX / "cpu-gloo-flops"), "-j", "1"])
    assert cpu.exit_code == 0 and "does not apply" in cpu.stdout and "1.4" in cpu.stdout
    # (the ranks' "missing" lines are printed whole, soft-wrapped, by design: not this command's new output)
    assert all(len(x) <= 80 for x in cpu.stdout.splitlines() if not x.startswith("ranks "))
    doc = json.loads(runner.invoke(app, ["steps", str(FIX / "hta-a100-16rank"), "-j", "1", "--json"]).stdout)
    assert doc["mfu"]["gpu_model"] == "A100" and doc["ranks"][0]["mfu"]["lower_bound"] is True
    bad = runner.invoke(app, ["steps", str(FIX / "cpu-gloo-flops"), "--gpu", "X100"])
    assert bad.exit_code == 3 and "not in the peak table" in bad.output


def test_html_page_has_the_mfu_section(tmp_path: Path) -> None:
    from fleetdx.orchestrator.htmlreport import render_steps

    done = run(StepsRequest(paths=[_busy_trace(tmp_path)], mfu=MfuOptions(flops_per_step=1e11)))
    page = render_steps(done.report, ranks=done.loaded.ranks)
    assert '<section id="mfu">' in page and 'href="#mfu"' in page
    assert "MFU of the job (1 rank): 3.21%: 10 of 312 TFLOP/s (A100 bf16 dense peak" in page
    assert "GPU time by kernel class" in page and "STEP_LOW_MFU" in page
    cpu = run(StepsRequest(paths=[FIX / "cpu-gloo-clean"]))  # no FLOPs, no GPU: no section
    assert '<section id="mfu">' not in render_steps(cpu.report, ranks=cpu.loaded.ranks)
