"""The goodput ledger (``fleetdx goodput``): it adds up to the wall time, attempts are found, lost work is
counted by step numbers or by the last checkpoint, and the CLI's exits. Step logs here are synthesised
(``_records``) or written by the real StepTimer (``test_steptimer_logs_of_a_resumed_job``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import goodput_cmd
from fleetdx.orchestrator.steps.goodput import Badput, GoodputError, ledger
from fleetdx.probes.parsers.steplog import StepLog, StepRecord
from fleetdx.probes.steptimer import StepTimer
from tests.cliapp import cli_app

_APP = cli_app(goodput_cmd)  # the real root group: usage errors exit 3


def invoke(args: list[str]):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(_APP, args)


def _records(t0: float, steps: range, ckpt: tuple[int, ...] = (), proc: float | None = None) -> list[StepRecord]:
    """1 s steps, 0.1 s of them waiting for data; a checkpoint save adds 2 s to its step."""
    out, t = [], t0
    for s in steps:
        stages = {"data": 100.0, "forward": 300.0}
        wall = 1.0
        if s in ckpt:
            stages["checkpoint"] = 2000.0
            wall += 2.0
        out.append(StepRecord(step=s, start_unix_s=t, step_ms=wall * 1e3, stages_ms=stages, proc_start_unix_s=proc))
        t += wall
    return out


def _adds_up(led) -> None:  # type: ignore[no-untyped-def]
    assert led.productive_s + sum(led.badput_s.values()) == pytest.approx(led.wall_s, abs=0.01)
    for a in led.attempts:
        assert a.productive_s >= 0


def test_requeued_job_with_step_numbers() -> None:
    logs = [
        StepLog(
            source=f"r{r}",
            rank=r,
            timing="wall",
            records=_records(1010, range(0, 30), ckpt=(19,), proc=1000.0)
            + _records(1200, range(20, 50), ckpt=(39,), proc=1150.0),
        )
        for r in range(2)
    ]
    led = ledger(logs, start_unix_s=990, end_unix_s=1300)
    _adds_up(led)
    assert led.wall_s == 310
    assert [a.index for a in led.attempts] == [0, 1]
    assert led.lost_work_rule == "step numbers"
    a0, a1 = led.attempts
    assert a0.lost_steps == 10 and a0.badput_s[Badput.LOST_WORK] == pytest.approx(10.0)  # steps 20..29, run again
    assert a0.badput_s[Badput.STARTUP] == pytest.approx(20.0)  # job start 990 -> first step 1010
    assert a1.badput_s[Badput.RECOVERY] == pytest.approx(1150 - 1042)  # last step's end -> next process start
    assert a1.badput_s[Badput.STARTUP] == pytest.approx(50.0)  # process start 1150 -> first step 1200
    assert led.badput_s[Badput.CHECKPOINT] == pytest.approx(4.0)
    assert led.badput_s[Badput.DATA_STALL] == pytest.approx(0.1 * (20 + 30))
    assert led.badput_s[Badput.OTHER] == pytest.approx(1300 - 1232)  # after the last step to the job's end
    assert led.productive_s == pytest.approx(18 + 27)


def test_without_step_numbers_the_last_checkpoint_bounds_the_lost_work() -> None:
    recs = _records(100, range(0, 25), ckpt=(9,)) + _records(400, range(0, 5))
    led = ledger([StepLog(source="r0", rank=0, timing="wall", records=recs)])
    _adds_up(led)
    assert led.lost_work_rule == "last checkpoint"
    assert led.attempts[0].lost_steps == 15  # steps 10..24, after the checkpoint at step 9
    assert led.attempts[1].lost_steps == 0
    assert any("job start unknown" in n for n in led.notes)


def test_a_long_gap_starts_a_new_attempt_and_the_first_step_excess_is_startup() -> None:
    recs = _records(0, range(0, 10))
    recs[0] = recs[0].model_copy(update={"step_ms": 5000.0})  # compilation in the first step
    recs = [recs[0]] + [r.model_copy(update={"start_unix_s": r.start_unix_s + 4}) for r in recs[1:]]
    recs += _records(500, range(10, 20))  # no process start, no decreasing step: the gap tells
    led = ledger([StepLog(source="r0", rank=0, timing="wall", records=recs)])
    _adds_up(led)
    assert len(led.attempts) == 2
    assert led.attempts[0].badput_s[Badput.STARTUP] == pytest.approx(4.0)  # 5 s first step, 1 s the others
    assert led.attempts[1].badput_s[Badput.RECOVERY] == pytest.approx(500 - 14)


def test_skewed_ranks_count_each_second_once() -> None:
    """Rank 1 starts every step 10 ms after rank 0: the job's steps overlap by 10 ms, counted once."""
    logs = [
        StepLog(source=f"r{r}", rank=r, timing="wall", records=_records(100 + 0.01 * r, range(0, 200), proc=90.0))
        for r in range(2)
    ]
    led = ledger(logs)
    _adds_up(led)
    assert led.notes == []
    assert led.badput_s[Badput.OTHER] == pytest.approx(0.0, abs=0.01)
    assert led.wall_s == pytest.approx(10 + 200 + 0.01)  # process start 90, 200 steps of 1 s from 100


def test_a_start_after_the_first_step_is_reported_not_hidden() -> None:
    led = ledger([StepLog(source="r0", rank=0, timing="wall", records=_records(100, range(0, 10)))], start_unix_s=105)
    assert led.badput_s[Badput.OTHER] < 0
    assert any("disagree" in n for n in led.notes)
    with pytest.raises(GoodputError):
        ledger([StepLog(source="r0", rank=0, timing="wall", records=_records(100, range(0, 10)))], 200, 100)


def test_steptimer_logs_of_a_resumed_job(tmp_path: Path) -> None:
    """The real StepTimer, two processes' worth in one file (appended): the second resumes at step 3."""
    for first, last in ((0, 6), (3, 8)):
        with StepTimer(tmp_path, rank=0, world_size=1, host="node-a", sync="none") as timer:
            for n in range(first, last):
                with timer.step(n):
                    with timer.stage("data"):
                        time.sleep(0.002)
                    with timer.stage("checkpoint" if n == 2 else "forward"):
                        time.sleep(0.004)
    lines = [json.loads(x) for x in (tmp_path / "steps-rank-0.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7]
    assert all(isinstance(x["proc_start_unix_s"], float) for x in lines)
    res = invoke(["goodput", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    led = json.loads(res.stdout)
    assert len(led["attempts"]) == 2 and led["lost_work_rule"] == "step numbers"
    assert led["attempts"][0]["lost_steps"] == 3  # steps 3, 4, 5 were run again
    assert led["productive_s"] + sum(led["badput_s"].values()) == pytest.approx(led["wall_s"], abs=0.01)
    with pytest.raises(ValueError):
        with StepTimer(tmp_path, rank=0, sync="none") as timer, timer.step(-1):
            pass


def test_cli_exits(tmp_path: Path) -> None:
    assert invoke(["goodput", str(tmp_path / "missing")]).exit_code == 3
    (tmp_path / "steps-rank-0.jsonl").write_text("not json\n{}\n")
    res = invoke(["goodput", str(tmp_path)])
    assert res.exit_code == 3 and "no StepTimer log could be read" in res.output
    res = invoke(["goodput", str(tmp_path), "--start", "yesterday"])
    assert res.exit_code == 3 and "ISO 8601" in res.output
