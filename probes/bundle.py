"""The node bundle: one raw file per command plus ``meta.json``; the unit of evidence every analysis reads.

Layout of a bundle directory::

    meta.json               # BundleData without the file contents (host, time, version, commands)
    nvidia-smi_topo_-m.txt  # stdout of the command as printed (decoded as UTF-8, bad bytes U+FFFD)
    lscpu_-J.json
    sysfs_infiniband.txt    # sysfs facts (fleetdx.probes.sysfs), "PATH:VALUE" lines
    ...

A command that was skipped (binary missing, not permitted, no GPU) has no file, but its entry in ``meta.json``
says why. A command that failed or timed out keeps whatever stdout it printed (partial nccl-tests output is
evidence). A directory of raw files **without** ``meta.json`` (e.g. outputs captured by hand, named as in
``tests/fixtures/hosts/``) is a valid bundle: every file counts as ``ok`` and the host is the directory name.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from pydantic import Field, ValidationError

from fleetdx import __version__
from fleetdx.probes.catalog import (
    NCCL_SWEEP_COLLECTIVE,
    SMI_LIST_FILE,
    SYSFS_IB_COUNTERS_FILE,
    XID_LINE_RE,
    OutputFilter,
    ProbeSource,
    ProbeSpec,
    commands,
    dcgm_probes,
    file_name_for_argv,
    nccl_sweep_probe,
    rows_reading,
    spec_for_argv,
)
from fleetdx.probes.contracts import SCHEMA_VERSION, Contract, Level, RunStatus
from fleetdx.probes.errors import BundleError
from fleetdx.probes.parsers.ib_counters import SAMPLE_HEADER
from fleetdx.probes.rawfile import DEFAULT_MAX_BYTES, RawFileError, read_raw
from fleetdx.probes.runner import Runner, RunResult
from fleetdx.probes.sysfs import COLLECTOR_SOURCES, COLLECTORS, SysfsSource, SysfsText, read_infiniband_counters

META_FILE = "meta.json"
#: threads running quick-level commands at once; the runner is thread-safe and the commands are short
DEFAULT_WORKERS = 6
#: characters of stderr kept in meta.json per command
STDERR_TAIL_CHARS = 2000
#: extensions tried by find_raw_file for an argv with no registry entry
RAW_EXTENSIONS = (".txt", ".json", ".xml", ".csv")
#: least seconds between the two RDMA counter samples of the standard level; the second is taken after the GPU
#: work, so the window is usually minutes. ibdiagnet pauses 1 s between its two counter samples by default
#: (``-I- Going to sleep for 1 seconds until next counters sample``, tests/fixtures/ib/ibdiagnet_logParserTask.txt)
IB_SAMPLE_MIN_S = 1.0


class _IbSample:
    """One RDMA counter sample: monotonic and Unix time, and its lines (``None``: no RDMA device)."""

    def __init__(self, root: Path) -> None:
        self.t_mono, self.t_unix = time.monotonic(), time.time()
        self.lines = read_infiniband_counters(root)

    def text(self, n: int) -> str:
        return SAMPLE_HEADER.format(n=n, t=self.t_unix) + "\n" + "\n".join(self.lines or []) + "\n"


def _ib_first(root: Path | None) -> _IbSample | CommandMeta | None:
    """The first counter sample, or a FAILED meta when sysfs could not be listed; ``None`` without a root."""
    if root is None:
        return None
    try:
        return _IbSample(root)
    except OSError as e:
        why = f"{type(e).__name__}: {e}"
        return CommandMeta(file=SYSFS_IB_COUNTERS_FILE, source=ProbeSource.SYSFS, status=RunStatus.FAILED, reason=why)


def _ib_counters(
    root: Path, first: _IbSample | CommandMeta, sleep: Callable[[float], None] = time.sleep
) -> tuple[CommandMeta, str | None]:
    """The bundle entry of the two counter samples: ``first`` and one taken now (at least
    :data:`IB_SAMPLE_MIN_S` after it), as ``sysfs_infiniband_counters.txt``."""
    if isinstance(first, CommandMeta):
        return first, None
    started = first.t_unix
    if first.lines is None:
        meta = CommandMeta(
            file=SYSFS_IB_COUNTERS_FILE,
            source=ProbeSource.SYSFS,
            status=RunStatus.SKIPPED,
            started_at=started,
            reason="/sys/class/infiniband: no RDMA device",
        )
        return meta, None
    wait = IB_SAMPLE_MIN_S - (time.monotonic() - first.t_mono)
    if wait > 0:
        sleep(wait)
    second: _IbSample | None = None
    try:
        second = _IbSample(root)
    except OSError as e:
        reason: str | None = f"second sample: {type(e).__name__}: {e}"
    else:
        reason = None if second.lines is not None else "second sample: the RDMA devices are gone"
    text = first.text(1) + (second.text(2) if second is not None and second.lines is not None else "")
    meta = CommandMeta(
        file=SYSFS_IB_COUNTERS_FILE,
        source=ProbeSource.SYSFS,
        status=RunStatus.OK if reason is None else RunStatus.FAILED,
        duration_s=time.monotonic() - first.t_mono,
        started_at=started,
        reason=reason,
    )
    return meta, text


class CommandMeta(Contract):
    """How one bundle entry was produced. ``file`` is its bundle file name (present unless ``skipped``);
    ``duration_s`` wall seconds; ``started_at`` Unix time; ``stderr_tail`` the last characters of stderr."""

    file: str
    argv: list[str] = Field(default_factory=list)
    source: ProbeSource = ProbeSource.COMMAND
    status: RunStatus
    returncode: int | None = None
    duration_s: float | None = None
    started_at: float | None = None
    reason: str | None = None
    stderr_tail: str | None = None
    stdout_dropped_bytes: int = 0  #: stdout bytes the runner dropped between the kept head and tail
    #: "pid N (name)" of the processes the command left running when it returned, killed by the runner
    left_behind: list[str] = Field(default_factory=list)


class BundleData(Contract):
    """A bundle in memory: ``files`` maps bundle file name -> raw text; ``commands`` is the meta of every
    entry, skipped ones included. ``created_at`` is ``None`` for a bundle without meta.json."""

    schema_version: int = SCHEMA_VERSION
    host: str
    created_at: datetime | None = None
    fleetdx_version: str = __version__
    level: Level | None = None
    replayed: bool = False
    files: dict[str, str] = Field(default_factory=dict)
    commands: list[CommandMeta] = Field(default_factory=list)
    #: bundle entries that could not be read (a symlink loop, a FIFO, a subdirectory, no permission, over the
    #: size limit) -> why: evidence that is missing, reported, never silently skipped
    unreadable: dict[str, str] = Field(default_factory=dict)

    def meta_for(self, file: str) -> CommandMeta | None:
        return next((c for c in self.commands if c.file == file), None)


class _Meta(Contract):
    """The on-disk shape of meta.json: BundleData without the file contents."""

    schema_version: int
    host: str
    created_at: datetime | None = None
    fleetdx_version: str
    level: Level | None = None
    replayed: bool = False
    commands: list[CommandMeta]


def _filter(text: str, output_filter: OutputFilter | None) -> str:
    if output_filter is OutputFilter.XID_LINES:
        return "".join(ln for ln in text.splitlines(keepends=True) if XID_LINE_RE.search(ln))
    return text


def _not_permitted(res: RunResult) -> bool:
    err = res.stderr.lower()
    return res.status is RunStatus.FAILED and ("not permitted" in err or "permission denied" in err)


def _record(cmd: ProbeSpec, res: RunResult) -> tuple[CommandMeta, str | None]:
    """Meta for one command run and the text to write (``None``: no file)."""
    status, reason = res.status, res.reason
    if cmd.skip_exit_code is not None and res.returncode == cmd.skip_exit_code:
        status = RunStatus.SKIPPED
        reason = _skip_reason(res.stdout) or f"exit code {res.returncode} (not applicable on this node)"
    elif _not_permitted(res):
        status, reason = RunStatus.SKIPPED, f"not permitted: {res.stderr.strip()[:200]}"
    text: str | None = None
    if status is not RunStatus.SKIPPED and (res.stdout or status is RunStatus.OK):
        text = _filter(res.stdout, cmd.output_filter)
    meta = CommandMeta(
        file=cmd.file,
        argv=res.argv,
        source=ProbeSource.COMMAND,
        status=status,
        returncode=res.returncode,
        duration_s=res.duration_s,
        started_at=res.started_at or None,
        reason=reason,
        stderr_tail=res.stderr[-STDERR_TAIL_CHARS:] or None,
        stdout_dropped_bytes=res.stdout_dropped_bytes,
        left_behind=res.left_behind,
    )
    return meta, text


def _skip_reason(stdout: str) -> str | None:
    """The ``reason`` (or ``status``) of a JSON skip message (``{"status": "skipped", "reason": ...}``)."""
    try:
        doc = json.loads(stdout)
    except (json.JSONDecodeError, RecursionError):
        return None
    if isinstance(doc, dict):
        r = doc.get("reason") or doc.get("status")
        return str(r) if r is not None else None
    return None


class _ReplayWatch:
    """Passes runs through to ``runner`` and remembers whether any result was replayed."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.replayed = False

    def run(self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult:
        res = self.runner.run(argv, timeout_s=timeout_s, env=env)
        self.replayed = self.replayed or res.replayed
        return res


def _run_command(runner: Runner, cmd: ProbeSpec, python: str) -> tuple[CommandMeta, str | None]:
    return _record(cmd, runner.run(cmd.argv_for(python), timeout_s=cmd.timeout_s))


def _run_sysfs(collector: Callable[[Path], SysfsText], root: Path) -> tuple[CommandMeta, str | None]:
    t0, started = time.monotonic(), time.time()
    try:
        got = collector(root)
    except OSError as e:  # a sysfs directory that vanished or cannot be listed: recorded, not raised
        source = COLLECTOR_SOURCES[collector]
        meta = CommandMeta(
            file=source.value,
            source=ProbeSource.SYSFS,
            status=RunStatus.FAILED,
            duration_s=time.monotonic() - t0,
            started_at=started,
            reason=f"{type(e).__name__}: {e}",
        )
        return meta, None
    status = RunStatus.OK if got.text is not None else RunStatus.SKIPPED
    meta = CommandMeta(
        file=got.source.value,
        source=ProbeSource.SYSFS,
        status=status,
        duration_s=time.monotonic() - t0,
        started_at=started,
        reason=got.reason,
    )
    return meta, got.text


def _gpu_count(nvidia_smi_l: str | None) -> int:
    """GPUs listed by ``nvidia-smi -L`` (lines ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)``)."""
    if not nvidia_smi_l:
        return 0
    return sum(1 for ln in nvidia_smi_l.splitlines() if ln.startswith("GPU ") and "UUID" in ln)


def _standard(
    runner: Runner, level: Level, gpus: int, nccl_binary: str | None, python: str
) -> list[tuple[CommandMeta, str | None]]:
    """The catalog's standard-level commands (the micro-benchmark), then the nccl-tests sweep, one after the
    other (they must not share the GPUs)."""
    out = [_run_command(runner, c, python) for c in commands(level) if c.level is Level.STANDARD]
    name = NCCL_SWEEP_COLLECTIVE.binary
    if gpus == 0:
        skipped = CommandMeta(
            file=f"{name}.txt", argv=[name], status=RunStatus.SKIPPED, reason="no GPU listed by nvidia-smi -L"
        )
        return [*out, (skipped, None)]
    probe = nccl_sweep_probe(nccl_binary or name, gpus)
    if nccl_binary is None:
        reason = f"{name} not found (PATH, $NCCL_TESTS_HOME)"
        skipped = CommandMeta(file=probe.file, argv=list(probe.argv), status=RunStatus.SKIPPED, reason=reason)
        return [*out, (skipped, None)]
    return [*out, _run_command(runner, probe, python)]


def collect(
    runner: Runner,
    level: Level,
    host: str | None = None,
    *,
    sysfs_root: Path | None = Path("/"),
    nccl_binary: str | None = None,
    python: str = sys.executable,
    workers: int = DEFAULT_WORKERS,
    dcgm_level: int | None = None,
) -> BundleData:
    """Run the node commands of ``level`` through ``runner`` and return the bundle (nothing is written).

    Quick-level commands and sysfs collectors run concurrently on ``workers`` threads; the standard-level
    GPU work then runs sequentially. ``sysfs_root=None`` skips the sysfs collectors (replayed nodes);
    ``nccl_binary`` is the path of ``all_reduce_perf`` (found by the caller, e.g. with
    :func:`fleetdx.probes.nccl_tests_cmd.find_binary`), ``None`` records the sweep as skipped. At the standard
    and full levels the RDMA port counters are sampled twice, before and after the GPU work
    (``sysfs_infiniband_counters.txt``). ``dcgm_level`` (1-3, opt-in: the retest path, never the prolog) then runs
    ``dcgmi diag -r <level> -j`` and ``dcgmi health -c`` under hard deadlines
    (:func:`fleetdx.probes.catalog.dcgm_probes`); without ``dcgmi`` on PATH they are recorded ``skipped``.
    Never raises for a command that fails: every outcome is in ``commands``. Raises ``ValueError`` for a
    ``dcgm_level`` outside 1-3 (before running anything).
    """
    dcgm = dcgm_probes(dcgm_level) if dcgm_level is not None else []
    created = datetime.now(timezone.utc)
    watch = _ReplayWatch(runner)
    runner = watch
    results: list[tuple[CommandMeta, str | None]] = []
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="fleetdx-collect") as pool:
        futures = [
            pool.submit(_run_command, runner, c, python) for c in commands(level) if c.level is Level.QUICK
        ]
        if sysfs_root is not None:
            futures += [pool.submit(_run_sysfs, c, sysfs_root) for c in COLLECTORS]
        results = [f.result() for f in futures]
    if sysfs_root is None:
        results += [
            (
                CommandMeta(
                    file=src.value,
                    source=ProbeSource.SYSFS,
                    status=RunStatus.SKIPPED,
                    reason="sysfs not read (no sysfs root given)",
                ),
                None,
            )
            for src in SysfsSource
        ]
    standard = level in (Level.STANDARD, Level.FULL)
    ib_first = _ib_first(sysfs_root) if standard else None
    if standard:
        smi_l = next((t for m, t in results if m.file == SMI_LIST_FILE), None)
        results += _standard(runner, level, _gpu_count(smi_l), nccl_binary, python)
    results += [_run_command(runner, c, python) for c in dcgm]
    if sysfs_root is not None and ib_first is not None:
        results.append(_ib_counters(sysfs_root, ib_first))
    replayed = watch.replayed
    return BundleData(
        host=host or socket.gethostname(),
        created_at=created,
        level=level,
        replayed=replayed,
        files={m.file: t for m, t in results if t is not None},
        commands=[m for m, _ in results],
    )


def _check_names(data: BundleData) -> None:
    for name in data.files:
        if name == META_FILE or os.sep in name or name in ("", ".", "..") or name.startswith("."):
            raise BundleError(f"bad bundle file name {name!r}")


def _clear_previous(directory: Path) -> None:
    """Remove the files a previous bundle's ``meta.json`` lists (and the meta itself); nothing else."""
    meta_path = directory / META_FILE
    try:
        old = _Meta.model_validate_json(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValidationError, UnicodeDecodeError):
        raise BundleError(
            f"{directory}: not empty and holds no fleetdx meta.json; not replacing it"
        ) from None
    for c in old.commands:
        if os.sep not in c.file and c.file not in ("", ".", ".."):
            (directory / c.file).unlink(missing_ok=True)
    meta_path.unlink()


def check_target(directory: Path, *, replace: bool = False) -> None:
    """Raise :class:`BundleError` unless a bundle can be written to ``directory``: it must be absent (its missing
    parents are created; the nearest existing one must be a writable directory), an empty directory, or (with
    ``replace``) a directory holding a fleetdx bundle. Callers check before collecting, so
    minutes of probes are not lost to a typo in ``--out``."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise BundleError(f"{directory}: exists and is not a directory (give a new or empty directory)")
    if directory.is_dir() and any(directory.iterdir()):
        if not replace:
            raise BundleError(f"{directory}: not empty (use a new directory, or replace the bundle in it)")
        if not (directory / META_FILE).is_file():
            raise BundleError(f"{directory}: not empty and holds no fleetdx meta.json; not replacing it")
    # missing parents are created (``collect --out a/b/c``); the nearest one that exists must be a directory
    # we may write in, so a file in the way or a read-only tree is refused now, not after the probes
    ancestor = directory.resolve().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise BundleError(f"{ancestor}: exists and is not a directory (cannot create {directory} under it)")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise BundleError(f"{ancestor}: not writable (cannot create {directory} under it)")


def write_bundle(data: BundleData, directory: Path, *, replace: bool = False) -> Path:
    """Write ``data`` as a bundle directory (created if needed) and return the directory.

    A non-empty directory is refused unless ``replace``: then the files of the previous bundle (those its
    ``meta.json`` lists) are removed first, so no stale output of an earlier run is read as part of this one;
    any other file is left alone, and a non-empty directory without a fleetdx ``meta.json`` is refused.

    Raises:
        BundleError: a file name that would escape the directory; a non-empty directory (see above).
    """
    directory = Path(directory)
    _check_names(data)
    check_target(directory, replace=replace)
    if directory.is_dir() and any(directory.iterdir()):
        _clear_previous(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in data.files.items():
        (directory / name).write_text(text, encoding="utf-8")
    meta = _Meta(**data.model_dump(exclude={"files", "unreadable"}))
    (directory / META_FILE).write_text(meta.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return directory


def _read_entry(path: Path, max_bytes: int | None) -> str:
    """One bundle file under the rules of :func:`fleetdx.probes.rawfile.read_raw`, with the size limit and line
    filter of the catalog row that reads it (``max_bytes`` overrides the limit)."""
    rows = [r for r in rows_reading(path.name) if r.parser is not None]
    parser = rows[0].parser if rows else None
    limit = max_bytes if max_bytes is not None else (parser.max_bytes if parser else DEFAULT_MAX_BYTES)
    return read_raw(path, limit, keep=parser.keep if parser else None)


def read_bundle(directory: Path, max_bytes: int | None = None) -> BundleData:
    """Read a bundle directory (with or without ``meta.json``).

    Each file is read under :func:`fleetdx.probes.rawfile.read_raw`'s rules (``max_bytes`` overrides the
    per-kind size limits); an entry that cannot be read -- a symlink loop, a FIFO, a subdirectory, a file
    without read permission or over its limit -- lands in :attr:`BundleData.unreadable` with the reason.

    Raises:
        BundleError: the directory does not exist, is not a directory, holds nothing, or has a meta.json that
            is not valid.
    """
    directory = Path(directory)
    if not directory.exists():
        raise BundleError(f"{directory}: does not exist")
    if not directory.is_dir():
        raise BundleError(f"{directory}: not a bundle directory (a bundle is a directory of raw outputs)")
    files: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    try:
        entries = sorted(p for p in directory.iterdir() if p.name != META_FILE and not p.name.startswith("."))
    except OSError as e:
        raise BundleError(f"{directory}: cannot list the bundle: {e.strerror}") from None
    for p in entries:
        try:
            files[p.name] = _read_entry(p, max_bytes)
        except RawFileError as e:
            unreadable[p.name] = str(e).removeprefix(f"{p}: ")
    meta_path = directory / META_FILE
    if meta_path.is_file():
        try:
            meta = _Meta.model_validate_json(read_raw(meta_path))
        except (ValidationError, RawFileError) as e:
            raise BundleError(f"{meta_path}: invalid meta.json: {str(e).splitlines()[0]}") from None
        return BundleData(**meta.model_dump(), files=files, unreadable=unreadable)
    if not files and not unreadable:
        raise BundleError(f"{directory}: no raw files and no meta.json")
    commands = [CommandMeta(file=name, source=ProbeSource.FILE, status=RunStatus.OK) for name in files]
    return BundleData(host=directory.resolve().name, files=files, commands=commands, unreadable=unreadable)


def find_raw_file(bundle_dir: Path, argv: Sequence[str]) -> Path | None:
    """The raw file holding the output of ``argv`` in ``bundle_dir``, or ``None``.

    Looked up in order: the ``meta.json`` entry with this exact argv; the registry's file name for it; the
    name derived by :func:`fleetdx.probes.catalog.file_name_for_argv` with any of :data:`RAW_EXTENSIONS`.
    """
    bundle_dir = Path(bundle_dir)
    argv = [str(a) for a in argv]
    meta_path = bundle_dir / META_FILE
    if meta_path.is_file():
        try:
            meta = _Meta.model_validate_json(meta_path.read_text(encoding="utf-8"))
        except (ValidationError, UnicodeDecodeError):
            meta = None
        for c in meta.commands if meta else []:
            if c.argv == argv and c.status is not RunStatus.SKIPPED and (bundle_dir / c.file).is_file():
                return bundle_dir / c.file
    cmd = spec_for_argv(argv)
    if cmd is not None and (bundle_dir / cmd.file).is_file():
        return bundle_dir / cmd.file
    stem = file_name_for_argv(argv)
    for ext in RAW_EXTENSIONS:
        name = stem + ext
        # a name over NAME_MAX (255 bytes) cannot exist, and stat() on it raises ENAMETOOLONG
        if len(name.encode()) <= 255 and (p := bundle_dir / name).is_file():
            return p
    return None
