"""fleetdx's temporal breakdown (GPU idle / compute / non-compute) agrees with HolisticTraceAnalysis's
``get_temporal_breakdown`` within 1 percentage point on every real GPU trace of tests/fixtures/traces, and within
0.05 point on the nanosecond-resolution H100 captures once HTA's inward rounding of nanoseconds is off
(``HTA_DISABLE_NS_ROUNDING=1``); with it on, HTA drops up to 2 us of every kernel, which the H100 tiny-ops capture
(thousands of 1-3 us kernels) shows as 1.9 points less compute.

HTA's figures are recorded in ``hta_reference.json`` (HTA 0.5.0, by :func:`record`) so the agreement is checked
without HTA installed; when HTA is installed (``pip install 'fleetdx[hta]'``) it is also recomputed live and
must match the recording."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from fleetdx.orchestrator.steps.decompose import decompose_trace, temporal_breakdown
from fleetdx.orchestrator.steps.load import load_trace

FIX = Path(__file__).parent / "fixtures" / "traces"
REF = FIX / "hta_reference.json"
#: within 1 point of HTA as it runs by default
GPU_TRACES = [
    "hta-a100-16rank",
    "hta-a100-2rank-nccl",
    "hta-sampled-128rank",
    "h100-nccl1-slow-data",
    "h100-nccl1-h2d",
    "h100-gloo4-slow-data-rank2",
]
#: nanosecond traces (torch 2.11 on an H100), against HTA with HTA_DISABLE_NS_ROUNDING=1
NS_TRACES = ["h100-nccl1-slow-data", "h100-nccl1-h2d", "h100-nccl1-tiny-ops", "h100-gloo4-slow-data-rank2"]
NS_KEY = "ns_rounding_disabled"
CASES = [(d, p.name) for d in GPU_TRACES for p in sorted((FIX / d).glob("rank-*.json.gz"))]
NS_CASES = [(d, p.name) for d in NS_TRACES for p in sorted((FIX / d).glob("rank-*.json.gz"))]


def hta_breakdown(folder: Path) -> dict[str, dict[str, float]]:
    """HTA's ``get_temporal_breakdown`` of every rank in ``folder``: rank -> {idle, compute, non_compute} %."""
    from hta.trace_analysis import TraceAnalysis

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = TraceAnalysis(trace_dir=str(folder)).get_temporal_breakdown(visualize=False)
    return {
        str(int(r["rank"])): {
            "idle": float(r["idle_time_pctg"]),
            "compute": float(r["compute_time_pctg"]),
            "non_compute": float(r["non_compute_time_pctg"]),
        }
        for _, r in df.iterrows()
    }


def record() -> None:
    """Write hta_reference.json from a live HTA run (``python -c 'from tests.test_steps_hta import record;
    record()'``)."""
    import os

    import hta

    out: dict[str, object] = {"hta_version": getattr(hta, "__version__", "0.5.0")}
    for d in [*GPU_TRACES, "h100-nccl1-tiny-ops"]:
        out[d] = hta_breakdown(FIX / d)
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    try:
        out[NS_KEY] = {d: hta_breakdown(FIX / d) for d in NS_TRACES}
    finally:
        del os.environ["HTA_DISABLE_NS_ROUNDING"]
    REF.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


@pytest.mark.parametrize(("folder", "name"), CASES)
def test_temporal_breakdown_agrees_with_hta_within_one_point(folder: str, name: str) -> None:
    ref = json.loads(REF.read_text(encoding="utf-8"))
    trace = load_trace(FIX / folder / name)
    ours = temporal_breakdown(trace)
    assert ours is not None
    theirs = ref[folder][str(trace.rank)]
    pct = ours.pct()
    for key in ("idle", "compute", "non_compute"):
        assert abs(pct[key] - theirs[key]) <= 1.0, (folder, key, pct, theirs)
    assert abs(sum(pct.values()) - 100) < 0.05


@pytest.mark.parametrize(("folder", "name"), NS_CASES)
def test_nanosecond_traces_agree_with_hta_without_its_rounding(folder: str, name: str) -> None:
    ref = json.loads(REF.read_text(encoding="utf-8"))[NS_KEY]
    trace = load_trace(FIX / folder / name)
    ours = temporal_breakdown(trace)
    assert ours is not None
    pct, theirs = ours.pct(), ref[folder][str(trace.rank)]
    for key in ("idle", "compute", "non_compute"):
        assert abs(pct[key] - theirs[key]) <= 0.05, (folder, key, pct, theirs)


def test_hta_rounding_drops_microsecond_kernels() -> None:
    """The recorded default-HTA figures of the tiny-ops capture: compute 1.50 % where the kernels' own
    nanosecond durations (fleetdx, and HTA with rounding off) give 3.42 %."""
    ref = json.loads(REF.read_text(encoding="utf-8"))
    ours = temporal_breakdown(load_trace(FIX / "h100-nccl1-tiny-ops" / "rank-0.json.gz"))
    assert ours is not None
    assert ref["h100-nccl1-tiny-ops"]["0"]["compute"] < ours.pct()["compute"] - 1.5
    assert abs(ref[NS_KEY]["h100-nccl1-tiny-ops"]["0"]["compute"] - ours.pct()["compute"]) <= 0.05


def test_hta_live_matches_the_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("hta", reason="HTA not installed (pip install 'fleetdx[hta]')")
    ref = json.loads(REF.read_text(encoding="utf-8"))
    for d in [*GPU_TRACES, "h100-nccl1-tiny-ops"]:
        assert hta_breakdown(FIX / d) == ref[d]
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    for d in NS_TRACES:
        assert hta_breakdown(FIX / d) == ref[NS_KEY][d]


def test_a_cpu_only_trace_is_analysed_and_says_what_is_missing() -> None:
    """HTA raises IndexError on a CPU-only trace (no GPU kernel to merge); fleetdx decomposes its steps and
    says that the GPU shares are not available."""
    trace = load_trace(FIX / "cpu-gloo-clean" / "rank-0.json.gz")
    rs = decompose_trace(trace)
    assert rs.temporal is None and rs.kernels is None
    assert len(rs.steps) == 12 and all(s.step_ms > 0 for s in rs.steps)
    assert any("no GPU activity" in m for m in rs.missing)


def test_hta_itself_fails_on_the_cpu_only_trace() -> None:
    pytest.importorskip("hta", reason="HTA not installed")
    with pytest.raises(IndexError):
        hta_breakdown(FIX / "cpu-gloo-clean")
