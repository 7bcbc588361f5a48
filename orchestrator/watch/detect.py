"""The online rules of ``fleetdx watch``: each rank's completed steps go in one at a time (:meth:`OnlineDetector.
observe`), findings come out as soon as a rule is met; a hang is a clock rule (:meth:`OnlineDetector.check_hang`).
Pure: no file, no clock of its own (the caller passes ``now``, monotonic seconds).

A step number is judged once every rank seen so far has completed it, or once some rank is
``max_lag_steps`` (8) steps past it (a rank that stopped writing is then judged without). The first
``warmup_steps`` (5) judged steps feed no rule (first-step compilation, allocator and loader warm-up).

**Straggler** (``STEP_STRAGGLER_RANK``, warning). Per judged step and per stage (``grad_sync`` excluded: the
peers of a slow rank wait there, it is the symptom), the ranks' stage times are compared on the log scale
with the robust baseline of :mod:`fleetdx.orchestrator.diagnosis.robust` (median, 1.4826 x MAD, floored at
``noise_floor`` 10%): a rank is *slow at that step* when its modified z-score is over 3.5 (Iglewicz &
Hoaglin 1993), it is at least 25% above the peers' median and the excess is at least 5% of the job's median
step (the offline ``fleetdx steps`` rule, :mod:`fleetdx.orchestrator.steps.analyze`, applied to one step).
One slow step is noise; a one-sided CUSUM per (rank, stage) confirms it (Page 1954, "Continuous inspection
schemes", with a unit increment): ``S = min(max(0, S + (1 if slow else -1)), 2 h)``; the rank is named when
``S`` reaches ``h = confirm`` (3), so a rank slow on every step from its onset is named at its third slow step,
and one that is slow two steps in three is still named. The episode ends (and a new onset may be named
again) when ``S`` falls back to 0. Needs 3 ranks or more.

Measured on real step-time noise (``bench/watch.py``: replays of the real StepTimer logs in
``tests/fixtures/traces``, 4-rank gloo DDP runs on 2 CPU cores shared with other work, whose forward stage
varies 39 +- 30 ms; ``bench/MEASUREMENTS.md``, 2026-11-27): no straggler named in the 2,388 rank-steps of the
clean 600-step run, 0.30 per 1,000 rank-steps over 93,132 rank-steps of its recombinations (each rank's real
series rotated); a shift injected into one rank's data stage is named 2 steps after its onset at +20 and
+40 ms (12 of 12 runs), at +10 ms in 8 of 12 (18 steps; 10 ms is under 5% of the run's 215 ms steps); in the
noisy forward stage +40 ms in 8 of 12 (median 23 steps), +10 ms never.

**Hang** (``STEP_HANG``, critical): no rank completed a step for ``max(hang_factor x the job's median step,
hang_min_s, 2 x the longest step seen)`` seconds (defaults 20 x, 10 s: a 0.2 s step waits 10 s, a 2 s step
40 s; NCCL's watchdog waits ``TORCH_NCCL_... timeout`` = 10 min by default, gloo 30 min). The longest step
term keeps a periodic long step (a checkpoint save timed inside a step) from reading as a hang once one was
seen; the first such step longer than the threshold is reported as a hang. The finding names the ranks that
stopped first: those whose last completed step is the lowest; when every rank stopped at the same step, the
ranks whose last step ended earliest (by the records' own clocks), which in a collective hang are usually all
of them (the Flight Recorder dumps asked for then name the rank that never entered the collective).

**Slowdown** (``STEP_JOB_SLOWDOWN``, warning): the median of the job's last ``slowdown_recent`` (10) step
times (each the median over ranks) is 20% or more above the median of its first ``reference_steps`` (30)
after warm-up and robustly so (modified z over 3.5 against the reference's spread, floored at 5%), confirmed
by the same CUSUM. Not reported while a straggler explains it.

**Data stalls and bursts** (every ``window`` / 2 steps over the last ``window`` = 50): ``STEP_DATA_BOUND``
(warning) when the data stage is over 5% of the step (the median over steps of the median over ranks of
data / step; a data straggler's own data stage left out), ``STEP_BURSTY`` (warning) for ranks whose step
times over the window have a coefficient of variation over 0.2 and at least ``max(2, 5%)`` spikes (over 1.5 x
the rank's median and modified z over 3.5): the offline rules of :mod:`fleetdx.orchestrator.steps.analyze`
over a sliding window (bursts: only once the rank has a full window); the stage that makes the spikes is named
(``data``: data stalls). Each is reported once
per episode (until a later window no longer meets it).

Bounded memory: ``window`` steps per rank, pending steps at most ``max_lag_steps`` past the judged one per
rank.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from fleetdx.orchestrator.diagnosis.robust import MAD_TO_SIGMA
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.contracts import Contract, EvidenceValue, Severity

#: stage times floored before the log scale (a stage a rank never enters is a valid, very low value)
STAGE_FLOOR_MS = 0.001
#: the stage where the peers of a slow rank wait: never a straggler's own stage
WAIT_STAGE = "grad_sync"
#: ranks listed by name in a finding's message and details (the rest counted)
MAX_NAMED = 16

MemberKey = int | str  #: a rank, or ``log:<file>`` for a training log's series of unknown rank


class StepObs(NamedTuple):
    """One completed step of one rank: ``rank`` ``None`` for a training log's series of unknown rank (then
    ``source`` keys it); times in ms; ``end_unix_s`` the step's end on the rank's clock when known."""

    rank: int | None
    step: int
    step_ms: float
    stages_ms: Mapping[str, float]
    end_unix_s: float | None = None
    host: str | None = None
    source: str = ""


class WatchPolicy(Contract):
    """The thresholds of the online rules (module doc)."""

    z_threshold: float = 3.5
    noise_floor: float = 0.10
    min_ratio: float = 0.25
    min_share: float = 0.05
    confirm: int = 3
    min_ranks: int = 3
    warmup_steps: int = 5
    window: int = 50
    max_lag_steps: int = 8
    hang_factor: float = 20.0
    hang_min_s: float = 10.0
    slowdown_ratio: float = 0.20
    slowdown_recent: int = 10
    reference_steps: int = 30
    slowdown_floor: float = 0.05
    data_share: float = 0.05
    bursty_cv: float = 0.2
    spike_ratio: float = 1.5
    min_spikes: int = 2
    min_spike_share: float = 0.05
    spike_floor: float = 0.05


class _Stage:
    """The CUSUM state of one stage over every rank (arrays indexed by rank)."""

    def __init__(self) -> None:
        self.s = np.zeros(0, dtype=np.int32)
        self.onset = np.full(0, -1, dtype=np.int64)
        self.alarmed = np.zeros(0, dtype=bool)

    def grow(self, n: int) -> None:
        if n > self.s.size:
            extra = n - self.s.size
            self.s = np.concatenate([self.s, np.zeros(extra, dtype=np.int32)])
            self.onset = np.concatenate([self.onset, np.full(extra, -1, dtype=np.int64)])
            self.alarmed = np.concatenate([self.alarmed, np.zeros(extra, dtype=bool)])


class _Hit(NamedTuple):
    """A straggler alarm: the step it fired at, the stage, rank, onset step, the peers' median (ms), z."""

    step: int
    stage: str
    rank: int
    onset: int
    median_ms: float
    z: float


def _ms(x: float) -> str:
    """A time in ms with its significant digits (``0.0335``, ``5.64``, ``158.3``)."""
    return f"{x:.1f}" if x >= 10 else f"{x:.3g}"


def _fmt_ranks(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:MAX_NAMED]))
    more = f" and {len(ranks) - MAX_NAMED} more" if len(ranks) > MAX_NAMED else ""
    return f"rank{'s' if len(ranks) > 1 else ''} {shown}{more}"


class OnlineDetector:
    """The rules of the module doc, fed one rank-step at a time. Not thread-safe."""

    def __init__(self, policy: WatchPolicy | None = None) -> None:
        self.policy = policy or WatchPolicy()
        p = self.policy
        self.members: dict[MemberKey, str | None] = {}  #: member -> host
        self._pending: dict[int, dict[MemberKey, StepObs]] = {}
        self._next: int | None = None  #: the next step number to judge
        self._lead = -1  #: the highest step number seen
        self.judged = 0
        self.last_progress: float | None = None  #: ``now`` of the last completed step seen
        self.last: dict[MemberKey, StepObs] = {}
        self._job_steps: deque[float] = deque(maxlen=p.window)
        self._reference: list[float] = []
        self._recent: deque[float] = deque(maxlen=p.slowdown_recent)
        self._slow_s = 0
        self._slow_open = False
        self._longest_ms = 0.0
        self._stages: dict[str, _Stage] = {}
        self._rank_steps: dict[int, deque[StepObs]] = {}
        self._data_shares: deque[float] = deque(maxlen=p.window)
        self._data_open = False
        self._bursty_open: set[int] = set()
        self.hang_open = False
        self.hang_since: float | None = None

    # ---- input
    def observe_many(self, batch: list[StepObs], now: float) -> list[Finding]:
        """A batch of steps read together (a poll of every file, or a history read at start): every rank in it
        is known before any of its steps is judged, and steps go in by step number, so that one file read
        before the others does not make its rank the only one of its steps."""
        for o in batch:
            key: MemberKey = o.rank if o.rank is not None else f"log:{o.source}"
            self.members.setdefault(key, o.host)
        out: list[Finding] = []
        for o in sorted(batch, key=lambda o: o.step):
            out.extend(self.observe(o, now))
        return out

    def observe(self, obs: StepObs, now: float) -> list[Finding]:
        """One completed step; the findings it completes (possibly none)."""
        key: MemberKey = obs.rank if obs.rank is not None else f"log:{obs.source}"
        self.members.setdefault(key, obs.host)
        if obs.host and not self.members[key]:
            self.members[key] = obs.host
        self.last_progress = now
        if self.hang_open:
            self.hang_open = False
        prev = self.last.get(key)
        if prev is None or obs.step >= prev.step:
            self.last[key] = obs
        if self._next is not None and obs.step < self._next:
            return []  # a step already judged (a late file, a restarted rank): counted for progress only
        self._pending.setdefault(obs.step, {})[key] = obs
        self._lead = max(self._lead, obs.step)
        return self._drain()

    def _drain(self) -> list[Finding]:
        out: list[Finding] = []
        while self._pending:
            # the next step in order; a step no rank wrote (a restart's gap) is skipped
            s = self._next if self._next in self._pending else min(self._pending)
            group = self._pending[s]
            if len(group) < len(self.members) and self._lead - s < self.policy.max_lag_steps:
                break
            del self._pending[s]
            self._next = s + 1
            out.extend(self._judge(s, group))
        return out

    # ---- one step of every rank
    def _judge(self, step: int, group: dict[MemberKey, StepObs]) -> list[Finding]:
        p = self.policy
        job_step = statistics.median(o.step_ms for o in group.values())
        self.judged += 1
        if self.judged <= p.warmup_steps:
            return []
        self._job_steps.append(job_step)
        self._longest_ms = max(self._longest_ms, job_step)
        ranked: dict[int, StepObs] = {k: o for k, o in group.items() if isinstance(k, int)}
        for r, o in ranked.items():
            self._rank_steps.setdefault(r, deque(maxlen=p.window)).append(o)
        out = self._stragglers(step, ranked)
        out.extend(self._slowdown(step, job_step))
        if len(self._job_steps) >= p.window // 2 and (self.judged - p.warmup_steps) % (p.window // 2) == 0:
            out.extend(self._windows(step))
        data = [o.stages_ms.get("data", 0.0) / o.step_ms for r, o in ranked.items() if o.step_ms > 0]
        if data:
            alarmed = self._stages.get("data")
            keep = [
                o.stages_ms.get("data", 0.0) / o.step_ms
                for r, o in ranked.items()
                if o.step_ms > 0 and not (alarmed is not None and r < alarmed.alarmed.size and alarmed.alarmed[r])
            ]
            self._data_shares.append(statistics.median(keep or data))
        return out

    def job_median_ms(self) -> float | None:
        """The median of the job's recent step times (ms), ``None`` before the first judged step."""
        return statistics.median(self._job_steps) if self._job_steps else None

    def _stragglers(self, step: int, ranked: dict[int, StepObs]) -> list[Finding]:
        p = self.policy
        if len(ranked) < p.min_ranks:
            return []
        ranks = np.fromiter(iter(ranked), dtype=np.int64, count=len(ranked))
        obs = list(ranked.values())
        job_ref = statistics.median(self._job_steps)
        names = sorted({k for o in obs for k in o.stages_ms} - {WAIT_STAGE})
        out: list[Finding] = []
        top = int(ranks.max()) + 1
        for name in names:
            v = np.fromiter((o.stages_ms.get(name, 0.0) for o in obs), dtype=np.float64, count=len(obs))
            v = np.maximum(v, STAGE_FLOOR_MS)
            logs = np.log(v)
            med = float(np.median(logs))
            scale = max(MAD_TO_SIGMA * float(np.median(np.abs(logs - med))), p.noise_floor)
            median_ms = math.exp(med)
            z = (logs - med) / scale
            slow = (z > p.z_threshold) & (v / median_ms - 1 >= p.min_ratio) & (v - median_ms >= p.min_share * job_ref)
            st = self._stages.setdefault(name, _Stage())
            st.grow(top)
            before = st.s[ranks]
            started = slow & (before == 0)
            st.onset[ranks[started]] = step
            now_s = np.clip(before + np.where(slow, 1, -1), 0, 2 * p.confirm).astype(np.int32)
            st.s[ranks] = now_s
            st.alarmed[ranks[now_s == 0]] = False
            fire = (now_s >= p.confirm) & ~st.alarmed[ranks]
            if not fire.any():
                continue
            st.alarmed[ranks[fire]] = True
            for i in np.flatnonzero(fire):
                r = int(ranks[i])
                hit = _Hit(step, name, r, int(st.onset[r]), median_ms, float(z[i]))
                out.append(self._straggler_finding(hit, obs, obs[int(i)]))
        return out

    def _straggler_finding(self, hit: _Hit, obs: list[StepObs], me: StepObs) -> Finding:
        step, stage, r, onset, median_ms, z = hit
        v = me.stages_ms.get(stage, 0.0)
        peers = [o for o in obs if o is not me]
        wait: tuple[str, float] | None = None
        for k in sorted({k for o in obs for k in o.stages_ms} - {stage}):
            peer = statistics.median(o.stages_ms.get(k, 0.0) for o in peers)
            gap = peer - me.stages_ms.get(k, 0.0)
            if gap > 0 and (wait is None or gap > wait[1] - me.stages_ms.get(wait[0], 0.0)):
                wait = (k, peer)
        where = f" on {me.host}" if me.host else ""
        what = f"its {stage} stage" if stage != "unknown" else "its step time (the log prints no stages)"
        msg = (
            f"rank {r}{where} is a straggler in {what} since step {onset}: {v:.1f} ms at step {step} against "
            f"{_ms(median_ms)} ms on its peers (+{v - median_ms:.1f} ms, z {z:.1f}), slow on "
            f"{self.policy.confirm} more steps than not since then"
            + (
                f"; the other ranks wait for it in {wait[0]} ({wait[1]:.1f} ms against "
                f"{me.stages_ms.get(wait[0], 0.0):.1f} ms on rank {r})"
                if wait
                else ""
            )
        )
        details: dict[str, EvidenceValue] = {
            "rank": r,
            "stage": stage,
            "onset_step": onset,
            "detected_at_step": step,
            "delay_steps": step - onset,
            "stage_ms": round(v, 3),
            "peers_median_ms": round(median_ms, 3),
            "excess_ms": round(v - median_ms, 3),
            "z": round(z, 2),
            "job_step_median_ms": round(statistics.median(self._job_steps), 3),
            "peers_wait_stage": wait[0] if wait else None,
            "peers_wait_ms": round(wait[1], 3) if wait else None,
            "source": me.source,
            "rule": "per step: modified z > 3.5 against the peers (log scale, MAD floored at 10%), +25% and "
            "+5% of the step; CUSUM of slow minus normal steps reaches 3",
        }
        return Finding(
            code=FindingCode.STEP_STRAGGLER_RANK,
            severity=Severity.WARNING,
            nodes=[me.host] if me.host else [],
            rank=r,
            subject=f"rank {r}",
            message=msg,
            details=details,
        )

    def _straggling(self) -> bool:
        return any(bool(st.alarmed.any()) for st in self._stages.values())

    def _slowdown(self, step: int, job_step: float) -> list[Finding]:
        p = self.policy
        if len(self._reference) < p.reference_steps:
            self._reference.append(job_step)
            return []
        self._recent.append(job_step)
        if len(self._recent) < p.slowdown_recent:
            return []
        logs = [math.log(max(x, STAGE_FLOOR_MS)) for x in self._reference]
        med = statistics.median(logs)
        scale = max(MAD_TO_SIGMA * statistics.median(abs(x - med) for x in logs), p.slowdown_floor)
        recent = statistics.median(self._recent)
        ref = math.exp(med)
        z = (math.log(max(recent, STAGE_FLOOR_MS)) - med) / scale
        slow = recent / ref - 1 >= p.slowdown_ratio and z > p.z_threshold
        self._slow_s = min(max(0, self._slow_s + (1 if slow else -1)), 2 * p.confirm)
        if self._slow_s == 0:
            self._slow_open = False
        if self._slow_s < p.confirm or self._slow_open or self._straggling():
            return []
        self._slow_open = True
        return [
            Finding(
                code=FindingCode.STEP_JOB_SLOWDOWN,
                severity=Severity.WARNING,
                subject="job",
                message=(
                    f"the whole job slowed down: its last {p.slowdown_recent} steps take {recent:.1f} ms (median "
                    f"over ranks and steps) at step {step}, against {ref:.1f} ms in its first "
                    f"{p.reference_steps} steps (+{100 * (recent / ref - 1):.0f}%, z {z:.1f}), every rank alike "
                    "(no straggler): look at what the ranks share (the fabric, the file system, the data "
                    "pipeline's source, thermal or power limits of every node)"
                ),
                details={
                    "step": step,
                    "recent_median_ms": round(recent, 3),
                    "reference_median_ms": round(ref, 3),
                    "change_pct": round(100 * (recent / ref - 1), 2),
                    "z": round(z, 2),
                    "threshold_pct": 100 * p.slowdown_ratio,
                },
            )
        ]

    def _windows(self, step: int) -> list[Finding]:
        p = self.policy
        out: list[Finding] = []
        share = statistics.median(self._data_shares) if self._data_shares else 0.0
        if share > p.data_share and not self._data_open:
            self._data_open = True
            out.append(
                Finding(
                    code=FindingCode.STEP_DATA_BOUND,
                    severity=Severity.WARNING,
                    subject="job",
                    nodes=sorted({h for h in self.members.values() if h}),
                    message=(
                        f"{100 * share:.1f}% of the step is spent waiting for the next batch (median over the last "
                        f"{len(self._data_shares)} steps and the ranks, at step {step}); try more DataLoader "
                        "workers (num_workers), pin_memory=True, a larger prefetch_factor and "
                        "persistent_workers=True: each costs host CPU cores and memory"
                    ),
                    details={
                        "step": step,
                        "data_share_pct": round(100 * share, 2),
                        "threshold_pct": 100 * p.data_share,
                    },
                )
            )
        elif share <= p.data_share:
            self._data_open = False
        hit: list[tuple[int, float, int, str]] = []
        for r, steps in sorted(self._rank_steps.items()):
            if len(steps) < p.window:  # a full window only: a few spikes in a short one are noise
                continue
            found = self._bursty(list(steps))
            if found is None:
                self._bursty_open.discard(r)
            elif r not in self._bursty_open:
                self._bursty_open.add(r)
                hit.append((r, *found))
        if hit:
            ranks = [h[0] for h in hit]
            every = len(ranks) == len(self._rank_steps) and len(ranks) > 1
            stages = sorted({h[3] for h in hit})
            stall = (
                "data stalls (the data stage makes the spikes)"
                if stages == ["data"]
                else f"spikes in {', '.join(stages)}"
            )
            out.append(
                Finding(
                    code=FindingCode.STEP_BURSTY,
                    severity=Severity.WARNING,
                    nodes=sorted({self.members.get(r) or "" for r in ranks} - {""}),
                    rank=ranks[0] if len(ranks) == 1 else None,
                    subject="job" if every else ",".join(f"rank {r}" for r in ranks[:MAX_NAMED]),
                    message=(
                        f"bursts of slow steps on {'every rank' if every else _fmt_ranks(ranks)} in the last "
                        f"{p.window} steps (at step {step}; CV up to {max(h[1] for h in hit):.2f}, up to "
                        f"{max(h[2] for h in hit)} spikes): {stall}; look for periodic work (checkpointing, "
                        "evaluation, garbage collection), I/O stalls of the data source, or a noisy neighbour"
                    ),
                    details={
                        "step": step,
                        "ranks": ranks[:MAX_NAMED],
                        "cv": [round(h[1], 4) for h in hit][:MAX_NAMED],
                        "spikes": [h[2] for h in hit][:MAX_NAMED],
                        "spike_stage": stages,
                        "threshold_cv": p.bursty_cv,
                    },
                )
            )
        return out

    def _bursty(self, steps: list[StepObs]) -> tuple[float, int, str] | None:
        """(CV, spikes, the stage making them) of one rank's window when it is bursty (module doc), else None."""
        p = self.policy
        t = np.array([o.step_ms for o in steps], dtype=np.float64)
        if t.size < 4 or t.mean() <= 0:
            return None
        cv = float(t.std() / t.mean())
        if cv <= p.bursty_cv:
            return None
        med = float(np.median(t))
        logs = np.log(np.maximum(t, STAGE_FLOOR_MS))
        lm = float(np.median(logs))
        scale = max(MAD_TO_SIGMA * float(np.median(np.abs(logs - lm))), p.spike_floor)
        spikes = np.flatnonzero((t > p.spike_ratio * med) & ((logs - lm) / scale > p.z_threshold))
        if spikes.size < max(p.min_spikes, math.ceil(p.min_spike_share * t.size)):
            return None
        names = sorted({k for o in steps for k in o.stages_ms})
        excess = {
            k: sum(steps[i].stages_ms.get(k, 0.0) for i in spikes)
            - spikes.size * statistics.median(o.stages_ms.get(k, 0.0) for o in steps)
            for k in names
        }
        stage = max(excess, key=lambda k: excess[k]) if excess else "unknown"
        return cv, int(spikes.size), stage

    # ---- the clock
    def hang_threshold_s(self) -> float:
        """Seconds without a completed step that make a hang (module doc)."""
        p = self.policy
        med = self.job_median_ms()
        if med is None and self.last:
            med = statistics.median(o.step_ms for o in self.last.values())
        return max(p.hang_factor * (med or 0.0) / 1000, p.hang_min_s, 2 * self._longest_ms / 1000)

    def hang_due(self, now: float) -> bool:
        """Whether :meth:`check_hang` would report a hang now."""
        p = self.last_progress
        return p is not None and not self.hang_open and now - p >= self.hang_threshold_s()

    def check_hang(self, now: float) -> Finding | None:
        """A ``STEP_HANG`` finding when no rank completed a step for :meth:`hang_threshold_s` (once per hang: a
        new completed step ends it), else ``None``."""
        if self.last_progress is None or self.hang_open:
            return None
        idle = now - self.last_progress
        limit = self.hang_threshold_s()
        if idle < limit:
            return None
        self.hang_open = True
        self.hang_since = self.last_progress
        return self._hang_finding(idle, limit)

    def stopped_first(self) -> tuple[list[int], str]:
        """The ranks that stopped first and how they were told apart (module doc)."""
        ranked = {k: o for k, o in self.last.items() if isinstance(k, int)}
        if not ranked:
            return [], "no rank is known (training logs of unknown rank only)"
        lo, hi = min(o.step for o in ranked.values()), max(o.step for o in ranked.values())
        if lo < hi:
            behind = sorted(r for r, o in ranked.items() if o.step == lo)
            return behind, f"their last completed step is {lo} while others reached {hi}"
        ends = {r: o.end_unix_s for r, o in ranked.items() if o.end_unix_s is not None}
        if not ends:
            return sorted(ranked), f"every rank's last completed step is {lo}"
        med = self.job_median_ms() or 0.0
        first = min(ends.values())
        tol = max(0.5 * med / 1000, 0.05)
        early = sorted(r for r, e in ends.items() if e - first <= tol)
        if len(early) == len(ranked):
            return early, (
                f"every rank's last completed step is {lo}, all ended within {tol:.2f} s: the job stopped inside "
                f"step {lo + 1} (a collective waits for a rank; the Flight Recorder dumps name it)"
            )
        return early, f"every rank's last completed step is {lo}; these ended it first (the ranks' own clocks)"

    def _hang_finding(self, idle: float, limit: float) -> Finding:
        p = self.policy
        first, how = self.stopped_first()
        last_steps = {str(k): o.step for k, o in sorted(self.last.items(), key=lambda kv: str(kv[0]))}
        hosts = sorted({self.members.get(r) or "" for r in first} - {""})
        med = self.job_median_ms()
        return Finding(
            code=FindingCode.STEP_HANG,
            severity=Severity.CRITICAL,
            subject="job",
            nodes=hosts,
            rank=first[0] if len(first) == 1 else None,
            message=(
                f"no rank completed a step for {idle:.0f} s (threshold {limit:.0f} s: max({p.hang_factor:g} x the "
                f"median step {(med or 0) / 1000:.2f} s, {p.hang_min_s:g} s, 2 x the longest step)); stopped first: "
                f"{_fmt_ranks(first) if first else 'unknown'} ({how})"
            ),
            details={
                "idle_s": round(idle, 1),
                "threshold_s": round(limit, 1),
                "median_step_ms": round(med, 3) if med is not None else None,
                "stopped_first": first[:MAX_NAMED],
                "stopped_first_count": len(first),
                "how": how,
                "last_step_by_rank": dict(list(last_steps.items())[:MAX_NAMED]),
                "phase": "detected",
            },
        )
