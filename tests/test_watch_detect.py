"""The online rules of ``fleetdx watch`` (orchestrator/watch/detect.py) on step series: no clock, no file.

The series are synthetic (seeded Gaussian noise around fixed stage times), named so; the false-alarm rate on
real step-time noise is measured by bench/watch.py on the real StepTimer captures.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.watch.detect import OnlineDetector, StepObs, WatchPolicy
from fleetdx.probes.contracts import Severity


@dataclass
class Job:
    """A synthetic DDP job: data 5, forward 100, backward 80 (the peers of a slow rank wait there), optimizer
    2 ms, 3% Gaussian noise; a slow rank from ``onset`` on, a whole-job factor from ``job_onset`` on, a data
    stall of 300 ms on rank 1 every ``stall_every`` steps."""

    slow_rank: int | None = None
    onset: int = 60
    extra_ms: float = 40.0
    stage: str = "data"
    job_factor: float = 1.0
    job_onset: int | None = None
    stall_every: int | None = None
    seed: int = 1


def _synthetic_job(steps: int, job: Job | None = None, ranks: int = 4) -> list[tuple[int, Finding]]:
    """The job fed to a detector: (step, finding) in order."""
    j = job or Job()
    slow_rank, onset, extra_ms, stage = j.slow_rank, j.onset, j.extra_ms, j.stage
    job_factor, job_onset, stall_every = j.job_factor, j.job_onset, j.stall_every
    rng = random.Random(j.seed)
    det = OnlineDetector()
    out: list[tuple[int, Finding]] = []
    for s in range(steps):
        f = job_factor if job_onset is not None and s >= job_onset else 1.0
        for r in range(ranks):
            st = {
                "data": 5 * (1 + rng.gauss(0, 0.03)),
                "forward": 100 * f * (1 + rng.gauss(0, 0.03)),
                "backward": 80 * f * (1 + rng.gauss(0, 0.03)),
                "optimizer": 2 * (1 + rng.gauss(0, 0.03)),
            }
            if slow_rank is not None and s >= onset:
                if r == slow_rank:
                    st[stage] += extra_ms
                else:
                    st["backward"] += extra_ms
            if stall_every and s % stall_every == 0 and r == 1:
                st["data"] += 300
            obs = StepObs(r, s, sum(st.values()), st, 1000.0 + 0.2 * s, f"node{r}", f"steps-rank-{r}.jsonl")
            out.extend((s, x) for x in det.observe(obs, now=0.2 * s))
    return out


def test_a_steady_job_gives_nothing() -> None:
    for seed in range(5):
        found = _synthetic_job(400, Job(seed=seed))
        assert found == [], [f.message for _, f in found]


def test_a_straggler_is_named_within_a_few_steps_of_its_onset_with_its_stage() -> None:
    found = _synthetic_job(200, Job(slow_rank=2))
    codes = [(s, f.code) for s, f in found]
    assert codes and codes[0][1] is FindingCode.STEP_STRAGGLER_RANK
    step, f = found[0]
    assert 60 <= step <= 70
    assert f.rank == 2 and f.details["stage"] == "data" and f.details["onset_step"] == 60
    assert f.details["peers_wait_stage"] == "backward"
    assert f.nodes == ["node2"]
    assert not any(c is FindingCode.STEP_STRAGGLER_RANK for s, c in codes if s < 60)
    assert sum(c is FindingCode.STEP_STRAGGLER_RANK for _, c in codes) == 1  # once per episode


def test_a_straggler_in_forward_is_named_in_forward() -> None:
    found = _synthetic_job(120, Job(slow_rank=0, stage="forward", extra_ms=60))
    stragglers = [f for _, f in found if f.code is FindingCode.STEP_STRAGGLER_RANK]
    assert [(f.rank, f.details["stage"]) for f in stragglers] == [(0, "forward")]


def test_a_small_shift_below_the_floor_is_not_named() -> None:
    # +5 ms on a 190 ms step: under 5% of the step, never a straggler whatever its z-score
    found = _synthetic_job(200, Job(slow_rank=2, extra_ms=5))
    assert not [f for _, f in found if f.code is FindingCode.STEP_STRAGGLER_RANK]


def test_a_global_slowdown_is_a_job_slowdown_not_a_straggler() -> None:
    found = _synthetic_job(200, Job(job_factor=1.5, job_onset=100))
    assert [f.code for _, f in found] == [FindingCode.STEP_JOB_SLOWDOWN]
    step, f = found[0]
    assert 100 <= step <= 115
    change = f.details["change_pct"]
    assert f.severity is Severity.WARNING and isinstance(change, float) and change > 40


def test_repeated_data_stalls_are_bursts_named_by_their_stage() -> None:
    found = _synthetic_job(120, Job(stall_every=7))
    bursty = [f for _, f in found if f.code is FindingCode.STEP_BURSTY]
    assert bursty and bursty[0].rank == 1 and bursty[0].details["spike_stage"] == ["data"]
    assert "data stalls" in bursty[0].message
    assert not [f for _, f in found if f.code is FindingCode.STEP_STRAGGLER_RANK]


def test_a_data_bound_job_is_named_from_the_window() -> None:
    det = OnlineDetector()
    found: list[Finding] = []
    for s in range(60):
        for r in range(4):
            st = {"data": 30.0 + r, "forward": 100.0, "backward": 80.0}
            found += det.observe(StepObs(r, s, sum(st.values()), st), now=float(s))
    assert [f.code for f in found] == [FindingCode.STEP_DATA_BOUND]


def test_a_hang_after_the_threshold_names_the_rank_behind() -> None:
    det = OnlineDetector(WatchPolicy(hang_factor=20, hang_min_s=10))
    for s in range(50):
        for r in range(4):
            if r == 3 and s >= 40:
                continue  # rank 3 stops after step 39; the others run on (lagging ranks are judged without)
            det.observe(StepObs(r, s, 200.0, {"forward": 200.0}, 1000 + 0.2 * s), now=0.2 * s)
    last = 0.2 * 49
    assert det.check_hang(last + 9.0) is None  # 20 x 0.2 s = 4 s, floored at 10 s
    f = det.check_hang(last + 10.5)
    assert f is not None and f.code is FindingCode.STEP_HANG and f.severity is Severity.CRITICAL
    assert f.details["stopped_first"] == [3] and f.rank == 3
    assert det.check_hang(last + 20) is None  # once per hang
    det.observe(StepObs(0, 50, 200.0, {"forward": 200.0}), now=last + 21)
    assert not det.hang_open  # a completed step ends it


def test_the_hang_threshold_grows_with_the_step_and_the_longest_step() -> None:
    det = OnlineDetector(WatchPolicy(hang_factor=20, hang_min_s=10))
    for s in range(20):
        ms = 5000.0 if s == 15 else 1000.0  # one 5 s step (a checkpoint save)
        for r in range(3):
            det.observe(StepObs(r, s, ms, {"forward": ms}), now=float(s))
    assert det.hang_threshold_s() == 20.0  # 20 x 1 s over 10 s and over 2 x 5 s
    det2 = OnlineDetector(WatchPolicy(hang_factor=2, hang_min_s=1))
    for s in range(20):
        ms = 5000.0 if s == 15 else 100.0
        for r in range(3):
            det2.observe(StepObs(r, s, ms, {"forward": ms}), now=float(s))
    assert det2.hang_threshold_s() == 10.0  # 2 x the 5 s step


def test_warm_up_and_a_restart_gap_do_not_alarm() -> None:
    det = OnlineDetector()
    found: list[Finding] = []
    for s in [*range(0, 30), *range(100, 140)]:  # a restart resumes at step 100
        for r in range(4):
            first = s < 3 and r == 1  # rank 1's first steps compile slowly: warm-up, not a straggler
            st = {"forward": 900.0 if first else 100.0, "backward": 80.0}
            found += det.observe(StepObs(r, s, sum(st.values()), st), now=float(s))
    assert found == []
