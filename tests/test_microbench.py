"""GPU micro-benchmark: the parser on the captured JSONs, the CLI's skip on a machine without CUDA (through
the
real runner), and a GPU test that runs the probe for real (skipped without CUDA)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fleetdx.probes.catalog import CATALOG, MICROBENCH_FILE, MICROBENCH_SKIP_EXIT
from fleetdx.probes.errors import ParseError
from fleetdx.probes.microbench import EXIT_SKIPPED
from fleetdx.probes.parsers.microbench import parse_microbench
from fleetdx.probes.runner import RunResult, SubprocessRunner

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
MICROBENCH = next(s for s in CATALOG if s.file == MICROBENCH_FILE)


@pytest.fixture(scope="module")
def probe_run() -> RunResult:
    """One real run of the probe through the runner, as collect runs it (small sizes, so a GPU run is short).
    The parent never imports torch: the child's exit code says whether CUDA is there."""
    cmd = MICROBENCH
    argv = [
        *cmd.argv_for(sys.executable),
        "--gemm-n",
        "4096",
        "--iters",
        "5",
        "--d2d-bytes",
        str(1 << 28),
        "--h2d-bytes",
        str(1 << 26),
    ]
    return SubprocessRunner().run(argv, timeout_s=300)


def test_parse_idle_fixture() -> None:
    (m,) = parse_microbench((HOSTS / "h100-vm-idle" / "torch_microbench.json").read_text()).gpus
    assert m.gpu_name == "NVIDIA H100 80GB HBM3" and m.gpu_index is None
    assert m.gemm_bf16_tflops == pytest.approx(772.6498220375818)
    assert m.gemm_fp16_tflops == pytest.approx(738.3950867488987)
    assert m.gemm_fp32_tflops == pytest.approx(51.17160799714658)
    assert m.d2d_gbps == pytest.approx(2992.0577041260194)
    assert (m.h2d_pinned_gbps, m.d2h_pinned_gbps) == pytest.approx((54.724048499082585, 54.977433655851875))
    assert (m.h2d_pageable_gbps, m.d2h_pageable_gbps) == pytest.approx(
        (18.230565765838364, 13.761454640787552)
    )


def test_parse_busy_fixture() -> None:
    (m,) = parse_microbench((HOSTS / "h100-vm-busy" / "torch_microbench.json").read_text()).gpus
    assert m.gemm_bf16_tflops == pytest.approx(671.5083528800252)
    assert m.d2d_gbps == pytest.approx(1605.5424757464514)
    assert m.h2d_pinned_gbps == pytest.approx(54.96248485920464)


def test_parse_probe_output_shape() -> None:
    """The probe's own multi-GPU shape (constructed: two GPUs with the idle fixture's keys plus an index)."""
    flat = json.loads((HOSTS / "h100-vm-idle" / "torch_microbench.json").read_text())
    doc = {
        "status": "ok",
        "torch": "2.11.0",
        "cuda": "13.0",
        "gemm_n": 8192,
        "iters": 20,
        "gpus": [{**flat, "index": 0}, {**flat, "index": 1, "gemm_bfloat16": 700.0}],
    }
    r = parse_microbench(json.dumps(doc))
    assert [g.gpu_index for g in r.gpus] == [0, 1]
    assert r.gpus[1].gemm_bf16_tflops == 700.0
    assert (r.torch_version, r.gemm_n, r.iters) == ("2.11.0", 8192, 20)


@pytest.mark.parametrize(
    "text",
    [
        '{"status": "skipped", "reason": "no CUDA device"}',
        '{"gemm_bfloat16": "fast"}',
        '{"gemm_bfloat16": -1}',
        '{"device": "NVIDIA H100 80GB HBM3"}',
        '{"gpus": []}',
        "[1, 2]",
        "{",
    ],
    ids=["skipped", "string", "negative", "no-figures", "empty-gpus", "not-object", "truncated"],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ParseError):
        parse_microbench(text)


def test_cli_without_cuda_is_skipped_with_exit_4(probe_run: RunResult) -> None:
    assert MICROBENCH.skip_exit_code == MICROBENCH_SKIP_EXIT == EXIT_SKIPPED == 4
    if probe_run.returncode == 0:
        pytest.skip("a CUDA device is present: the no-CUDA path is not taken")
    assert probe_run.returncode == 4, probe_run.stdout + probe_run.stderr
    doc = json.loads(probe_run.stdout)
    assert doc["status"] == "skipped" and "CUDA" in doc["reason"]
    with pytest.raises(ParseError):
        parse_microbench(probe_run.stdout)


def test_cli_bad_arguments_exit_2() -> None:
    res = SubprocessRunner().run([sys.executable, "-m", "fleetdx.probes.microbench", "--iters", "0"], timeout_s=60)
    assert res.returncode == 2


@pytest.mark.gpu
def test_gpu_measures_every_visible_gpu(probe_run: RunResult) -> None:
    if probe_run.returncode == EXIT_SKIPPED:
        pytest.skip("needs a CUDA device: " + probe_run.stdout.strip())
    assert probe_run.returncode == 0, probe_run.stdout + probe_run.stderr
    report = parse_microbench(probe_run.stdout)
    assert report.gpus and [g.gpu_index for g in report.gpus] == list(range(len(report.gpus)))
    for g in report.gpus:
        assert g.gpu_name
        for v in (
            g.gemm_bf16_tflops,
            g.gemm_fp16_tflops,
            g.gemm_fp32_tflops,
            g.d2d_gbps,
            g.h2d_pinned_gbps,
            g.d2h_pinned_gbps,
            g.h2d_pageable_gbps,
            g.d2h_pageable_gbps,
        ):
            assert v is not None and v > 0
