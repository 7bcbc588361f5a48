"""Follow the kernel log instead of rereading it: the agent mode of a node checked again and again (a periodic
check, the Kubernetes DaemonSet's loop) reads only the kernel records written since its last check.

Two sources, tried in order by :func:`follow_kernel_log`:

1. ``/dev/kmsg`` (:func:`follow_kmsg`), the kernel's record interface (Documentation/ABI/testing/dev-kmsg):
   opened non-blocking, every ``read()`` returns one record (``pri,seq,ts_usec,flags;message``, parsed by
   :mod:`fleetdx.probes.parsers.kmsg`) from the oldest still in the ring buffer; ``EAGAIN`` says there is no
   more, ``EPIPE`` that records were overwritten before they were read (the read after it goes on with the
   oldest left). The last sequence number read is kept in a small state file with the boot it belongs to
   (``/proc/sys/kernel/random/boot_id``); the next call skips the records up to it. A new boot starts from
   the beginning of the buffer; a gap in sequence numbers is counted as records lost. Reading ``/dev/kmsg``
   needs CAP_SYSLOG when ``kernel.dmesg_restrict`` is 1 (the default on many distributions): without it the
   result is ``skipped`` with the reason.
2. ``journalctl -k --cursor-file FILE -o short-monotonic`` (:func:`follow_journal`), through the runner (the one
   module that spawns processes): journald keeps the cursor of the last entry shown in ``FILE`` and the next
   call shows what follows it (``journalctl(1)``, ``--cursor-file``). ``-k`` implies the current boot.

Either gives the new records as ``dmesg`` prints them (``[  seconds.usec] message``), so the XID parser reads
them with their uptime; :func:`with_followed_kernel_log` puts that text in a bundle in place of the full
``dmesg`` (``dmesg_nvrm.txt``, its lines kept as the ``dmesg`` probe keeps them). A pre-flight's
``NodeJob.follow_kernel_log`` (a state file path) does this on the node.

What the follower does not judge again, by design: records read by an earlier check (the store holds their
findings, :mod:`fleetdx.orchestrator.store.xid_history`), except the lines the caller asks to carry (the XIDs
that drain a node, until a reset of their GPU or a reboot): a retest of a drained node must not read as clean
only because its XID 48 was logged before the last check. XIDs logged before the first call are in the first
call's result (the buffer from its oldest record).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from fleetdx.probes.bundle import BundleData, CommandMeta
from fleetdx.probes.catalog import DMESG_FILE, XID_LINE_RE, ProbeSource
from fleetdx.probes.contracts import Contract, RunStatus
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.kmsg import dmesg_line, parse_kmsg
from fleetdx.probes.parsers.xid import parse_xid
from fleetdx.probes.runner import Runner

KMSG = Path("/dev/kmsg")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
#: bytes read from /dev/kmsg at most in one call (the ring buffer is CONFIG_LOG_BUF_SHIFT: 128 KiB - 32 MiB)
MAX_BYTES = 64 * 1024 * 1024
#: one record at most (the kernel's CONSOLE_EXT_LOG_MAX, 8 KiB); a read with a larger buffer is harmless
READ_SIZE = 8192
JOURNAL_TIMEOUT_S = 30.0


class KernelLogFollow(Contract):
    """What one call of the follower read.

    ``status``: ``ok``, ``skipped`` (the source cannot be read here: ``reason`` says why) or ``failed`` (it
    was read but could not be understood, or the state could not be saved: ``reason``). ``text``: the new
    records as ``dmesg`` lines, only those ``keep`` accepted. ``records``: new records read (all, kept or
    not); ``first_seq``/``last_seq`` their sequence numbers (kmsg); ``lost``: records overwritten in the ring
    buffer before they were read (a sequence gap; kmsg); ``new_boot``: the state was of another boot (or there
    was none), so the whole buffer was read."""

    source: str  #: "/dev/kmsg" or "journalctl"
    status: RunStatus
    reason: str | None = None
    text: str = ""
    records: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    lost: int = 0
    new_boot: bool = False
    carried: int = 0  #: lines of earlier calls carried into ``text`` (``follow_kernel_log``'s ``carry``)


class _State(Contract):
    boot_id: str | None = None
    seq: int = -1


def _boot_id(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _load(state_file: Path) -> _State | None:
    try:
        return _State.model_validate_json(state_file.read_text())
    except (OSError, ValueError):
        return None  # absent or unreadable: start from the buffer's oldest record


def _save(state_file: Path, state: Contract) -> str | None:
    """Write the state atomically (a temporary file renamed over it); the error in words, else ``None``."""
    try:
        state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = state_file.with_name(state_file.name + ".tmp")
        tmp.write_text(json.dumps(state.model_dump()) + "\n")
        os.replace(tmp, state_file)
    except OSError as e:
        return f"cannot save the state file {state_file}: {e.strerror or e}"
    return None


def _read_all(fd: int) -> tuple[bytes, bool]:
    """Every record readable now (until EAGAIN or end of file), at most :data:`MAX_BYTES`; and whether an
    EPIPE said records were overwritten while reading."""
    chunks: list[bytes] = []
    size, overwritten = 0, False
    while size < MAX_BYTES:
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            break
        except BrokenPipeError:
            overwritten = True
            continue
        if not chunk:
            break
        if not chunk.endswith(b"\n"):
            chunk += b"\n"
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), overwritten


def follow_kmsg(
    state_file: Path,
    device: Path = KMSG,
    boot_id_file: Path = BOOT_ID,
    keep: Callable[[str], bool] | None = None,
) -> KernelLogFollow:
    """The ``/dev/kmsg`` records after the sequence number in ``state_file`` (see the module doc), the state
    saved for the next call. Never raises: a device that cannot be opened is ``skipped`` with the reason,
    records that cannot be parsed or a state that cannot be saved are ``failed``."""
    src = str(device)
    try:
        fd = os.open(device, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        denied = e.errno in (errno.EACCES, errno.EPERM)
        why = "no permission (CAP_SYSLOG is needed when kernel.dmesg_restrict=1)" if denied else e.strerror
        return KernelLogFollow(source=src, status=RunStatus.SKIPPED, reason=f"cannot open {device}: {why}")
    try:
        raw, overwritten = _read_all(fd)
    finally:
        os.close(fd)
    try:
        records = parse_kmsg(raw.decode("utf-8", errors="replace"))
    except ParseError as e:
        return KernelLogFollow(source=src, status=RunStatus.FAILED, reason=str(e))
    boot = _boot_id(boot_id_file)
    before = _load(state_file)
    new_boot = before is None or before.boot_id != boot
    after = -1 if new_boot or before is None else before.seq
    fresh = [r for r in records if r.seq > after]
    lost = 0
    if fresh and not new_boot and fresh[0].seq > after + 1:
        lost = fresh[0].seq - after - 1
    elif overwritten and not lost:
        lost = 1  # EPIPE without a visible gap: at least one
    lines = [line for r in fresh for line in dmesg_line(r).split("\n")]
    error = _save(state_file, _State(boot_id=boot, seq=fresh[-1].seq if fresh else after))
    return KernelLogFollow(
        source=src,
        status=RunStatus.OK if error is None else RunStatus.FAILED,
        reason=error,
        text="".join(line + "\n" for line in lines if keep is None or keep(line)),
        records=len(fresh),
        first_seq=fresh[0].seq if fresh else None,
        last_seq=fresh[-1].seq if fresh else None,
        lost=lost,
        new_boot=new_boot,
    )


def follow_journal(
    runner: Runner, cursor_file: Path, keep: Callable[[str], bool] | None = None, timeout_s: float = JOURNAL_TIMEOUT_S
) -> KernelLogFollow:
    """The kernel's journal entries after the cursor in ``cursor_file`` (``journalctl -k --cursor-file``), run
    through ``runner``; journald writes the new cursor. A missing ``journalctl`` or one that fails is
    ``skipped`` / ``failed`` with the runner's reason."""
    argv = ["journalctl", "-k", "--cursor-file", str(cursor_file), "-o", "short-monotonic", "--no-pager", "-q"]
    res = runner.run(argv, timeout_s=timeout_s)
    if not res.ok:
        reason = res.reason or (res.stderr.strip()[-300:] or f"exit code {res.returncode}")
        return KernelLogFollow(source="journalctl", status=res.status, reason=reason)
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    return KernelLogFollow(
        source="journalctl",
        status=RunStatus.OK,
        text="".join(line + "\n" for line in lines if keep is None or keep(line)),
        records=len(lines),
    )


#: carried lines kept at most (the newest): a GPU that logs a critical XID every second must not grow the state
MAX_CARRY = 256


class _Carry(Contract):
    boot_id: str | None = None
    lines: list[str] = Field(default_factory=list)


def _closed_by_reset(lines: list[str]) -> set[int]:
    """Indexes of the XID / driver lines of ``lines`` that a later successful reset of their GPU closes
    (:class:`~fleetdx.probes.parsers.xid.GpuReset`)."""
    try:
        log = parse_xid("\n".join(lines))
    except ParseError:
        return set()
    seen = [(e.line, e.pci_key) for e in log.events] + [(d.line, d.pci_key) for d in log.driver_events]
    closed: set[int] = set()
    for r in log.resets:
        closed.update(line - 1 for line, key in seen if r.pci_key is not None and key == r.pci_key and line < r.line)
    return closed


def _with_carry(
    follow: KernelLogFollow, carry_file: Path, carry: Callable[[str], bool], boot_id_file: Path
) -> KernelLogFollow:
    """``follow`` with the carried lines of the same boot before its new ones, and the carried lines saved for
    the next call: those ``carry`` accepts, unless a later reset of their GPU closed them (a new boot drops
    them all)."""
    boot = _boot_id(boot_id_file)
    try:
        before = _Carry.model_validate_json(carry_file.read_text())
    except (OSError, ValueError):
        before = _Carry(boot_id=boot)
    old = before.lines if before.boot_id == boot else []
    new = follow.text.splitlines()
    lines = old + new
    closed = _closed_by_reset(lines)
    keep = [line for i, line in enumerate(lines) if i not in closed and carry(line)][-MAX_CARRY:]
    error = _save(carry_file, _Carry(boot_id=boot, lines=keep))
    text = "".join(line + "\n" for line in lines)
    if error is not None:
        return follow.model_copy(update={"text": text, "status": RunStatus.FAILED, "reason": error})
    return follow.model_copy(update={"text": text, "carried": len(old)})


def follow_kernel_log(
    state_file: Path,
    runner: Runner,
    keep: Callable[[str], bool] | None = None,
    device: Path = KMSG,
    carry: Callable[[str], bool] | None = None,
) -> KernelLogFollow:
    """:func:`follow_kmsg` with ``state_file``; when ``/dev/kmsg`` is ``skipped``, :func:`follow_journal` with
    ``<state_file>.journal-cursor``; when both are skipped, the kmsg result, its reason naming both.

    ``carry``: the lines that stay in every later result of the same boot (``<state_file>.carry``) until a
    successful reset of their GPU closes them: the XIDs that drain a node, so that a retest does not read as
    clean only because the fault was logged before the last check (a whole ``dmesg`` would still hold them)."""
    first = follow_kmsg(state_file, device=device, keep=keep)
    got = first
    if first.status is RunStatus.SKIPPED:
        second = follow_journal(runner, state_file.with_name(state_file.name + ".journal-cursor"), keep=keep)
        if second.status is RunStatus.SKIPPED:
            return first.model_copy(update={"reason": f"{first.reason}; journalctl: {second.reason}"})
        got = second
    if carry is None or got.status is not RunStatus.OK:
        return got
    return _with_carry(got, state_file.with_name(state_file.name + ".carry"), carry, BOOT_ID)


def keep_xid_lines(line: str) -> bool:
    """The lines the ``dmesg`` probe keeps (:data:`~fleetdx.probes.catalog.XID_LINE_RE`)."""
    return XID_LINE_RE.search(line) is not None


def with_followed_kernel_log(bundle: BundleData, follow: KernelLogFollow) -> BundleData:
    """``bundle`` with its kernel log (``dmesg_nvrm.txt``) replaced by what the follower read since the last
    check. A follower that was ``skipped`` or ``failed`` leaves the bundle's full ``dmesg`` in place and says
    why in that entry's ``reason`` (the XIDs are then judged from the whole log, as without the follower)."""
    old = bundle.meta_for(DMESG_FILE)
    commands = [c for c in bundle.commands if c.file != DMESG_FILE]
    if follow.status is not RunStatus.OK:
        if old is None:
            return bundle
        note = f"kernel-log follower {follow.status.value}: {follow.reason}; the whole dmesg is judged"
        return bundle.model_copy(update={"commands": [*commands, old.model_copy(update={"reason": note})]})
    said = f"followed {follow.source}: {follow.records} new record(s)"
    if follow.first_seq is not None:
        said += f", seq {follow.first_seq}-{follow.last_seq}"
    if follow.lost:
        said += f", {follow.lost} overwritten before they were read"
    if follow.carried:
        said += f"; {follow.carried} line(s) of open critical XIDs carried from earlier checks"
    if follow.new_boot:
        said += ", from the start of this boot"
    meta = CommandMeta(
        file=DMESG_FILE,
        argv=[follow.source],
        source=old.source if old is not None else ProbeSource.COMMAND,
        status=RunStatus.OK,
        started_at=old.started_at if old is not None else None,
        reason=said,
    )
    files = {**bundle.files, DMESG_FILE: follow.text}
    return bundle.model_copy(update={"files": files, "commands": [*commands, meta]})
