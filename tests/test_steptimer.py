"""The StepTimer (``from fleetdx.steps import StepTimer``): standard library only at import, one JSONL line per
step with its stages, readable by the StepTimer log parser; the parser under broken input and fuzzing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.orchestrator.steps.decompose import decompose_steplog
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.steplog import parse_steplog
from fleetdx.steps import SCHEMA, StepTimer

FIX = Path(__file__).parent / "fixtures" / "traces"


def test_import_needs_only_the_standard_library() -> None:
    code = (
        "import sys, fleetdx.steps; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'pydantic', 'ijson')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_one_line_per_step_with_stages_and_custom_names(tmp_path: Path) -> None:
    timer = StepTimer(tmp_path / "steps-rank-{rank}.jsonl", rank=3, world_size=4, host="gpu07", sync="none")
    for _ in range(3):
        with timer.step():
            with timer.stage("data"):
                time.sleep(0.002)
            with timer.stage("forward"):
                pass
            with timer.stage("my_eval"):
                pass
            with timer.stage("data"):  # a stage used twice adds up
                time.sleep(0.001)
    timer.close()
    path = tmp_path / "steps-rank-3.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [d["step"] for d in lines] == [0, 1, 2]
    d = lines[0]
    assert d["schema"] == SCHEMA and (d["rank"], d["world_size"], d["host"], d["timing"]) == (3, 4, "gpu07", "wall")
    assert set(d["stages_ms"]) == {"data", "forward", "my_eval"}
    assert d["stages_ms"]["data"] >= 3.0 and d["step_ms"] >= d["stages_ms"]["data"]
    log = parse_steplog(path.read_text(), str(path))
    rs = decompose_steplog(log)
    assert rs.rank == 3 and rs.host == "gpu07" and len(rs.steps) == 3
    s = rs.steps[0]
    assert s.stages_ms["my_eval"] >= 0 and abs(sum(s.stages_ms.values()) - s.step_ms) < 0.01


def test_rank_from_the_environment_and_a_folder_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    with StepTimer(tmp_path / "out", sync="none") as timer:
        with timer.step():
            pass
    assert timer.path == tmp_path / "out" / "steps-rank-5.jsonl"
    assert json.loads(timer.path.read_text())["world_size"] == 8


def test_misuse_is_an_error(tmp_path: Path) -> None:
    timer = StepTimer(tmp_path / "s.jsonl", rank=0, sync="none")
    with pytest.raises(RuntimeError, match="outside a step"):
        with timer.stage("data"):
            pass
    with pytest.raises(RuntimeError, match="inside a step"):
        with timer.step():
            with timer.step():
                pass
    with pytest.raises(ValueError, match="sync must be"):
        StepTimer(tmp_path / "t.jsonl", rank=0, sync="sometimes")  # type: ignore[arg-type]
    timer.close()


def test_cuda_sync_modes_need_cuda(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="needs torch with CUDA"):
        StepTimer(tmp_path / "s.jsonl", rank=0, sync="cuda-events")
    assert StepTimer(tmp_path / "a.jsonl", rank=0, sync="auto").sync == "none"


def test_a_step_that_raises_is_still_written(tmp_path: Path) -> None:
    timer = StepTimer(tmp_path / "s.jsonl", rank=0, sync="none")
    with pytest.raises(KeyError):
        with timer.step():
            with timer.stage("data"):
                raise KeyError("boom")
    timer.close()
    assert json.loads((tmp_path / "s.jsonl").read_text())["stages_ms"]["data"] >= 0


def test_captured_logs_parse() -> None:
    log = parse_steplog((FIX / "cpu-gloo-clean" / "steps-rank-1.jsonl").read_text(), "steps-rank-1.jsonl")
    assert (log.rank, log.world_size, log.host, log.timing) == (1, 4, "vm", "wall")
    assert len(log.records) == 14  # 2 unprofiled (wait, warmup) + 12 profiled steps


def test_a_cut_last_line_is_counted_not_fatal() -> None:
    text = (FIX / "cpu-gloo-clean" / "steps-rank-0.jsonl").read_text()
    log = parse_steplog(text[: len(text) - 40])
    assert log.truncated == 1 and len(log.records) == 13


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "not json\n{}\n",
        '{"schema": "other/1"}\n',
        '{"schema": "fleetdx.steps/1", "rank": 0, "step": 0, "start_unix_s": 1, "step_ms": -1, "stages_ms": {}}\n',
        '{"schema": "fleetdx.steps/1", "rank": 0, "step": 0, "start_unix_s": 1, "step_ms": 1, "stages_ms": []}\n',
        '{"schema": "fleetdx.steps/1", "rank": 0, "step": 0, "start_unix_s": 1, "step_ms": 1, "stages_ms": {}}\n'
        '{"schema": "fleetdx.steps/1", "rank": 1, "step": 1, "start_unix_s": 1, "step_ms": 1, "stages_ms": {}}\n',
    ],
)
def test_broken_logs_are_one_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_steplog(text)


REAL = (FIX / "cpu-gloo-clean" / "steps-rank-0.jsonl").read_text()
FUZZ = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@FUZZ
@given(cut=st.integers(0, len(REAL)), pos=st.integers(0, len(REAL)), junk=st.text(max_size=6))
def test_fuzz_steplog(cut: int, pos: int, junk: str) -> None:
    text = REAL[:pos] + junk + REAL[pos:]
    for t in (text, text[:cut]):
        try:
            parse_steplog(t)
        except ParseError:
            pass


def _gpu_work(torch: Any, n: int = 24) -> Any:
    """About 20-40 ms of bf16 matrix products on an H100-class GPU, launched in well under a millisecond."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(n):
        a = torch.mm(a, a).clamp_(-1, 1)
    return a


@pytest.mark.gpu
@pytest.mark.parametrize("sync", ["cuda-events", "synchronize", "none"])
def test_gpu_time_is_timed_honestly(tmp_path: Path, sync: str) -> None:
    """On a GPU: a ``forward`` stage that only launches GPU work is timed as that GPU work by the two honest modes
    (at least half the reference time taken with CUDA events around the same work), while ``sync="none"``
    measures the launches (under half): why the honest modes exist. The step time holds its stages."""
    import torch

    _gpu_work(torch, 2)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    start.record()
    _gpu_work(torch)
    end.record()
    end.synchronize()
    ref_ms = float(start.elapsed_time(end))
    torch.cuda.synchronize()
    timer = StepTimer(tmp_path, rank=0, world_size=1, host="gpu", sync=sync)  # type: ignore[arg-type]
    with timer.step():
        with timer.stage("data"):
            time.sleep(0.005)
        with timer.stage("forward"):
            _gpu_work(torch)
    timer.close()
    torch.cuda.synchronize()
    (line,) = (json.loads(x) for x in (tmp_path / "steps-rank-0.jsonl").read_text().splitlines())
    fwd = line["stages_ms"]["forward"]
    assert line["timing"] == ("wall" if sync == "none" else sync)
    assert line["stages_ms"]["data"] >= 4.0
    if sync == "none":
        assert fwd < ref_ms / 2, (fwd, ref_ms)
    else:
        assert fwd >= ref_ms / 2, (fwd, ref_ms)
        assert line["step_ms"] >= fwd + line["stages_ms"]["data"] - 0.01, line
