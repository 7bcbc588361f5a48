"""The one place fleetdx spawns processes.

Commands are argv lists, never a shell string. Each command runs in a new session (process group), and at its
deadline the whole group gets SIGTERM then SIGKILL: nccl-tests and dcgmi are known to hang with children
(mpirun, orted) that a plain ``Popen.kill`` would leave behind. A missing binary is a ``skipped`` result with the
reason, never an exception.

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
from collections.abc import Mapping, Sequence
from typing import IO, Protocol

from pydantic import Field

from fleetdx.probes.contracts import Contract, RunStatus

#: grace period between SIGTERM and SIGKILL of a timed-out process group, seconds
KILL_GRACE_S = 2.0
#: seconds to wait for the pipes to close once the process group is dead
DRAIN_TIMEOUT_S = 5.0
#: most bytes of stdout/stderr kept per command; the rest is cut and flagged
MAX_OUTPUT_BYTES = 64 * 1024 * 1024


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

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.OK


class Runner(Protocol):
    """Anything that runs an argv list with a deadline and returns a :class:`RunResult`."""

    def run(
        self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None
    ) -> RunResult: ...


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


def _decode(data: bytes | None) -> str:
    if not data:
        return ""
    if len(data) > MAX_OUTPUT_BYTES:
        data = data[:MAX_OUTPUT_BYTES] + b"\n[fleetdx: output cut at %d bytes]\n" % MAX_OUTPUT_BYTES
    return data.decode("utf-8", errors="replace")


class _Reader:
    """Drains one pipe on a thread (as ``Popen.communicate`` does), so the leader can be waited on alone."""

    def __init__(self, pipe: IO[bytes] | None) -> None:
        self._chunks: list[bytes] = []
        self._pipe = pipe
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        if self._pipe is None:
            return
        with self._pipe:
            while chunk := self._pipe.read(65536):
                self._chunks.append(chunk)

    def result(self) -> bytes:
        """Everything read once the pipe is closed by every writer (the process group is dead), or after
        :data:`DRAIN_TIMEOUT_S` when a process that left the group (``setsid``) still holds it open."""
        self._thread.join(DRAIN_TIMEOUT_S)
        return b"".join(list(self._chunks))


class SubprocessRunner:
    """Runs commands for real. ``env`` entries are added to (not replacing) the current environment."""

    def run(
        self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None
    ) -> RunResult:
        argv = [str(a) for a in argv]
        if not argv:
            raise ValueError("empty argv")
        started = time.time()
        exe = argv[0]
        if os.sep not in exe and shutil.which(exe) is None:
            return RunResult(argv=argv, status=RunStatus.SKIPPED, reason=f"{exe}: not found on PATH",
                             started_at=started)
        full_env = None
        if env:
            full_env = dict(os.environ)
            full_env.update(env)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, env=full_env,
            )
        except FileNotFoundError:
            return RunResult(argv=argv, status=RunStatus.SKIPPED, reason=f"{exe}: not found", started_at=started)
        except PermissionError as e:
            return RunResult(argv=argv, status=RunStatus.SKIPPED, reason=f"{exe}: {e.strerror}",
                             started_at=started)
        except OSError as e:
            return RunResult(argv=argv, status=RunStatus.FAILED, reason=f"{exe}: {e}", started_at=started)
        readers = [_Reader(proc.stdout), _Reader(proc.stderr)]
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = (r.result() for r in readers)
            return RunResult(
                argv=argv, status=RunStatus.TIMEOUT, returncode=None, stdout=_decode(out), stderr=_decode(err),
                duration_s=time.monotonic() - t0, reason=f"no exit within {timeout_s:g} s; process group killed",
                started_at=started,
            )
        except BaseException:
            _kill_group(proc)
            raise
        # the leader exited; members left in its group (a daemonised helper, an orphaned mpirun child) would
        # hold the pipes open and outlive the probe: kill them, then drain the pipes
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        out, err = (r.result() for r in readers)
        rc = proc.returncode
        return RunResult(
            argv=argv, status=RunStatus.OK if rc == 0 else RunStatus.FAILED, returncode=rc,
            stdout=_decode(out), stderr=_decode(err), duration_s=time.monotonic() - t0,
            reason=None if rc == 0 else f"exit code {rc}", started_at=started,
        )
