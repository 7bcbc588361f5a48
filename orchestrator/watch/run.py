"""The watch loop: every ``interval_s`` it picks up new files, reads what was appended (:mod:`.follow`), feeds
the steps to the online rules (:mod:`.detect`) and the job-log and kernel-log events to the postmortem's rules
(:func:`fleetdx.orchestrator.postmortem.rules.judge`: NCCL errors, watchdog timeouts, XIDs, OOMs as they are
printed, each (code, key) once), checks the hang clock and, on a hang, asks the ranks for Flight Recorder
dumps and collects them (:mod:`.evidence`) while it keeps following. Each finding goes to ``emit`` as soon as
it is found; ``note(kind, text)`` gets the rest: ``problem`` (a line not read, a request not written) and
``info`` (dumps asked for, steps resumed after a hang, training-log step times left out when StepTimer logs
time the same job by stage).

It stops when ``stop`` is set (the CLI's SIGINT/SIGTERM), after ``max_s`` seconds, or once nothing new was read
for ``until_idle_s`` seconds (and no dump collection is under way). A job whose every StepTimer log has its
``.closed`` marker (``StepTimer.close()``) ended: no hang is reported for it. The exit code is the Nagios verdict of
every finding emitted (:func:`fleetdx.orchestrator.judgement.envelope.judge`); UNKNOWN (3) when nothing was
ever read, or lines were unreadable and nothing worse was found.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from fleetdx.orchestrator.judgement import EvidenceLine, Finding
from fleetdx.orchestrator.judgement.envelope import judge
from fleetdx.orchestrator.postmortem import rules
from fleetdx.orchestrator.store.records import LIVE_FINDINGS, LiveJobRecord
from fleetdx.orchestrator.watch.detect import OnlineDetector, WatchPolicy
from fleetdx.orchestrator.watch.evidence import DumpCollection, ras_evidence, request_dumps
from fleetdx.orchestrator.watch.follow import Sources
from fleetdx.probes.contracts import Contract, Verdict
from fleetdx.probes.errors import ConfigError
from fleetdx.probes.parsers.joblog import JobEvent
from fleetdx.probes.parsers.logline import iso
from fleetdx.probes.runner import Runner


class WatchRequest(Contract):
    """``fleetdx watch``'s options (seconds)."""

    paths: list[Path] = Field(min_length=1)
    interval_s: float = Field(default=1.0, gt=0)
    hang_factor: float = Field(default=20.0, gt=0)
    hang_min_s: float = Field(default=10.0, gt=0)
    until_idle_s: float | None = Field(default=None, gt=0)
    max_s: float | None = Field(default=None, gt=0)
    dump: bool = True  #: ask for Flight Recorder dumps on a hang
    dump_wait_s: float = Field(default=30.0, gt=0)
    ras: bool = True  #: query NCCL's RAS (ncclras) on a hang
    ras_host: str | None = Field(default=None, max_length=255)  #: where RAS listens (the job's node); None: here


class WatchResult(Contract):
    """What a watch saw: the findings emitted, steps and events read, its verdict and exit code."""

    findings: list[Finding]
    steps_read: int
    events_read: int
    files: int
    unreadable: list[str]
    verdict: Verdict
    exit_code: int


def event_finding(e: JobEvent) -> tuple[tuple[object, ...], Finding] | None:
    """A job-log or kernel-log event as a finding, with the key that makes it once (the rule's code, severity and
    grouping key), or ``None`` when the postmortem's rules take it as context only."""
    j = rules.judge(e)
    if j is None:
        return None
    where = (
        " ".join(([f"rank {e.rank}"] if e.rank is not None else []) + ([f"on {e.host}"] if e.host else []))
        or "on an unnamed host"
    )
    text = e.text.split("\n", 1)[0].strip()[:200]
    d = e.details
    if j.rule is not None and j.rule.message:
        message = rules.render(j.rule.message, where=where, host=e.host or "the host", text=text, details=d)
        action = rules.render(j.rule.action, where=where, host=e.host or "the host", text=text, details=d)
    else:
        message, action = f"{e.kind.value} {where}: {text}", ""
    if j.note:
        message += f"; {j.note}"
    f = Finding(
        code=j.code,
        severity=j.severity,
        nodes=[e.host] if e.host else [],
        rank=e.rank,
        subject=where,
        message=message,
        action=action,
        time=iso(e.ts) if e.ts is not None else e.time,
        evidence=[EvidenceLine(file=e.file, line=e.line, text=e.text[:2000])],
        details={k: v for k, v in d.items() if v is not None},
    )
    return (j.code, j.severity, *j.key), f  # a worse line of the same key (AER corrected, then fatal) again


class Watcher:
    """One watch (module doc); :meth:`tick` does one round, :meth:`run` loops."""

    def __init__(
        self,
        req: WatchRequest,
        emit: Callable[[Finding], None],
        note: Callable[[str, str], None] = lambda _kind, _m: None,
        clock: Callable[[], float] = time.monotonic,
        runner: Runner | None = None,
    ) -> None:
        missing = [str(p) for p in req.paths if not p.exists()]
        if missing:
            raise ConfigError(f"{missing[0]}: no such file or folder")
        self.req = req
        self.emit, self.note, self.clock = emit, note, clock
        self.runner = runner
        self.detector = OnlineDetector(WatchPolicy(hang_factor=req.hang_factor, hang_min_s=req.hang_min_s))
        self.sources = Sources(list(req.paths))
        self.findings: list[Finding] = []
        self.seen_events: set[tuple[object, ...]] = set()
        self.collection: DumpCollection | None = None
        self.steps_read = self.events_read = 0
        self.started = clock()
        self.last_activity = self.started
        self._said: set[str] = set()

    def _out(self, f: Finding) -> None:
        self.findings.append(f)
        self.emit(f)

    def tick(self) -> None:
        """One round: new files, new lines, the rules, the hang clock, the dump collection."""
        self.sources.scan()
        steps, log_steps, events = self.sources.poll()
        now = self.clock()
        if log_steps and (steps or self.sources.step_dirs()):
            # StepTimer logs time every stage of every rank: a training log's step times of the same job (a
            # rank key of its own, or none) would only mix a coarser view of the same steps into the rules
            if "log steps" not in self._said:
                self._said.add("log steps")
                self.note("info", "training-log step times not used: StepTimer logs time the same steps by stage")
        else:
            steps += log_steps
        if steps or events:
            self.last_activity = now
        was_hung = self.detector.hang_open
        for f in self.detector.observe_many(steps, now):
            self._out(f)
        if was_hung and not self.detector.hang_open and self.detector.hang_since is not None:
            self.note("info", f"steps resumed after {now - self.detector.hang_since:.0f} s without one")
        self.steps_read += len(steps)
        self._events(events)
        ended = self.detector.hang_due(now) and self.sources.all_closed()
        if ended and "ended" not in self._said:
            self._said.add("ended")
            self.note("info", "every rank closed its StepTimer: the job ended (no hang is reported after this)")
        hang = None if ended else self.detector.check_hang(now)
        if hang is not None:
            self._out(hang)
            self._ask_for_dumps(now)
            self._ask_ras()
        self._collect(now)
        for followed in self.sources.files.values():
            if followed.first_error and followed.first_error not in self._said:
                self._said.add(followed.first_error)
                self.note("problem", f"not read: {followed.first_error}")

    def _collect(self, now: float) -> None:
        if self.collection is not None:
            done = self.collection.poll(now)
            if done is not None:
                self.collection = None
                for f in done:
                    self._out(f)

    def _events(self, events: list[JobEvent]) -> None:
        self.events_read += len(events)
        for e in events:
            got = event_finding(e)
            if got is not None and got[0] not in self.seen_events:
                self.seen_events.add(got[0])
                self._out(got[1])

    def _ask_for_dumps(self, now: float) -> None:
        dirs = self.sources.step_dirs()
        if not self.req.dump or not dirs or self.collection is not None:
            if not dirs:
                self.note("info", "no StepTimer folder to ask for Flight Recorder dumps (training logs only)")
            return
        rid, dump_dir, failed = request_dumps(dirs)
        ranks = sorted(k for k in self.detector.members if isinstance(k, int))
        hosts = {k: h for k, h in self.detector.members.items() if isinstance(k, int) and h}
        self.note("info", f"asked {len(ranks)} ranks for Flight Recorder dumps into {dump_dir}")
        for w in failed:
            self.note("problem", f"dump request not written: {w}")
        self.collection = DumpCollection(rid, dump_dir, ranks, hosts, now + self.req.dump_wait_s, failed)

    def _ask_ras(self) -> None:
        """Query NCCL's RAS at a hang (:func:`~fleetdx.orchestrator.watch.evidence.ras_evidence`)."""
        if not self.req.ras:
            return
        if self.runner is None:
            from fleetdx.probes.runner import SubprocessRunner

            self.runner = SubprocessRunner()
        found, said = ras_evidence(self.runner, self.req.ras_host)
        self.note("info", said)
        for f in found:
            self._out(f)

    def done(self) -> bool:
        """Whether ``max_s`` or ``until_idle_s`` is reached."""
        now = self.clock()
        if self.req.max_s is not None and now - self.started >= self.req.max_s:
            return True
        idle = self.req.until_idle_s
        return idle is not None and self.collection is None and now - self.last_activity >= idle

    def live(self, job_id: str, host: str | None, started_at: float) -> LiveJobRecord:
        """The job's live state now, for the service's fleet page (``fleetdx watch --report-to``): ``hung`` while
        a hang is open, ``ended`` once every rank closed its StepTimer, else ``running``; the newest findings."""
        d = self.detector
        last = [o.step for o in d.last.values()]
        state = "hung" if d.hang_open else ("ended" if self.sources.all_closed() else "running")
        return LiveJobRecord(
            job_id=job_id,
            watcher_host=host,
            started_at=started_at,
            updated_at=time.time(),
            state=state,
            ranks=sum(1 for k in d.members if isinstance(k, int)),
            last_step=max(last) if last else None,
            step_median_ms=d.job_median_ms(),
            verdict=judge(self.findings).verdict,
            findings=self.findings[-LIVE_FINDINGS:],
        )

    def run(
        self, stop: threading.Event | None = None, after_tick: Callable[[Watcher, int], None] | None = None
    ) -> WatchResult:
        """Loop until stopped (module doc); the result. ``after_tick(watcher, new findings)`` runs after each
        round (``--report-to`` pushes the live state from there)."""
        stop = stop or threading.Event()
        while not stop.is_set():
            t0 = self.clock()
            seen = len(self.findings)
            self.tick()
            if after_tick is not None:
                after_tick(self, len(self.findings) - seen)
            if self.done():
                break
            stop.wait(max(0.0, self.req.interval_s - (self.clock() - t0)))
        return self.finish()

    def finish(self) -> WatchResult:
        """Close a dump collection under way with what arrived; the result."""
        if self.collection is not None:
            for f in self.collection.finish(self.collection.answered()):
                self._out(f)
            self.collection = None
        unreadable = [f.first_error for f in self.sources.files.values() if f.first_error]
        floor = [Verdict.UNKNOWN] if unreadable or not (self.steps_read or self.events_read) else []
        j = judge(self.findings, floor=floor)
        return WatchResult(
            findings=self.findings,
            steps_read=self.steps_read,
            events_read=self.events_read,
            files=len(self.sources.files),
            unreadable=unreadable,
            verdict=j.verdict,
            exit_code=j.exit_code,
        )
