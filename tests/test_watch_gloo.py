"""``fleetdx watch`` on a real running job (issue 24, second done-when): 4 gloo ranks on this machine
(tests/watch_gloo_job.py: a gradient all-reduce per step timed by StepTimer, the Flight Recorder on).

* a slowed data loader on rank 3 (+60 ms from step 30): watched live, the rank and its stage are named;
* a real hang (rank 3 stops calling its collective at step 30): reported before gloo's timeout, the ranks'
  StepTimers dump their Flight Recorder on the watcher's request, and the analysis names rank 3.

Needs torch (the ``collective`` extra); skipped without it. Slow (tens of seconds each): listed in SLOW.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
GLOO_TIMEOUT_S = 240


def _job(out: Path, fault: str, steps: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "watch_gloo_job.py"), str(out), "--fault", fault, "--rank", "3"]
        + ["--at", "30", "--steps", str(steps), "--timeout", str(GLOO_TIMEOUT_S)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the ranks are ended with it, by its id
    )


def _end(job: subprocess.Popen[bytes]) -> None:
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGKILL)
    job.wait(timeout=30)


def _started(out: Path, job: subprocess.Popen[bytes]) -> None:
    """Wait (bounded) for every rank's first step: the watch then starts on a running job."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and job.poll() is None:
        files = list(out.glob("steps-rank-*.jsonl"))
        if len(files) == 4 and all(f.stat().st_size > 0 for f in files):
            return
        time.sleep(0.2)
    raise AssertionError(f"the gloo job did not start (exit {job.poll()})")


def _watch(out: Path, *args: str, timeout: float) -> tuple[int, list[dict[str, Any]], float]:
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "fleetdx", "watch", str(out), "--json", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return res.returncode, [json.loads(x) for x in res.stdout.splitlines()], time.monotonic() - t0


def test_real_slow_data_loader_is_named_live(tmp_path: Path) -> None:
    job = _job(tmp_path, "slow-data", 160)
    try:
        _started(tmp_path, job)
        code, found, _ = _watch(tmp_path, "--until-idle", "10", timeout=400)
    finally:
        _end(job)
    stragglers = [f for f in found if f["code"] == "STEP_STRAGGLER_RANK"]
    assert stragglers, [f["code"] for f in found]
    assert {(f["rank"], f["details"]["stage"]) for f in stragglers} == {(3, "data")}
    assert 30 <= stragglers[0]["details"]["detected_at_step"] <= 40  # within 10 steps of the real onset
    assert code in (1, 2)


def test_real_hang_is_reported_before_the_gloo_timeout_with_the_flight_recorder_analysis(tmp_path: Path) -> None:
    job = _job(tmp_path, "hang", 400)
    try:
        _started(tmp_path, job)
        code, found, took = _watch(
            tmp_path, "--hang-min-s", "5", "--dump-wait", "60", "--until-idle", "20", timeout=400
        )
    finally:
        _end(job)
    codes = [f["code"] for f in found]
    hangs = [f for f in found if f["code"] == "STEP_HANG"]
    assert len(hangs) == 2, codes
    detected, evidence = hangs
    assert detected["details"]["phase"] == "detected" and took < GLOO_TIMEOUT_S
    assert evidence["details"]["phase"] == "evidence"
    assert evidence["details"]["dumped_ranks"] == [0, 1, 2, 3] and evidence["details"]["silent_ranks"] == []
    assert evidence["rank"] == 3 and "rank 3 never issued gloo:all_reduce" in evidence["message"]
    causes = [f for f in found if f["code"] == "NCCL_TIMEOUT"]
    assert len(causes) == 1 and causes[0]["rank"] == 3
    assert code == 2
    dumps = sorted(p.name for p in next(tmp_path.glob("fleetdx-fr-*")).iterdir())
    assert [d for d in dumps if d.startswith("nccl_trace_rank_")] == [f"nccl_trace_rank_{r}" for r in range(4)]
