"""The one place fleetdx spawns processes.

Commands are argv lists, never a shell string. Each command runs in a new session (process group), and at its
deadline the whole group gets SIGTERM then SIGKILL: nccl-tests and dcgmi are known to hang with children
(mpirun, orted) that a plain ``Popen.kill`` would leave behind. A missing binary is a ``skipped`` result with the
reason, never an exception.

Bounded time and memory, whatever the command does:

* Output is read as it comes and at most :data:`MAX_OUTPUT_BYTES` per stream is kept: the first and the last
  half of that. What lies between is dropped while reading (the pipe keeps being drained, nothing more is
  stored), counted (``stdout_dropped_bytes``, :attr:`RunResult.truncated`) and marked in the text, so a probe
  that floods its output (``yes``) costs about twice that per stream at the end (the kept bytes and their
  text), not what it wrote.
* Every descendant is owned: nothing a command started outlives it. A process that left the process group
  (``setsid``, a double fork, a daemon) is still found when the command exits or times out, and killed
  (``left_behind`` names it). Where the machine has a writable cgroup v2 hierarchy that is fleetdx's to
  divide (no systemd, or a cgroup systemd delegated), each command runs in a cgroup of its own (created under
  fleetdx's own cgroup, removed after) and whatever is in it then is killed: nothing can escape. Elsewhere
  each command gets a token in its environment (:data:`RUN_TOKEN_ENV`), inherited by all it starts, and the
  processes carrying it are killed; only a descendant that clears its environment escapes that sweep (one
  still holding the output pipes is then killed at the deadline, below). ``PR_SET_CHILD_SUBREAPER`` was not
  chosen: it is process-wide, so orphans of code that is not a probe (Ray's daemons in a driver, ``fleetdx
  serve``'s other work) would become fleetdx's unreaped children, and it still does not say which command an
  orphan came from when several run at once on threads.
* The call returns by its deadline plus :data:`KILL_GRACE_S` plus twice :data:`PIPE_GRACE_S`. A process that
  left the group (``setsid``) but still holds the output pipes open is found through ``/proc`` (the processes
  holding the pipe), killed, and named in the result (``escaped``); the run is then ``timeout``: its output
  may be cut.

Long-lived commands that run beside fleetdx (the ``ray start --block`` processes fleetdx brings up on a Slurm
allocation) are :class:`Background`: own session, output to a file, ended with their process tree by
:func:`stop_background`.

Its twin for simulated clusters and tests, :class:`fleetdx.probes.replay.ReplayRunner`, answers from a bundle's
raw files.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

import psutil
from pydantic import Field

from fleetdx.probes.contracts import Contract, RunStatus

#: grace period between SIGTERM and SIGKILL of a timed-out process group, seconds
KILL_GRACE_S = 2.0
#: seconds the pipes may stay open after the deadline (or after the group died, if later) before the processes
#: still holding them are killed
PIPE_GRACE_S = 1.0
#: most bytes of stdout/stderr kept per command (the first and last half); the rest is dropped while reading
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
#: bytes read from a pipe at a time
READ_CHUNK = 65536
#: environment variable set for each command to a token of its own; every process it starts inherits it, which
#: is how the descendants it left behind are found when no cgroup can be made
RUN_TOKEN_ENV = "FLEETDX_RUN_TOKEN"
#: seconds given to the processes of a command's cgroup to die after SIGKILL before the cgroup is left behind
CGROUP_DRAIN_S = 2.0


class RunResult(Contract):
    """What one command did.

    ``duration_s`` is wall time in seconds; ``returncode`` is ``None`` when the command never ran or was killed
    at its deadline; a negative value is the signal that killed it (``subprocess`` convention).
    """

    argv: list[str]
    status: RunStatus
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    reason: str | None = None
    replayed: bool = False
    started_at: float = Field(default=0.0, description="Unix time the command started")
    stdout_dropped_bytes: int = 0  #: bytes of stdout dropped between the kept head and tail
    stderr_dropped_bytes: int = 0
    escaped: list[str] = Field(default_factory=list)  #: "pid N (name)" of processes that left the group, killed
    #: "pid N (name)" of the command's descendants still running when it exited or was killed: killed then
    left_behind: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.OK

    @property
    def truncated(self) -> bool:
        """Whether stdout or stderr went over :data:`MAX_OUTPUT_BYTES` and lost its middle."""
        return self.stdout_dropped_bytes > 0 or self.stderr_dropped_bytes > 0


class Runner(Protocol):
    """Anything that runs an argv list with a deadline and returns a :class:`RunResult`."""

    def run(self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult: ...


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, wait :data:`KILL_GRACE_S`, then SIGKILL it."""
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        return
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        if wait is None:
            break
        try:
            proc.wait(timeout=wait)
            # the leader is gone; children in the group may not be: make sure
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        except subprocess.TimeoutExpired:
            continue


class _Reader:
    """Drains one pipe on a thread (as ``Popen.communicate`` does, so the leader can be waited on alone),
    keeping at most ``cap`` bytes: the first ``cap // 2`` and the last ``cap // 2``; the bytes in between are
    counted in :attr:`dropped`."""

    def __init__(self, pipe: IO[bytes] | None, cap: int = MAX_OUTPUT_BYTES) -> None:
        self._pipe = pipe
        self._half = max(1, cap // 2)
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self.inode = os.fstat(pipe.fileno()).st_ino if pipe is not None else None
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _keep(self, chunk: bytes) -> None:
        with self._lock:
            room = self._half - len(self._head)
            if room > 0:
                self._head += chunk[:room]
                chunk = chunk[room:]
            if not chunk:
                return
            self._tail.append(chunk)
            self._tail_len += len(chunk)
            while self._tail_len > self._half:
                extra = self._tail_len - self._half
                first = self._tail[0]
                if len(first) <= extra:
                    self._tail.popleft()
                    cut = len(first)
                else:
                    self._tail[0] = first[extra:]
                    cut = extra
                self._tail_len -= cut
                self.dropped += cut

    def _drain(self) -> None:
        if self._pipe is None:
            return
        try:
            fd = self._pipe.fileno()
            while chunk := os.read(fd, READ_CHUNK):
                self._keep(chunk)
        except (OSError, ValueError):  # the read end was closed under us: the call gave up on an escaped writer
            pass

    def wait(self, until: float) -> bool:
        """Wait for end of file until the monotonic time ``until``; whether the pipe was drained."""
        self._thread.join(max(0.0, until - time.monotonic()))
        return not self._thread.is_alive()

    def close(self) -> None:
        if self._pipe is not None:
            try:
                self._pipe.close()
            except OSError:
                pass

    def text(self) -> str:
        """What was kept, decoded (bad UTF-8 bytes become U+FFFD), with a marker where bytes were dropped.

        Called once the pipe is done with: the kept bytes are handed over (the reader is empty after), and
        joined into one buffer before one decode, so the peak is about twice what was kept, not four times.
        """
        with self._lock:
            data, self._head = self._head, bytearray()
            if self.dropped:
                data += b"\n[fleetdx: %d bytes of output dropped here]\n" % self.dropped
            while self._tail:
                data += self._tail.popleft()
            self._tail_len = 0
        text = data.decode("utf-8", errors="replace")
        del data
        return text


def _pipe_holders(inodes: set[int]) -> list[psutil.Process]:
    """The processes that hold a pipe with one of ``inodes`` open (``/proc/PID/fd`` links ``pipe:[INODE]``),
    this process excluded."""
    wanted = {f"pipe:[{i}]" for i in inodes}
    me = os.getpid()
    out = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{proc.pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{proc.pid}/fd/{fd}") in wanted:
                    out.append(proc)
                    break
            except OSError:
                continue
    return out


def _kill_escaped(readers: Sequence[_Reader]) -> list[str]:
    """Kill the processes still holding the output pipes of ``readers`` open; their "pid N (name)"."""
    named = []
    for proc in _pipe_holders({r.inode for r in readers if r.inode is not None}):
        try:
            name = proc.name()
            proc.kill()
        except psutil.Error:
            continue
        named.append(f"pid {proc.pid} ({name})")
    return named


def _name(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid} ({proc.name()})"
    except psutil.Error:
        return f"pid {proc.pid}"


def _kill_all(procs: Sequence[psutil.Process]) -> list[str]:
    """SIGKILL ``procs``; the "pid N (name)" of those that were still there to kill."""
    named = []
    for proc in procs:
        name = _name(proc)
        try:
            proc.kill()
        except psutil.Error:
            continue
        named.append(name)
    return named


def _carrying(token: str) -> list[psutil.Process]:
    """The live processes whose environment holds ``RUN_TOKEN_ENV=token`` (those this user may read), this
    process excluded."""
    me = os.getpid()
    needle = f"{RUN_TOKEN_ENV}={token}".encode()
    out = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if needle in env.split(b"\0") and proc.status() != psutil.STATUS_ZOMBIE:
            out.append(proc)
    return out


def _cgroup2_home() -> Path | None:
    """This process's own cgroup directory in a cgroup v2 hierarchy (``0::`` of ``/proc/self/cgroup``, under
    the ``cgroup2`` mount of ``/proc/self/mountinfo``), or ``None`` where there is none."""
    try:
        own = next(
            (line[3:].strip() for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::")),
            None,
        )
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    if own is None:
        return None
    for line in mounts:
        fields, _, fs = line.partition(" - ")
        parts = fields.split()
        if fs.split()[:1] == ["cgroup2"] and len(parts) >= 5 and parts[3] == "/":
            home = Path(parts[4]) / own.lstrip("/")
            return home if (home / "cgroup.procs").exists() and _ours_to_divide(home) else None
    return None


def _ours_to_divide(home: Path) -> bool:
    """Whether fleetdx may make cgroups under ``home``: where systemd manages the hierarchy, only in a cgroup it
    delegated (the ``trusted.delegate``/``user.delegate`` mark systemd 251+ sets; a Slurm step's cgroup, a
    ``systemd-run -p Delegate=yes`` scope); systemd's own units are not to be divided by others. Without
    systemd (a container, a plain init) the cgroup is ours."""
    if not os.path.isdir("/run/systemd/system"):
        return True
    for name in ("trusted.delegate", "user.delegate"):
        try:
            if os.getxattr(home, name) == b"1":
                return True
        except OSError:
            continue
    return False


class _Cgroup:
    """A cgroup v2 of one command's own, made under fleetdx's cgroup: the command enters it before it execs
    (``preexec`` writes ``0``, "this process", to its ``cgroup.procs``), so everything it starts is in it, and
    :meth:`kill` ends them all, however they detached. :meth:`make` answers ``None`` where cgroups cannot be
    made (no cgroup v2, not writable: the token sweep is used), and stops trying after the first failure."""

    _home: Path | None = None
    _usable: bool | None = None  #: ``None``: not tried yet
    _seq = itertools.count()
    _lock = threading.Lock()

    def __init__(self, path: Path, procs_fd: int) -> None:
        self.path = path
        self._procs_fd = procs_fd

    @classmethod
    def make(cls) -> _Cgroup | None:
        with cls._lock:
            if cls._usable is None:
                cls._home = _cgroup2_home()
                cls._usable = cls._home is not None
            if not cls._usable or cls._home is None:
                return None
            path = cls._home / f"fleetdx-run-{os.getpid()}-{next(cls._seq)}"
        try:
            path.mkdir()
        except OSError:
            cls.disable()
            return None
        try:
            fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            cls.disable()
            _rmdir(path)
            return None
        return cls(path, fd)

    @classmethod
    def disable(cls) -> None:
        """Use the token sweep from now on (the cgroup could not be made or entered)."""
        with cls._lock:
            cls._usable = False

    def preexec(self) -> Callable[[], None]:
        """The function the child runs between fork and exec: it moves itself into this cgroup. (It only
        writes two bytes to a file descriptor opened beforehand: safe between fork and exec even with
        threads.)"""
        fd = self._procs_fd

        def enter() -> None:
            os.write(fd, b"0")

        return enter

    def _pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill(self) -> list[str]:
        """SIGKILL every process left in the cgroup, wait for it to empty, remove it; the "pid N (name)" of
        those killed."""
        named: list[str] = []
        deadline = time.monotonic() + CGROUP_DRAIN_S
        while (pids := self._pids()) and time.monotonic() < deadline:
            procs = [p for p in map(_process, pids) if p is not None and _alive(p)]
            if not procs:
                break  # only zombies left, waiting for their reaper: dead already
            named += [n for n in _kill_all(procs) if n not in named]
            time.sleep(0.01)
        os.close(self._procs_fd)
        _rmdir(self.path)
        return named


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass  # still populated past CGROUP_DRAIN_S (an unkillable process): left for the machine to clean


class SubprocessRunner:
    """Runs commands for real. ``env`` entries are added to (not replacing) the current environment."""

    def run(self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult:
        argv = [str(a) for a in argv]
        if not argv:
            raise ValueError("empty argv")
        started = time.time()
        exe = argv[0]
        if os.sep not in exe and shutil.which(exe) is None:
            return RunResult(
                argv=argv, status=RunStatus.SKIPPED, reason=f"{exe}: not found on PATH", started_at=started
            )
        token = secrets.token_hex(8)
        full_env = {**os.environ, **(env or {}), RUN_TOKEN_ENV: token}
        t0 = time.monotonic()
        try:
            proc, cgroup = _spawn(argv, full_env)
        except FileNotFoundError:
            return RunResult(argv=argv, status=RunStatus.SKIPPED, reason=f"{exe}: not found", started_at=started)
        except PermissionError as e:
            return RunResult(argv=argv, status=RunStatus.SKIPPED, reason=f"{exe}: {e.strerror}", started_at=started)
        except OSError as e:
            return RunResult(argv=argv, status=RunStatus.FAILED, reason=f"{exe}: {e}", started_at=started)
        readers = [_Reader(proc.stdout), _Reader(proc.stderr)]
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        except BaseException:
            _kill_group(proc)
            _kill_descendants(cgroup, token)
            raise
        if not timed_out:
            # the leader exited; members left in its group (a daemonised helper, an orphaned mpirun child)
            # would hold the pipes open and outlive the probe: kill them
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        # whatever it started and left behind, in the group or not (setsid, a daemon): killed now
        left_behind = _kill_descendants(cgroup, token)
        escaped: list[str] = []
        if not all(r.wait(max(t0 + timeout_s, time.monotonic()) + PIPE_GRACE_S) for r in readers):
            # a process that left the group (setsid) still holds the pipes: kill it, stop waiting on them
            escaped = _kill_escaped(readers)
            if not all(r.wait(time.monotonic() + PIPE_GRACE_S) for r in readers):
                for r in readers:
                    r.close()
        dropped = {"stdout_dropped_bytes": readers[0].dropped, "stderr_dropped_bytes": readers[1].dropped}
        common = {
            "argv": argv,
            "stdout": readers[0].text(),
            "stderr": readers[1].text(),
            "started_at": started,
            "left_behind": left_behind,
        }
        duration = time.monotonic() - t0
        if timed_out or escaped:
            if timed_out:
                reason = f"no exit within {timeout_s:g} s; process group killed"
            else:
                reason = f"its output stayed open past the {timeout_s:g} s deadline"
            if escaped:
                reason += "; killed processes that had left its process group: " + ", ".join(escaped)
            return RunResult(
                status=RunStatus.TIMEOUT,
                returncode=None if timed_out else proc.returncode,
                duration_s=duration,
                reason=reason,
                escaped=escaped,
                **dropped,
                **common,
            )
        rc = proc.returncode
        return RunResult(
            status=RunStatus.OK if rc == 0 else RunStatus.FAILED,
            returncode=rc,
            duration_s=duration,
            reason=None if rc == 0 else f"exit code {rc}",
            **dropped,
            **common,
        )


def _spawn(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], _Cgroup | None]:
    """Start ``argv`` in a new session with piped output, inside a cgroup of its own where one can be made."""
    cgroup = _Cgroup.make()

    def popen(preexec: Callable[[], None] | None) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
            preexec_fn=preexec,  # noqa: PLW1509 - see _Cgroup.preexec
        )

    if cgroup is None:
        return popen(None), None
    try:
        return popen(cgroup.preexec()), cgroup
    except subprocess.SubprocessError:  # the child could not enter the cgroup (delegation, threaded mode)
        _Cgroup.disable()
        cgroup.kill()
        return popen(None), None
    except BaseException:
        cgroup.kill()
        raise


def _kill_descendants(cgroup: _Cgroup | None, token: str) -> list[str]:
    """Kill every process the command started that still runs: its cgroup's, or those carrying its token."""
    if cgroup is not None:
        return cgroup.kill()
    named: list[str] = []
    deadline = time.monotonic() + CGROUP_DRAIN_S
    # again until none is left: one of them may have been forking while the first pass listed the processes
    while (left := _carrying(token)) and time.monotonic() < deadline:
        named += [n for n in _kill_all(left) if n not in named]
        time.sleep(0.01)
    return named


class Background:
    """A long-lived command that runs beside fleetdx (a ``ray start --block``, an ``srun`` step holding one):
    started in its own session (signals to fleetdx never reach it), stdin closed, stdout and stderr appended to
    ``log`` (an open binary file this object closes when stopped). Ended by :func:`stop_background`."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], log: IO[bytes]) -> None:
        self.log = log
        self._proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def poll(self) -> int | None:
        """The exit status, or ``None`` while it runs."""
        return self._proc.poll()

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Wait up to ``timeout_s`` (``None``: for ever); the exit status, or ``None`` if it still runs."""
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def text(self) -> str:
        """What it has written so far."""
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")


def _tree(pid: int) -> list[psutil.Process]:
    try:
        p = psutil.Process(pid)
        return [p, *p.children(recursive=True)]
    except psutil.Error:
        return []


def _alive(p: psutil.Process) -> bool:
    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def stop_background(procs: Sequence[Background], grace_s: float) -> None:
    """SIGTERM each process's session, wait up to ``grace_s`` seconds in all, then SIGKILL whatever is left of
    the process trees as they were before the SIGTERM; close the logs. Processes already ended are skipped."""
    trees = {id(b): _tree(b.pid) for b in procs}
    for b in procs:
        if b.poll() is None:
            try:
                os.killpg(b.pid, signal.SIGTERM)
            except OSError:
                pass
    deadline = time.monotonic() + grace_s
    for b in procs:
        b.wait(max(0.1, deadline - time.monotonic()))
        left = [p for p in trees[id(b)] if _alive(p)]
        _, alive = psutil.wait_procs(left, timeout=max(0.1, deadline - time.monotonic()))
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        if b.poll() is None:
            b._proc.kill()
            b.wait()
        b.log.close()
