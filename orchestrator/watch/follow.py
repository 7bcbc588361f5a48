"""Following a running job's files, ``tail -f`` style: the only module of :mod:`fleetdx.orchestrator.watch` that
touches the file system (besides the Flight Recorder request, :mod:`.evidence`).

**Which files.** A file named on the command line is followed as it is; a folder is scanned (not recursively)
at every poll, so files that appear later (a rank that starts late, a restart's new log) are picked up:
``*.jsonl`` are StepTimer logs (schema ``fleetdx.steps/1``, one per rank); ``*.log``, ``*.out``, ``*.err``,
``*.txt`` are the job's output (training logs with step times, and the NCCL, watchdog, CUDA and XID lines the
postmortem's job-log scanner reads); a name holding ``dmesg``, ``kern`` or ``journal`` is a kernel log (XIDs,
IB links, AER, OOM killer). Hidden files (the dump request) and folders are skipped.

**Tail semantics** (:class:`Tail`): each file keeps its offset and inode; a poll reads what was appended, up
to ``max_bytes`` at a time; a last line without its newline waits for the rest (a writer caught mid-line); a
file that shrank was truncated (``>``, logrotate's copytruncate) and is read again from its start; a file
whose inode changed was replaced (rotation, rename and recreate) and the new one is read from its start
(lines written to the old file between the last poll and its rename are not read). A line over
:data:`MAX_LINE` bytes is cut there. A file that vanished is kept and read again if it comes back.

A log's scanner holds back a message that may continue on the next line (a wrapped NCCL message, an XID's
``NVRM:`` lines); when a log pauses (a poll reads nothing new from it) what it held is judged then.

Cost: one ``stat`` per file per poll when nothing changed; a folder's listing per poll.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from fleetdx.orchestrator.watch.detect import StepObs
from fleetdx.probes.errors import FleetdxError
from fleetdx.probes.parsers.joblog import JobEvent, JobLogScanner
from fleetdx.probes.parsers.joblog_kernel import KernelLogScanner
from fleetdx.probes.parsers.steptime_log import StepLogScanner
from fleetdx.probes.steptimer import CLOSED_SUFFIX, SCHEMA, TRIGGER_NAME

#: the longest line kept (bytes); the rest of a longer one is dropped
MAX_LINE = 1 << 20
#: the most bytes read from one file at one poll
MAX_READ = 8 << 20
#: suffixes of the job's output and training logs followed in a folder
LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
#: name parts of a kernel log
KERNEL_NAMES = ("dmesg", "kern", "journal")
#: the most files followed (a folder of more is cut here, said once)
MAX_FILES = 65_536


class Tail:
    """One followed file (module doc). :meth:`poll` returns the complete lines appended since the last poll."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self._partial = b""
        self.cut_lines = 0
        self.restarts = 0  #: truncations and rotations seen

    def poll(self, max_bytes: int = MAX_READ) -> list[str]:
        """The complete lines appended since the last poll (decoded as UTF-8, bad bytes replaced)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        if self.inode is not None and st.st_ino != self.inode or st.st_size < self.offset:
            self.offset, self._partial = 0, b""
            self.restarts += 1
        self.inode = st.st_ino
        if st.st_size == self.offset:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(max_bytes)
        except OSError:
            return []
        self.offset += len(data)
        chunks = (self._partial + data).split(b"\n")
        self._partial = chunks.pop()
        if len(self._partial) > MAX_LINE:
            self._partial = b""
            self.cut_lines += 1
        out = []
        for c in chunks:
            if len(c) > MAX_LINE:
                c = c[:MAX_LINE]
                self.cut_lines += 1
            out.append(c.decode("utf-8", "replace"))
        return out


def _finite(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def steptimer_obs(line: str, source: str) -> StepObs | None:
    """One StepTimer JSONL line as a step; ``None`` for a blank line. Raises ValueError for a line that is not
    a step of schema ``fleetdx.steps/1`` (the same checks as :func:`fleetdx.probes.parsers.steplog.parse_steplog`)."""
    if not line.strip():
        return None
    d = json.loads(line)
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        raise ValueError(f'not a JSON object with "schema": "{SCHEMA}"')
    rank, step = d.get("rank"), d.get("step")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank: an integer >= 0, not {rank!r}")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step: an integer >= 0, not {step!r}")
    step_ms, start = _finite(d.get("step_ms")), _finite(d.get("start_unix_s"))
    stages = d.get("stages_ms")
    if step_ms is None or start is None or not isinstance(stages, dict):
        raise ValueError("step_ms, start_unix_s: finite numbers >= 0; stages_ms: an object")
    clean: dict[str, float] = {}
    for k, v in stages.items():
        x = _finite(v)
        if x is None:
            raise ValueError(f"stages_ms.{k}: a finite number >= 0, not {v!r}")
        clean[str(k)] = x
    host = d.get("host")
    return StepObs(rank, step, step_ms, clean, start + step_ms / 1000, host if isinstance(host, str) else None, source)


@dataclass
class Followed:
    """A followed file and what reads it: ``kind`` ``steps`` (StepTimer JSONL), ``log`` (job output and
    training log) or ``kernel``."""

    tail: Tail
    kind: str
    joblog: JobLogScanner | None = None
    steplog: StepLogScanner | None = None
    kernel: KernelLogScanner | None = None
    events_seen: int = 0
    held: bool = False  #: lines were read since the scanner was last flushed
    bad_lines: int = 0
    first_error: str = ""
    series_steps: dict[tuple[int | None, str | None], int] = field(default_factory=dict)


def kind_of(p: Path) -> str | None:
    """``steps``, ``kernel``, ``log`` for a file a folder scan follows, ``None`` for one it skips."""
    name = p.name
    if name.startswith("."):
        return None
    if name.endswith(".jsonl"):
        return "steps"
    low = name.lower()
    if any(k in low for k in KERNEL_NAMES):
        return "kernel"
    if name.endswith(LOG_SUFFIXES):
        return "log"
    return None


class Sources:
    """The files of the paths given, followed (module doc). :meth:`poll` reads what is new in every file."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.files: dict[Path, Followed] = {}
        self.too_many = False
        self.scan()

    def all_closed(self) -> bool:
        """Whether every StepTimer log followed has its ``.closed`` marker (each rank ended its steps)."""
        logs = [f.tail.path for f in self.files.values() if f.kind == "steps"]
        return bool(logs) and all(p.with_name(p.name + CLOSED_SUFFIX).exists() for p in logs)

    def step_dirs(self) -> list[Path]:
        """The folders holding StepTimer logs (where the dump request is written)."""
        return sorted({f.tail.path.parent for f in self.files.values() if f.kind == "steps"})

    def _add(self, p: Path, kind: str) -> None:
        if p in self.files:
            return
        if len(self.files) >= MAX_FILES:
            self.too_many = True
            return
        f = Followed(Tail(p), kind)
        if kind == "log":
            f.joblog, f.steplog = JobLogScanner(str(p)), StepLogScanner(str(p))
        elif kind == "kernel":
            f.kernel = KernelLogScanner(str(p))
        self.files[p] = f

    def scan(self) -> None:
        """Pick up the files that appeared in the folders given."""
        for p in self.paths:
            if p.is_dir():
                try:
                    entries = sorted(os.scandir(p), key=lambda e: e.name)
                except OSError:
                    continue
                for e in entries:
                    if e.name == TRIGGER_NAME or not e.is_file():
                        continue
                    k = kind_of(Path(e.path))
                    if k is not None:
                        self._add(Path(e.path), k)
            elif p not in self.files:
                k = kind_of(p)
                self._add(p, "log" if k is None else k)

    def poll(self) -> tuple[list[StepObs], list[StepObs], list[JobEvent]]:
        """What was read since the last poll, in file order: the steps of StepTimer logs, the step times of
        training logs, and the job-log and kernel-log events."""
        steps: list[StepObs] = []
        log_steps: list[StepObs] = []
        events: list[JobEvent] = []
        for f in self.files.values():
            lines = f.tail.poll()
            if not lines:
                if f.held:  # the log paused: what its scanner held back for a next line is judged now
                    f.held = False
                    _flush(f, events)
                continue
            if f.kind == "steps":
                steps.extend(_steptimer_lines(f, lines))
            else:
                _log_lines(f, lines, log_steps, events)
        return steps, log_steps, events


def _steptimer_lines(f: Followed, lines: list[str]) -> list[StepObs]:
    src = str(f.tail.path)
    out: list[StepObs] = []
    for line in lines:
        try:
            obs = steptimer_obs(line, src)
        except (ValueError, RecursionError) as e:
            f.bad_lines += 1
            f.first_error = f.first_error or f"{src}: {e}"[:300]
            continue
        if obs is not None:
            out.append(obs)
    return out


def _flush(f: Followed, events: list[JobEvent]) -> None:
    scanner = f.kernel if f.kind == "kernel" else f.joblog
    if scanner is None:
        return
    scanner.flush()
    if len(scanner.events) > f.events_seen:
        events.extend(scanner.events[f.events_seen :])
        f.events_seen = len(scanner.events)


def _log_lines(f: Followed, lines: list[str], steps: list[StepObs], events: list[JobEvent]) -> None:
    src = str(f.tail.path)
    scanner = f.kernel if f.kind == "kernel" else f.joblog
    f.held = True
    for line in lines:
        try:
            if scanner is not None:
                scanner.feed(line)
            if f.steplog is not None:
                f.steplog.feed(line)
        except FleetdxError as e:  # ParseError: binary data (a NUL byte)
            f.bad_lines += 1
            f.first_error = f.first_error or f"{src}: {e}"[:300]
    if scanner is not None and len(scanner.events) > f.events_seen:
        events.extend(scanner.events[f.events_seen :])
        f.events_seen = len(scanner.events)
    if f.steplog is not None and f.steplog.new_steps:
        for rank, host, st in f.steplog.new_steps:
            if st.step_ms is not None:
                steps.append(StepObs(rank, st.step, st.step_ms, {"unknown": st.step_ms}, st.ts, host, src))
        f.steplog.new_steps.clear()
