"""A job's goodput ledger: where its wall time went, from the StepTimer logs of its ranks, attempt by attempt.

The categories are those of Google's ml-goodput-measurement (``BadputType``, github.com/AI-Hypercomputer/
ml-goodput-measurement, ``goodput_utils.py``), measured from what StepTimer writes (one line per step: start,
wall time, stage times, and when the writing process started):

* **productive**: the time of the steps whose work was kept, less their data wait, their checkpoint saves and
  the first step's excess;
* **startup** (PROGRAM_STARTUP and TRAINING_PREP): from the attempt's start (the job's start for the first
  attempt when given, else the earliest ``proc_start_unix_s`` of its ranks) to its first step, plus the first
  step's excess over the attempt's mean step (compilation, warm-up: ml-goodput-measurement's ``first step time -
  average step time``);
* **data_stall** (DATA_LOADING_SYNC): the ``data`` stage of the kept steps (time the step waited for its batch);
* **checkpoint** (UNPRODUCTIVE_CHECKPOINT_SAVE_TIME): the ``checkpoint`` stage of the kept steps (restores happen
  before the first step: they are in startup);
* **lost_work** (WASTED_PROGRESS_FROM_DISRUPTION): steps of an attempt run again by the next one. With step
  numbers (``StepTimer.step(number)``) the steps numbered at or after the next attempt's first step; without them
  (every attempt counts from 0) the steps after the attempt's last checkpoint save, the next attempt being assumed
  to resume from it (``details`` says which rule was used);
* **recovery** (INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION): from the end of an attempt's last step to the start of
  the next attempt (the failure, the requeue, the wait for nodes);
* **other**: the rest of the wall time (time between steps: evaluation, logging outside a step; after the last
  step until the job's end). It is what makes the ledger add up to the wall time; a negative value means the
  inputs disagree (ranks' clocks, a wrong ``--start``) and is reported, not hidden.

A job step is the same step number of one attempt on every rank: it starts when its first rank starts it and
ends when its last rank ends it (the job waits for its slowest rank), or where the next step starts when ranks
are skewed (each second is counted once); its stage times are the median over ranks.
Attempts: a rank's records are split where the step number does not increase, or where the gap after a step is
over ``max(RESTART_GAP_S, RESTART_GAP_STEPS x the median step)``; attempt ``k`` of the job is attempt ``k`` of
every rank (ranks that saw a different number of attempts are reported in ``notes``).

ETTR (effective training time ratio) = productive / wall; goodput % = 100 x ETTR.

Errors: :class:`GoodputError` when no record is given or the window is inverted.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from enum import Enum

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.parsers.steplog import StepLog, StepRecord

#: a gap after a step longer than this (seconds) and than RESTART_GAP_STEPS median steps starts a new attempt
RESTART_GAP_S = 60.0
RESTART_GAP_STEPS = 20.0
DATA_STAGE = "data"
CHECKPOINT_STAGE = "checkpoint"


class GoodputError(ValueError):
    """The inputs cannot make a ledger (no step, an inverted window)."""


class Badput(str, Enum):
    """Where time that was not productive went (ml-goodput-measurement's ``BadputType`` in brackets)."""

    STARTUP = "startup"  #: PROGRAM_STARTUP, TRAINING_PREP
    DATA_STALL = "data_stall"  #: DATA_LOADING_SYNC
    CHECKPOINT = "checkpoint"  #: UNPRODUCTIVE_CHECKPOINT_SAVE_TIME
    LOST_WORK = "lost_work"  #: WASTED_PROGRESS_FROM_DISRUPTION
    RECOVERY = "recovery"  #: INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION
    OTHER = "other"  #: OTHER


class Attempt(Contract):
    """One run of the job's processes between a start and a failure, requeue or end. Times: Unix seconds;
    durations: seconds."""

    index: int
    start_unix_s: float  #: the attempt's start (see the module doc)
    first_step_unix_s: float
    end_unix_s: float  #: the end of its last step
    steps: int
    first_step: int
    last_step: int
    productive_s: float
    badput_s: dict[Badput, float]
    lost_steps: int = 0  #: steps run again by the next attempt


class GoodputLedger(Contract):
    """The ledger of one job: ``productive_s + sum(badput_s) == wall_s`` (to rounding)."""

    start_unix_s: float
    end_unix_s: float
    wall_s: float
    productive_s: float
    badput_s: dict[Badput, float]
    ettr: float  #: productive / wall, 0..1
    goodput_pct: float
    ranks: int
    attempts: list[Attempt]
    lost_work_rule: str  #: "step numbers" or "last checkpoint" (module doc)
    notes: list[str] = Field(default_factory=list)


def _r(v: float) -> float:
    """Seconds rounded to the millisecond, never ``-0.0``."""
    return round(v, 3) + 0.0


def _split(records: Sequence[StepRecord]) -> list[list[StepRecord]]:
    """One rank's records cut into attempts (module doc)."""
    if not records:
        return []
    med = statistics.median(r.step_ms for r in records) / 1e3
    gap_s = max(RESTART_GAP_S, RESTART_GAP_STEPS * med)
    out: list[list[StepRecord]] = [[records[0]]]
    for prev, cur in zip(records, records[1:], strict=False):
        gap = cur.start_unix_s - (prev.start_unix_s + prev.step_ms / 1e3)
        new_process = (
            cur.proc_start_unix_s is not None
            and prev.proc_start_unix_s is not None
            and abs(cur.proc_start_unix_s - prev.proc_start_unix_s) > 1.0
        )
        if cur.step <= prev.step or gap > gap_s or new_process:
            out.append([])
        out[-1].append(cur)
    return out


class _JobStep:
    __slots__ = ("start", "end", "data", "checkpoint")

    def __init__(self, recs: list[StepRecord]) -> None:
        self.start = min(r.start_unix_s for r in recs)
        self.end = max(r.start_unix_s + r.step_ms / 1e3 for r in recs)
        self.data = statistics.median(r.stages_ms.get(DATA_STAGE, 0.0) for r in recs) / 1e3
        self.checkpoint = statistics.median(r.stages_ms.get(CHECKPOINT_STAGE, 0.0) for r in recs) / 1e3

    @property
    def wall(self) -> float:
        return self.end - self.start


def _attempts(logs: Sequence[StepLog], notes: list[str]) -> tuple[list[dict[int, _JobStep]], list[float | None]]:
    """The job's attempts as step number -> job step, and each attempt's earliest process start (if known)."""
    per_rank = {log.rank: _split(log.records) for log in logs}
    counts = {r: len(a) for r, a in per_rank.items()}
    n = max(counts.values())
    short = sorted(r for r, c in counts.items() if c != n)
    if short:
        notes.append(
            f"ranks {short[:8]}{'...' if len(short) > 8 else ''} saw fewer attempts than the others ({n}): "
            "their attempts are matched to the job's first ones"
        )
    attempts: list[dict[int, _JobStep]] = []
    starts: list[float | None] = []
    for k in range(n):
        by_step: dict[int, list[StepRecord]] = defaultdict(list)
        procs = []
        for parts in per_rank.values():
            if k < len(parts):
                for rec in parts[k]:
                    by_step[rec.step].append(rec)
                procs += [r.proc_start_unix_s for r in parts[k][:1] if r.proc_start_unix_s is not None]
        steps = {s: _JobStep(recs) for s, recs in sorted(by_step.items())}
        ordered = list(steps.values())
        for cur, nxt in zip(ordered, ordered[1:], strict=False):  # ranks skewed: a step ends where the next starts
            if cur.start <= nxt.start < cur.end:
                cur.end = nxt.start
        attempts.append(steps)
        starts.append(min(procs) if procs else None)
    return attempts, starts


def _lost(steps: dict[int, _JobStep], nxt: dict[int, _JobStep] | None, numbered: bool) -> set[int]:
    """Step numbers of an attempt whose work the next attempt ran again (module doc)."""
    if nxt is None:
        return set()
    if numbered:
        resume = min(nxt)
        return {s for s in steps if s >= resume}
    saved = [s for s, js in steps.items() if js.checkpoint > 0]
    last = max(saved) if saved else None
    return {s for s in steps if last is None or s > last}


def ledger(
    logs: Sequence[StepLog], start_unix_s: float | None = None, end_unix_s: float | None = None
) -> GoodputLedger:
    """The goodput ledger of a job from its ranks' StepTimer logs (module doc).

    ``start_unix_s``/``end_unix_s``: the job's start and end (e.g. Slurm's Start and End); without them the job
    starts at its first attempt's start and ends at the end of its last step.

    Raises:
        GoodputError: no log, or an end before the start.
    """
    if not logs or not any(log.records for log in logs):
        raise GoodputError("no StepTimer record: nothing to account")
    notes: list[str] = []
    attempts, proc_starts = _attempts(logs, notes)
    # step numbers tell lost work only when an attempt does not restart from 0 (StepTimer.step(number))
    numbered = all(min(a) > 0 for a in attempts[1:]) and len(attempts) > 1
    rule = "step numbers" if numbered else "last checkpoint"
    proc0 = proc_starts[0]
    first_start = proc0 if proc0 is not None else min(js.start for js in attempts[0].values())
    job_start = start_unix_s if start_unix_s is not None else first_start
    last_end = max(js.end for js in attempts[-1].values())
    job_end = end_unix_s if end_unix_s is not None else last_end
    if job_end < job_start:
        raise GoodputError(f"the job ends ({job_end:.3f}) before it starts ({job_start:.3f})")
    if start_unix_s is None and proc0 is None:
        notes.append("job start unknown (no --start, no proc_start_unix_s): time before the first step not counted")
    out: list[Attempt] = []
    prev_end: float | None = None
    for k, steps in enumerate(attempts):
        nxt = attempts[k + 1] if k + 1 < len(attempts) else None
        lost = _lost(steps, nxt, numbered)
        first = min(steps.values(), key=lambda js: js.start)
        proc = proc_starts[k]
        a_start = job_start if k == 0 else (proc if proc is not None else first.start)
        walls = [js.wall for js in steps.values()]
        mean_rest = statistics.fmean(walls[1:]) if len(walls) > 1 else walls[0]
        excess = max(0.0, first.wall - mean_rest) if min(steps) not in lost else 0.0
        kept = [js for s, js in steps.items() if s not in lost]
        bad = {b: 0.0 for b in Badput}
        bad[Badput.STARTUP] = max(0.0, first.start - a_start) + excess
        bad[Badput.DATA_STALL] = sum(js.data for js in kept)
        bad[Badput.CHECKPOINT] = sum(js.checkpoint for js in kept)
        bad[Badput.LOST_WORK] = sum(steps[s].wall for s in lost)
        if prev_end is not None:
            bad[Badput.RECOVERY] = max(0.0, a_start - prev_end)
        productive = sum(js.wall for js in kept) - bad[Badput.DATA_STALL] - bad[Badput.CHECKPOINT] - excess
        end = max(js.end for js in steps.values())
        span_start = a_start if k == 0 else (prev_end if prev_end is not None else a_start)
        bad[Badput.OTHER] = (end - span_start) - productive - sum(bad.values())
        out.append(
            Attempt(
                index=k,
                start_unix_s=round(a_start, 3),
                first_step_unix_s=round(first.start, 3),
                end_unix_s=round(end, 3),
                steps=len(steps),
                first_step=min(steps),
                last_step=max(steps),
                productive_s=round(productive, 3),
                badput_s={b: _r(v) for b, v in bad.items()},
                lost_steps=len(lost),
            )
        )
        prev_end = end
    wall = job_end - job_start
    productive = sum(a.productive_s for a in out)
    total = {b: sum(a.badput_s[b] for a in out) for b in Badput}
    # the attempts' "other" plus the time after the last step until the job's end: the residual, so it adds up
    total[Badput.OTHER] = wall - productive - sum(v for b, v in total.items() if b is not Badput.OTHER)
    if total[Badput.OTHER] < -1e-3:
        notes.append(
            f"other is negative ({total[Badput.OTHER]:.3f} s): the logs' times and the job's window disagree "
            "(ranks' clocks, or a --start/--end that is not this job's)"
        )
    ettr = productive / wall if wall > 0 else 0.0
    return GoodputLedger(
        start_unix_s=round(job_start, 3),
        end_unix_s=round(job_end, 3),
        wall_s=round(wall, 3),
        productive_s=round(productive, 3),
        badput_s={b: _r(v) for b, v in total.items()},
        ettr=round(ettr, 4),
        goodput_pct=round(100 * ettr, 2),
        ranks=len(logs),
        attempts=out,
        lost_work_rule=rule,
        notes=notes,
    )
