"""The one place fleetdx spawns processes.

Commands are argv lists, never a shell string. Each command runs in a new session (process group), and at its
deadline the whole group gets SIGTERM then SIGKILL: nccl-tests and dcgmi are known to hang with children
(mpirun, orted) that a plain ``Popen.kill`` would leave behind. A missing binary is a ``skipped`` result with the
reason, never an exception.

Bounded time and memory, whatever the command does:

* Output is read as it comes and at most :data:`MAX_OUTPUT_BYTES` per stream is kept: the first and the last
  half of that. What lies between is dropped while reading, counted (``stdout_dropped_bytes``) and marked in
  the text, so a probe that floods its output (``yes``) costs no more memory than that.
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

import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
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

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.OK


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
        """What was kept, decoded (bad UTF-8 bytes become U+FFFD), with a marker where bytes were dropped."""
        with self._lock:
            head, tail, dropped = bytes(self._head), b"".join(self._tail), self.dropped
        mid = b"\n[fleetdx: %d bytes of output dropped here]\n" % dropped if dropped else b""
        return (head + mid + tail).decode("utf-8", errors="replace")


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
        full_env = None
        if env:
            full_env = dict(os.environ)
            full_env.update(env)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=full_env,
            )
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
            raise
        if not timed_out:
            # the leader exited; members left in its group (a daemonised helper, an orphaned mpirun child)
            # would hold the pipes open and outlive the probe: kill them
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        escaped: list[str] = []
        if not all(r.wait(max(t0 + timeout_s, time.monotonic()) + PIPE_GRACE_S) for r in readers):
            # a process that left the group (setsid) still holds the pipes: kill it, stop waiting on them
            escaped = _kill_escaped(readers)
            if not all(r.wait(time.monotonic() + PIPE_GRACE_S) for r in readers):
                for r in readers:
                    r.close()
        dropped = {"stdout_dropped_bytes": readers[0].dropped, "stderr_dropped_bytes": readers[1].dropped}
        common = {"argv": argv, "stdout": readers[0].text(), "stderr": readers[1].text(), "started_at": started}
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
