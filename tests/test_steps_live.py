"""Live: a real 4-process gloo DDP training on this machine's CPUs (tests/fixtures/traces/train_ddp.py) under
torch.profiler and the StepTimer, one injected fault at a time; fleetdx names the injected stage and rank from
the fresh traces and logs. The captured copies of these runs are the cpu-gloo-* fixtures (tests/test_steps.py);
this test regenerates them in a temporary folder. Slow (about 10-20 s per run), needs torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fleetdx.orchestrator.steps.analyze import diagnose
from fleetdx.orchestrator.steps.run import load_ranks
from fleetdx.probes.contracts import FindingCode

TRAIN = Path(__file__).parent / "fixtures" / "traces" / "train_ddp.py"
pytestmark = pytest.mark.slow


def _train(out: Path, *args: str) -> None:
    pytest.importorskip("torch")
    res = subprocess.run(
        [sys.executable, str(TRAIN), str(out), "--steps", "12", *args], capture_output=True, text=True, timeout=240
    )
    assert res.returncode == 0, res.stderr[-3000:]


def _ranks(out: Path, pattern: str) -> list:  # type: ignore[type-arg]
    loaded = load_ranks(sorted(out.glob(pattern)))
    assert loaded.errors == [] and [r.rank for r in loaded.ranks] == [0, 1, 2, 3]
    return loaded.ranks


@pytest.mark.parametrize("rank", [1])
def test_live_slow_data_loader_is_named(tmp_path: Path, rank: int) -> None:
    _train(tmp_path, "--fault", "slow-data", "--fault-rank", str(rank), "--sleep-ms", "80")
    for pattern in ("rank-*.json.gz", "steps-rank-*.jsonl"):
        findings = diagnose(_ranks(tmp_path, pattern))
        stragglers = [f for f in findings if f.code is FindingCode.STEP_STRAGGLER_RANK]
        assert [(f.subject, f.evidence["stage"]) for f in stragglers] == [(f"rank {rank}", "data")], pattern


def test_live_tiny_ops_is_launch_bound(tmp_path: Path) -> None:
    _train(tmp_path, "--fault", "tiny-ops")
    codes = [f.code for f in diagnose(_ranks(tmp_path, "rank-*.json.gz"))]
    assert FindingCode.STEP_LAUNCH_BOUND in codes and FindingCode.STEP_STRAGGLER_RANK not in codes


def test_live_clean_run_names_no_straggler_and_no_bound_stage(tmp_path: Path) -> None:
    """On a shared 2-core machine a clean run's exposed all-reduce wait varies (25-40% of the step measured):
    the test asserts no straggler and no data/launch/H2D finding, the injected kinds."""
    _train(tmp_path)
    codes = [f.code for f in diagnose(_ranks(tmp_path, "rank-*.json.gz"))]
    for code in (
        FindingCode.STEP_STRAGGLER_RANK,
        FindingCode.STEP_DATA_BOUND,
        FindingCode.STEP_LAUNCH_BOUND,
        FindingCode.STEP_H2D_BOUND,
    ):
        assert code not in codes
