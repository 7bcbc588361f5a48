"""Parser for nccl-tests output: the text tables of every version and the ``-J`` JSON file.

Input: the captured stdout (+stderr) of one or several ``*_perf`` runs as a console shows it, or the JSON
file written by ``-J`` (autodetected: the text starts with ``{``).

Text handled (NVIDIA/nccl-tests ``src/common.cu`` history; see tests/fixtures/nccl/README.md):

* the pre-2.13 table (``size count type redop time algbw busbw error ...``: ``error`` a float max
  deviation, ``root`` only for rooted collectives, ``redop`` blank for non-reducing ones) and the 2.13+
  table (``redop root ... #wrong``: ``#wrong`` an integer count, ``N/A`` with ``-c 0``);
* extra per-side columns: ``-I`` (``i_min i_max i_p99 i_cv%``), ``-C`` (``cputime``), ``-S`` (a trailing
  ``%Y-%m-%d %H:%M:%S`` timestamp); ``-d all`` (several ``type`` values in one table);
* several runs in one file (consecutive commands), and the processes of a build without MPI, each
  printing its own one-rank table, possibly interleaved;
* launcher prefixes (Open MPI ``--tag-output`` ``[1,0]<stdout>:``, ``srun -l`` ``0: ``), NCCL INFO/WARN
  and MPI noise between lines, pasted text whose ``#`` was stripped or whose blanks were collapsed;
* runs without a footer (hang, crash, cut capture): ``complete`` is ``False``, never an exception;
* error lines (``Test NCCL failure``, ``Test CUDA failure``, ``Test failure``, ``Test timeout``,
  ``Invalid number of GPUs``) and the MPI launcher's abort messages.

Units: sizes in bytes, times in microseconds, algbw/busbw in GB/s with GB = 1e9 B, as nccl-tests prints.
Errors: only :class:`fleetdx.probes.errors.ParseError` (format ``"nccl-tests"`` or ``"nccl-tests-json"``): text
with nothing recognisable, a data row that does not fit its column header, malformed JSON.
"""

from __future__ import annotations

import bisect
import heapq
import json
import math
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from fleetdx.probes.contracts import Collective, Contract
from fleetdx.probes.errors import ParseError

FMT_TEXT = "nccl-tests"
FMT_JSON = "nccl-tests-json"


_FACTOR_N_MINUS_1_OVER_N = frozenset(
    {
        Collective.ALL_GATHER,
        Collective.REDUCE_SCATTER,
        Collective.ALLTOALL,
        Collective.ALLTOALLV,
        Collective.GATHER,
        Collective.SCATTER,
    }
)


def busbw_factor(collective: Collective, nranks: int) -> float:
    """busbw / algbw of ``collective`` on ``nranks`` ranks (nccl-tests ``doc/PERFORMANCE.md``).

    all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall(v), gather, scatter (n-1)/n; broadcast,
    reduce, sendrecv, hypercube 1. Raises ``ValueError`` for ``nranks < 1``.
    """
    if nranks < 1:
        raise ValueError(f"nranks must be >= 1, got {nranks}")
    if collective is Collective.ALL_REDUCE:
        return 2.0 * (nranks - 1) / nranks
    if collective in _FACTOR_N_MINUS_1_OVER_N:
        return (nranks - 1) / nranks
    return 1.0


def collective_from_name(name: str) -> Collective | None:
    """The collective named by a binary or bundle file name (``all_reduce_perf_-b8.txt`` -> all_reduce)."""
    m = _PERF_RE.search(name)
    return _collective_of(m.group(1)) if m else None


class PerIterStats(Contract):
    """Per-iteration CUDA-event timing of one row side (``-I``), in µs; text gives min/max/p99/cv only."""

    min_us: float | None = None
    max_us: float | None = None
    p99_us: float | None = None
    cv_pct: float | None = None
    avg_us: float | None = None
    p50_us: float | None = None
    p95_us: float | None = None
    stdev_us: float | None = None
    skipped_iterations: int | None = None
    times_us: list[float] = Field(default_factory=list)


class Timing(Contract):
    """One side (out-of-place or in-place) of a table row.

    ``time_us``: mean time per operation (µs); ``algbw_gbps`` = size / time and ``busbw_gbps`` = algbw x
    factor, GB/s (1e9 B/s). ``wrong``: the 2.13+ ``#wrong`` element count (``None`` for ``N/A``, i.e.
    unchecked, and in the old format); ``error``: the pre-2.13 float max deviation. With ``-C`` the time
    column is ``cputime`` (CPU time per operation): ``time_us`` holds it and ``cputime_us`` says so. A value
    printed as ``nan``/``inf`` reads as ``None``: no number was measured.
    """

    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None = None
    error: float | None = None
    cputime_us: float | None = None
    per_iter: PerIterStats | None = None


class Row(Contract):
    """One table row: ``size`` in bytes (the total S of PERFORMANCE.md), ``count`` elements per rank."""

    size: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: Timing
    in_place: Timing | None
    timestamp: str | None = None  #: ``-S`` column, ``%Y-%m-%d %H:%M:%S`` as printed


class Device(Contract):
    """One ``#  Rank r Group g Pid p on host device d [bus] name`` line (``bus_id`` as printed)."""

    rank: int
    group: int | None = None
    pid: int
    host: str
    device: int  #: CUDA device index on the host
    bus_id: str  #: ``0x1b`` (old) or ``0000:1b:00`` (BDF, 2025-02+)
    gpu_name: str


NranksSource = Literal["devices", "busbw_ratio"]


class NcclTestsRun(Contract):
    """One table: of one ``*_perf`` process, or of the whole job when built with ``MPI=1``.

    ``complete``: the ``# Avg bus bandwidth`` footer was printed. ``non_mpi_build``: processes that were
    meant to form one job each ran alone (one-rank tables). ``out_of_bounds``: the footer's count of
    (size x placement) tests with wrong values. ``avg_busbw_gbps``: the footer's mean busbw over all rows
    and both placements. ``last_lines``: the last lines seen while the run was open (hang evidence).
    ``aborted``: a process of the run aborted or died on a signal (``errors`` holds the lines that say so,
    even when it happened before nccl-tests printed anything: a run with no rows); ``signal``: that
    signal, ``"Aborted (6)"``, when a line named it. ``headerless``: the rows came without their column
    header (pasted or filtered output): the layout was read from the rows themselves.
    """

    collective: Collective | None
    nranks: int | None
    nranks_source: NranksSource | None = None
    complete: bool
    non_mpi_build: bool = False
    rows: list[Row] = Field(default_factory=list)
    avg_busbw_gbps: float | None = None
    #: ``OK``/``FAILED`` printed after the average when ``NCCL_TESTS_MIN_BW`` is set
    avg_busbw_ok: bool | None = None
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    nccl_tests_version: str | None = None
    nccl_version: str | None = None  #: ``2.18.3+cuda12.2`` (text) or ``2.28.9`` (JSON code 22809)
    nthreads: int | None = None
    ngpus: int | None = None
    devices: list[Device] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    last_lines: list[str] = Field(default_factory=list)
    aborted: bool = False
    signal: str | None = None
    headerless: bool = False

    def _sides(self) -> list[Timing]:
        return [t for r in self.rows for t in (r.out_of_place, r.in_place) if t is not None]

    @property
    def peak_busbw_gbps(self) -> float | None:
        """Largest busbw of any row, out-of-place or in-place (GB/s); ``None`` without a measured row."""
        values = [t.busbw_gbps for t in self._sides() if t.busbw_gbps is not None]
        return max(values) if values else None

    @property
    def wrong_total(self) -> int:
        """Sum of ``#wrong`` over every row and side (0 when unchecked or in the old format)."""
        return sum(t.wrong for t in self._sides() if t.wrong is not None)

    @property
    def max_error(self) -> float | None:
        """Largest pre-2.13 ``error`` value of any row and side; ``None`` when none was printed."""
        values = [t.error for t in self._sides() if t.error is not None]
        return max(values) if values else None


class NcclTestsReport(Contract):
    """Every run found in one capture, and its error lines (``Test NCCL failure ...``) in printed order."""

    source_format: Literal["text", "json"] = "text"
    runs: list[NcclTestsRun] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    #: NCCL_* settings the capture shows: assignments on its command line (``-x NCCL_IB_DISABLE=1``,
    #: ``NCCL_DEBUG=INFO ./all_reduce_perf``, ``export ...``) and NCCL's own ``NCCL_X set by environment to Y``
    env: dict[str, str] = Field(default_factory=dict)


# ----------------------------------------------------------------------------------------------- text

#: launcher prefixes, stripped one after the other in any order and any number (a job launcher's
#: ``(name, rank=N, pid=P)`` before an MPI tag, a log collector's timestamp before both)
_PREFIX_RES = (
    re.compile(r"^\x1b\[[0-9;]*m"),  # ANSI colour (Ray colours its prefix)
    re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:"),  # Open MPI --tag-output
    re.compile(r"^\s{0,3}\d+:\s"),  # srun -l / --label
    re.compile(r"^\s?\((?:[A-Za-z_][\w.\-]*(?:,\s*|\s+))?\w+=[^\s,()]*(?:,\s*\w+=[^\s,()]*)*\)\s?"),  # Ray, launchers
    re.compile(r"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?:?\s"),  # ISO 8601 time
    re.compile(r"^\[\d+\]\s"),  # MPICH / Intel MPI -prepend-rank (-l)
)
_MAX_PREFIXES = 16
#: an NCCL_* assignment on a command line, or NCCL's own report of one
_ENV_ASSIGN_RE = re.compile(r"(?:^|[\s'\"=,])(NCCL_[A-Z0-9_]+)=((?:[^\s'\",;]|,(?![A-Z][A-Z0-9_]*=))+)")
_ENV_REPORTED_RE = re.compile(r"\b(NCCL_[A-Z0-9_]+) set by environment to ([^\s.]+(?:\.[^\s.]+)*)")
_BANNER_RE = re.compile(r"^#?\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+\d+")
_VERSION_RE = re.compile(r"^#?\s*nccl-tests version\s+(\S+)")
_STARTING_RE = re.compile(r"^#?\s*Collective test starting:\s*(\S+)")
_DEVICE_RE = re.compile(
    r"^#?\s*Rank\s+(\d+)(?:\s+Group\s+(\d+))?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
    r"\s+\[([^\]]*)\]\s*(.*?)\s*$"
)
_OOB_RE = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?")
_AVG_RE = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
#: the library's version banner: ``NCCL version 2.18.3+cuda12.2``, RCCL's ``RCCL version 2.18.3+hip6.0
#: develop:7e1cbb4`` (a branch:hash may follow) and ``RCCL version : 2.28.3-gfx1151-rccl:a188cf2``
LIB_VERSION_RE = re.compile(r"^[NR]CCL version\s*:?\s*(\d+\.\d+\.\d+\S*)")
_BARE_VERSION_RE = re.compile(LIB_VERSION_RE.pattern + r"(?:\s+\S+:\S+)?\s*$")
_INFO_VERSION_RE = re.compile(r"NCCL INFO " + LIB_VERSION_RE.pattern.removeprefix("^"))
#: a collective's binary name (``all_reduce_perf``, ``alltoall_perf_mpi``); the name is at most 40 characters, so a
#: line of underscores costs each start position 40 steps, not the rest of the line (linear, issue 21)
_PERF_RE = re.compile(r"(?:^|[/\s_#.])([a-z_]{1,40}?)_perf(?:_mpi)?(?![A-Za-z0-9])")
_NP_RE = re.compile(r"\b(?:mpirun|mpiexec|srun)\b.*?\s(?:-np|-n|--np|--ntasks)[\s=](\d+)")
_ERROR_RES = (
    re.compile(r"Test (?:NCCL|CUDA) failure"),
    re.compile(r"Test failure"),
    re.compile(r"Test timeout"),
    re.compile(r"Invalid number of GPUs"),
    re.compile(r"mpirun was unable to launch"),
    re.compile(r"mpirun noticed that process rank"),
    re.compile(r"mpirun detected that one or more processes exited with non-zero status"),
)
#: signals by the names the C library and Slurm print (``signal(7)``)
_SIGNALS = {
    "Illegal instruction": 4,
    "Aborted": 6,
    "Bus error": 7,
    "Floating point exception": 8,
    "Killed": 9,
    "Segmentation fault": 11,
}
_SIGNAL_NAMES = "|".join(_SIGNALS)
#: lines of a process that died on a signal or aborted: Open MPI's signal handler (``*** Process received
#: signal ***``, ``Signal: Aborted (6)``), ``mpirun``'s and ``srun``'s notices, a failed assertion (libfabric,
#: MPI), ``MPI_ABORT``, a C++ ``terminate``, the shell's ``Aborted (core dumped)``
_ABORT_RES = (
    re.compile(r"\*\*\* Process received signal \*\*\*"),
    re.compile(r"\bSignal: (?P<name>[A-Z][A-Za-z ]*?) \((?P<num>\d+)\)"),
    re.compile(r"\bexited on signal (?P<num>\d+) \((?P<name>[^)]+)\)"),
    re.compile(rf"^srun: error: \S+: tasks? [\d,\-]+: (?P<name>{_SIGNAL_NAMES})\b"),
    re.compile(rf"\b(?P<name>{_SIGNAL_NAMES}) \(core dumped\)"),
    re.compile(r"\bAssertion [`'].*' failed\b"),
    re.compile(r"\bMPI_ABORT was invoked\b"),
    re.compile(r"\bis aborting the MPI job\b"),
    re.compile(r"^terminate called after throwing an instance of\b"),
)
#: substrings one of which every match of ``_ABORT_RES`` holds (checked first: most lines hold none)
_ABORT_KEYS = ("ignal", "srun: error", "core dumped", "Assertion", "MPI_ABORT", "aborting the MPI", "terminate called")
#: the ``[host:pid] `` Open MPI's signal handler puts before each of its lines: one message per process
HANDLER_PREFIX_RE = re.compile(r"^\[[^\]\s]+:\d+\]\s*")
#: a backtrace frame, ``[host:pid] [ 3] /lib64/libc.so.6(abort+0xd7)[0x7fd0e64287f3]`` (glibc
#: ``backtrace_symbols``): never a command line, even when it names the ``*_perf`` binary
#: a backtrace frame at the end of a line: ``libnccl.so.2(+0x4f2c1) [0x7f...]``. Searched without a leading ``\S*``
#: (it matched nothing a search needs and made a long unbroken line quadratic: issue 21)
_FRAME_RE = re.compile(r"\([^()\s]*\)\s?\[0x[0-9a-fA-F]+\]\s*$")
_NOISE_RE = re.compile(r"NCCL (?:INFO|WARN|TRACE)")
_ROW_START_RE = re.compile(r"^\s*\d+\s+\d+\s+\S")
_TIME_COLS = ("time", "cputime")
_LAST_LINES = 8
#: the most runs open at once (processes of a build without MPI printing together); past it the oldest open
#: run is closed, so no line costs more than this many steps (issue 21: headerless restarted sweeps opened a
#: run per restart and parsing went quadratic)
_MAX_OPEN = 256
#: data types and reduction operations nccl-tests prints in its ``type``/``redop`` columns (``src/common.cu``
#: ``test_typenames``/``test_opnames``, older names included): a header-less row must use them
_TYPES = frozenset(
    {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3",
     "f8e5m2", "char", "int"}
)
_REDOPS = frozenset({"sum", "prod", "max", "min", "avg", "mulsum", "premulsum", "none"})
_DATE_RE = re.compile(r"^\d{4}-\d\d-\d\d$")
_CLOCK_RE = re.compile(r"^\d\d:\d\d:\d\d$")


def clean_line(raw: str) -> str:
    """``raw`` without its launcher prefixes and with every run of blanks folded to one space: pasted output
    re-spaces lines at will. Prefixes (Open MPI ``--tag-output`` ``[1,0]<stdout>:``, ``srun -l`` ``0: ``,
    Ray and job launchers ``(name, rank=N, pid=P)``, MPICH ``[0] ``, ISO 8601 timestamps, ANSI colours) may
    be stacked in any order. Shared by the nccl-tests and NCCL log parsers."""
    for _ in range(_MAX_PREFIXES):
        for rx in _PREFIX_RES:
            m = rx.match(raw)
            if m:
                raw = raw[m.end() :].lstrip(" \t")  # blanks between stacked prefixes
                break
        else:
            break
    return " ".join(raw.split())


def abort_signal(body: str) -> str | None:
    """For a line telling that a process aborted or died on a signal: the signal as ``"Aborted (6)"``, or
    ``""`` when the line names none (an assertion, ``MPI_ABORT``); ``None`` for any other line."""
    if not any(k in body for k in _ABORT_KEYS):
        return None
    for rx in _ABORT_RES:
        m = rx.search(body)
        if m is None:
            continue
        names = m.groupdict()
        name = (names.get("name") or "").strip()
        num = names.get("num") or (str(_SIGNALS[name]) if name in _SIGNALS else None)
        return f"{name} ({num})" if name and num else name
    return None


def _number(tok: str, lineno: int, what: str, raw: str) -> float | None:
    """A printed float; ``nan``/``inf`` -> ``None`` (no measurement); anything else -> ParseError."""
    try:
        value = float(tok)
    except ValueError:
        raise ParseError(FMT_TEXT, lineno, f"a number for {what}", raw) from None
    return value if math.isfinite(value) else None


def _integer(tok: str, lineno: int, what: str, raw: str) -> int:
    try:
        return int(tok)
    except ValueError:
        raise ParseError(FMT_TEXT, lineno, f"an integer for {what}", raw) from None


@dataclass
class _Layout:
    """Column layout read from a ``size count type redop [root] time ...`` header line."""

    has_redop: bool
    has_root: bool
    sides: list[list[str]]  #: column names of each side, e.g. ["time", "algbw", "busbw", "#wrong"]
    timestamp: bool

    @property
    def ntokens(self) -> int:
        prefix = 3 + int(self.has_redop) + int(self.has_root)
        return prefix + sum(len(s) for s in self.sides) + (2 if self.timestamp else 0)


def _read_header(line: str) -> _Layout | None:
    """The layout of a column header line, or ``None`` if ``line`` is not one."""
    toks = line.lstrip("#").split()
    if len(toks) < 6 or toks[:3] != ["size", "count", "type"] or "busbw" not in toks:
        return None
    i = 3
    has_redop = toks[i] == "redop"
    i += int(has_redop)
    has_root = i < len(toks) and toks[i] == "root"
    i += int(has_root)
    sides: list[list[str]] = []
    timestamp = False
    for tok in toks[i:]:
        if tok in _TIME_COLS and (not sides or "busbw" in sides[-1]):
            sides.append([tok])
        elif tok == "timestamp":
            timestamp = True
        elif sides:
            sides[-1].append(tok)
        else:
            return None
    if not sides or len(sides) > 2 or any({"algbw", "busbw"} - set(s) for s in sides):
        return None
    return _Layout(has_redop, has_root, sides, timestamp)


def _wrong_count(tok: str, lineno: int, raw: str) -> int:
    value = _number(tok, lineno, "#wrong", raw)
    if value is None or value < 0 or value != int(value):
        raise ParseError(FMT_TEXT, lineno, "a non-negative integer or N/A for #wrong", raw)
    return int(value)


def _read_side(names: list[str], toks: list[str], lineno: int, raw: str) -> Timing:
    values: dict[str, float | None] = {}
    wrong: int | None = None
    error: float | None = None
    for name, tok in zip(names, toks, strict=True):
        if name == "#wrong":
            wrong = None if tok == "N/A" else _wrong_count(tok, lineno, raw)
        elif name == "error":
            error = None if tok == "N/A" else _number(tok, lineno, "error", raw)
        else:
            values[name] = _number(tok, lineno, name, raw)
    per_iter = None
    if any(k.startswith("i_") for k in values):
        per_iter = PerIterStats(
            min_us=values.get("i_min"),
            max_us=values.get("i_max"),
            p99_us=values.get("i_p99"),
            cv_pct=values.get("i_cv%"),
        )
    return Timing(
        time_us=values.get("time", values.get("cputime")),
        algbw_gbps=values.get("algbw"),
        busbw_gbps=values.get("busbw"),
        wrong=wrong,
        error=error,
        cputime_us=values.get("cputime"),
        per_iter=per_iter,
    )


def _blank_redop(layout: _Layout, toks: list[str]) -> bool:
    """Pre-2.13 tables leave ``redop`` blank for non-reducing collectives (alltoall, all_gather)."""
    if not layout.has_redop or len(toks) != layout.ntokens - 1 or len(toks) < 4:
        return False
    try:
        float(toks[3])
    except ValueError:
        return False
    return True


def _read_row(layout: _Layout, toks: list[str], lineno: int, raw: str) -> Row:
    blank_redop = _blank_redop(layout, toks)
    if len(toks) != layout.ntokens and not blank_redop:
        raise ParseError(FMT_TEXT, lineno, f"{layout.ntokens} columns as the header announced", raw)
    with_redop = layout.has_redop and not blank_redop
    i = 3 + int(with_redop)
    root = _integer(toks[i], lineno, "root", raw) if layout.has_root else None
    i += int(layout.has_root)
    sides: list[Timing] = []
    for names in layout.sides:
        sides.append(_read_side(names, toks[i : i + len(names)], lineno, raw))
        i += len(names)
    return Row(
        size=_integer(toks[0], lineno, "size", raw),
        count=_integer(toks[1], lineno, "count", raw),
        type=toks[2],
        redop=toks[3] if with_redop else None,
        root=root,
        out_of_place=sides[0],
        in_place=sides[1] if len(sides) > 1 else None,
        timestamp=" ".join(toks[i : i + 2]) if layout.timestamp else None,
    )


@dataclass
class _Builder:
    """A run being read; turned into an :class:`NcclTestsRun` at the end."""

    group: int  #: runs started by the same launch share a group (concurrent processes)
    collective: Collective | None
    launcher_np: int | None
    nccl_tests_version: str | None
    nccl_version: str | None
    nthreads: int | None = None
    ngpus: int | None = None
    layout: _Layout | None = None
    devices: list[Device] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    avg: float | None = None
    avg_ok: bool | None = None
    complete: bool = False
    closed: bool = False
    errors: list[str] = field(default_factory=list)
    error_keys: set[str] = field(default_factory=set)
    last_lines: list[str] = field(default_factory=list)
    aborted: bool = False
    signal: str | None = None
    headerless: bool = False
    first_row_line: int | None = None
    last_row_line: int | None = None
    seq: int = 0  #: creation order
    first_note: int = 0  #: the parser's count of noted lines when this run opened (its own lines follow)
    ranks: set[int] = field(default_factory=set)  #: ``devices``' ranks


class _Tables:
    """The open runs that have a column layout (tables taking rows), indexed so that :func:`_row_owner`'s
    choice costs O(log n) per row instead of a scan of every open table.

    Entries are pushed when a table opens or takes a row and checked when read (lazy deletion): an entry is
    stale once its run is closed or has taken another row. Each entry is popped at most once, so the work is
    linear in rows.
    """

    def __init__(self) -> None:
        self.count = 0  #: open tables
        self.headed = 0  #: open tables that came with their column header
        self.fresh: list[tuple[int, _Builder]] = []  #: heap by seq: tables without rows
        self.last_sizes: list[int] = []  #: sorted keys of ``by_last``
        self.by_last: dict[int, list[tuple[int, _Builder]]] = {}  #: last row's size -> heap by seq
        self.by_type: dict[str, list[tuple[int, _Builder]]] = {}  #: last row's type -> heap by seq
        self.by_len: list[tuple[int, int, _Builder]] = []  #: heap by (rows, seq)

    def add(self, b: _Builder) -> None:
        """``b`` has just got its layout (and ``headerless``)."""
        self.count += 1
        self.headed += not b.headerless
        heapq.heappush(self.fresh, (b.seq, b))

    def closed(self, b: _Builder) -> None:
        """``b``, a table, has just been closed."""
        self.count -= 1
        self.headed -= not b.headerless

    def took_row(self, b: _Builder) -> None:
        """``b`` has just appended a row."""
        row = b.rows[-1]
        if row.size not in self.by_last:
            self.by_last[row.size] = []
            bisect.insort(self.last_sizes, row.size)
        heapq.heappush(self.by_last[row.size], (b.seq, b))
        heapq.heappush(self.by_type.setdefault(row.type, []), (b.seq, b))
        heapq.heappush(self.by_len, (len(b.rows), b.seq, b))

    @staticmethod
    def _top(heap: list[tuple[int, _Builder]], valid: Callable[[_Builder], bool]) -> _Builder | None:
        while heap and (heap[0][1].closed or not valid(heap[0][1])):
            heapq.heappop(heap)
        return heap[0][1] if heap else None

    def _last_below(self, size: int) -> _Builder | None:
        """The first-opened table among those whose last row is the largest below ``size``."""
        i = bisect.bisect_left(self.last_sizes, size)
        while i > 0:
            i -= 1
            key = self.last_sizes[i]
            found = self._top(self.by_last[key], lambda b, k=key: b.rows[-1].size == k)  # type: ignore[misc]
            if found is None:
                del self.by_last[key]
                del self.last_sizes[i]
                continue
            if key == 1 and 0 in self.by_last:  # size / 0 reads as size / 1 (see _row_owner)
                zero = self._top(self.by_last[0], lambda b: b.rows[-1].size == 0)
                if zero is not None and zero.seq < found.seq:
                    return zero
            return found
        return None

    def owner(self, size: int, dtype: str) -> _Builder | None:
        """What :func:`_row_owner` returns for the open tables, in O(log n) amortised."""
        growing = self._last_below(size)
        if growing is not None:
            return growing
        fresh = self._top(self.fresh, lambda b: not b.rows)
        if fresh is not None:
            return fresh
        if self.headed == 0:
            other = [
                top
                for t, heap in self.by_type.items()
                if t != dtype and (top := self._top(heap, lambda b, t=t: b.rows[-1].type == t)) is not None  # type: ignore[misc]
            ]
            return min(other, key=lambda b: b.seq, default=None)
        while self.by_len and (self.by_len[0][2].closed or len(self.by_len[0][2].rows) != self.by_len[0][0]):
            heapq.heappop(self.by_len)
        return self.by_len[0][2] if self.by_len else None


def _collective_of(name: str) -> Collective | None:
    try:
        return Collective(name)
    except ValueError:
        return None


class _TextParser:
    """Line state machine over a whole capture; see the module docstring for what it accepts."""

    def __init__(self, collective_hint: Collective | None) -> None:
        self.hint = collective_hint
        self.builders: list[_Builder] = []
        self.errors: list[str] = []
        self.env: dict[str, str] = {}
        self.recognised = False
        self.group = 0
        self.continuation = False
        self.pending_collective: Collective | None = None
        self.pending_np: int | None = None
        self.pending_version: str | None = None
        self.pending_nccl_version: str | None = None
        self.error_keys: set[str] = set()
        #: a command started a launch that printed nothing of its own yet
        self.launch_pending = False
        #: the run made for error lines of a launch that failed before its banner (closed, no rows)
        self.failed_launch: _Builder | None = None
        #: the open runs by seq, in creation order; those with a layout are also in ``tables``
        self.opened: dict[int, _Builder] = {}
        self.tables = _Tables()
        #: open runs without a layout yet, oldest first (closed or laid-out ones are dropped when met)
        self.waiting: deque[_Builder] = deque()
        #: the last lines noted, and how many were: a run's ``last_lines`` are the ones noted while it was open
        self.recent: deque[str] = deque(maxlen=_LAST_LINES)
        self.noted = 0

    def _open(self) -> list[_Builder]:
        return list(self.opened.values())

    def _first_waiting(self) -> _Builder | None:
        """The oldest open run still without a column layout."""
        while self.waiting and (self.waiting[0].closed or self.waiting[0].layout is not None):
            self.waiting.popleft()
        return self.waiting[0] if self.waiting else None

    def _set_layout(self, b: _Builder, layout: _Layout, headerless: bool) -> None:
        b.layout = layout
        b.headerless = headerless
        self.tables.add(b)

    def _close(self, b: _Builder) -> None:
        if b.closed:
            return
        b.closed = True
        self.opened.pop(b.seq, None)
        if b.layout is not None:
            self.tables.closed(b)
        seen = min(self.noted - b.first_note, len(self.recent))
        b.last_lines = list(self.recent)[len(self.recent) - seen :] if seen > 0 else []

    def _close_all(self) -> None:
        for b in list(self.opened.values()):
            self._close(b)

    def _new_builder(self) -> _Builder:
        b = _Builder(
            group=self.group,
            collective=self.pending_collective,
            launcher_np=self.pending_np,
            nccl_tests_version=self.pending_version,
            nccl_version=self.pending_nccl_version,
            seq=len(self.builders),
            first_note=self.noted,
        )
        self.pending_version = None
        self.pending_nccl_version = None
        self.launch_pending = False
        self.failed_launch = None
        self.builders.append(b)
        self.opened[b.seq] = b
        self.waiting.append(b)
        if len(self.opened) > _MAX_OPEN:
            self._close(next(iter(self.opened.values())))
        return b

    def feed(self, lineno: int, raw_line: str) -> None:
        body = clean_line(raw_line)
        if not body:
            return
        if "NCCL_" in body:
            for env_match in (*_ENV_ASSIGN_RE.finditer(body), *_ENV_REPORTED_RE.finditer(body)):
                self.env[env_match.group(1)] = env_match.group(2)
        if _NOISE_RE.search(body):
            self.recognised = True
            m = _INFO_VERSION_RE.search(body)
            if m:
                self._set_nccl_version(m.group(1))
            return
        self.recent.append(body)
        self.noted += 1
        signal = abort_signal(body)
        if signal is not None or any(rx.search(body) for rx in _ERROR_RES):
            self._error(body, signal)
            return
        if _FRAME_RE.search(body):
            return  # a backtrace frame
        handlers = (self._banner, self._version, self._starting, self._device, self._footer, self._header)
        for handler in handlers:
            if handler(body):
                self.recognised = True
                return
        m = _BARE_VERSION_RE.match(body)
        if m:
            self.recognised = True
            self._set_nccl_version(m.group(1))
        elif _ROW_START_RE.match(body):
            self._row(lineno, body)
        else:
            self._command(body)

    def _error(self, body: str, signal: str | None) -> None:
        """An error line; ``signal`` is not ``None`` for an abort (see :func:`abort_signal`). Each message is
        kept once: an abort's lines once whatever process printed them (``[host:pid]`` aside)."""
        self.recognised = True
        key = body if signal is None else HANDLER_PREFIX_RE.sub("", body)
        if key not in self.error_keys:
            self.error_keys.add(key)
            self.errors.append(body)
        for b in self._error_target():
            if key not in b.error_keys:
                b.error_keys.add(key)
                b.errors.append(body)
            if signal is None:
                continue
            b.aborted = True
            b.signal = b.signal or signal or None
            named = _PERF_RE.search(body)
            if b.collective is None and named:
                b.collective = _collective_of(named.group(1))

    def _error_target(self) -> list[_Builder]:
        """The run an error line belongs to: the last open one; else the run of a launch that failed before
        printing anything (made here: no rows, closed), when a command started a launch since the last run
        or no run was seen at all; else the last run (a launcher's message after its footer)."""
        opened = self._open()
        if opened:
            return opened[-1:]
        if self.failed_launch is not None:
            return [self.failed_launch]
        if self.builders and not self.launch_pending:
            return self.builders[-1:]
        self.group += 1
        b = self._new_builder()
        self._close(b)
        self.failed_launch = b
        return [b]

    def _banner(self, body: str) -> bool:
        m = _BANNER_RE.match(body)
        if not m:
            return False
        for b in self._open():
            if b.rows or b.complete or b.layout is not None:
                self._close(b)  # a new table after a started one: the old one ended without footer
        if not self.opened:
            self.group += 1
        b = self._new_builder()
        b.nthreads, b.ngpus = int(m.group(1)), int(m.group(2))
        b.first_note -= 1  # the banner line is the run's own
        return True

    def _version(self, body: str) -> bool:
        m = _VERSION_RE.match(body)
        if m:
            self.pending_version = m.group(1)
        return m is not None

    def _starting(self, body: str) -> bool:
        m = _STARTING_RE.match(body)
        if m:
            name = m.group(1).removesuffix("_mpi").removesuffix("_perf")
            self.pending_collective = _collective_of(name) or self.pending_collective
        return m is not None

    def _device(self, body: str) -> bool:
        m = _DEVICE_RE.match(body)
        if not m:
            return False
        dev = Device(
            rank=int(m.group(1)),
            group=int(m.group(2)) if m.group(2) is not None else None,
            pid=int(m.group(3)),
            host=m.group(4),
            device=int(m.group(5)),
            bus_id=m.group(6),
            gpu_name=m.group(7),
        )
        # concurrent one-rank processes each list "Rank 0": give each to the first run still without it
        candidates = [b for b in self._open() if b.group == self.group] or [self._new_builder()]
        target = next((b for b in candidates if dev.rank not in b.ranks), candidates[-1])
        target.devices.append(dev)
        target.ranks.add(dev.rank)
        return True

    def _header(self, body: str) -> bool:
        layout = _read_header(body)
        if layout is None:
            return False
        target = self._first_waiting()
        if target is None:  # a table without banner (pasted fragment)
            self._close_all()
            self.group += 1
            target = self._new_builder()
        self._set_layout(target, layout, headerless=False)
        return True

    def _row(self, lineno: int, body: str) -> None:
        toks = body.split()
        size = _integer(toks[0], lineno, "size", body)
        owner = self.tables.owner(size, toks[2]) if self.tables.count else None
        target = owner or self._headerless_table(lineno, body, toks)
        if target is None:
            return  # numbers that are no table row: launcher or shell noise
        assert target.layout is not None
        if target.headerless:
            try:
                row = _read_row(target.layout, toks, lineno, body)
            except ParseError:
                return  # the layout was guessed from other rows: a line that does not fit it is noise
        else:
            row = _read_row(target.layout, toks, lineno, body)
        target.rows.append(row)
        self.tables.took_row(target)
        target.first_row_line = target.first_row_line or lineno
        target.last_row_line = lineno
        self.recognised = True

    def _headerless_table(self, lineno: int, body: str, toks: list[str]) -> _Builder | None:
        """The table of a row that no open table takes: rows printed without their column header (pasted,
        filtered, or a build without MPI whose processes' rows interleave). The layout is read from the row
        itself (:func:`_infer_layout`); a run that printed its banner but no header takes it, else a new
        table opens, in the launch of the open runs (another process of it) or a new one. ``None`` when the
        line does not read as a row."""
        layout = _infer_layout(toks)
        waiting = self._first_waiting()
        if layout is None:
            if waiting is not None:
                raise ParseError(FMT_TEXT, lineno, "a column header (size count type ...) before data rows", body)
            return None
        if waiting is not None:
            target = waiting
        else:
            if not self.opened:
                self.group += 1
            target = self._new_builder()
        self._set_layout(target, layout, headerless=True)
        return target

    def _footer(self, body: str) -> bool:
        m = _OOB_RE.match(body)
        if m:
            b = self._footer_target(lambda b: b.out_of_bounds is None)
            if b is not None:
                b.out_of_bounds = int(m.group(1))
                b.out_of_bounds_ok = None if m.group(2) is None else m.group(2) == "OK"
            return True
        m = _AVG_RE.match(body)
        if m:
            b = self._footer_target(lambda b: True)
            if b is not None:
                try:
                    value: float | None = float(m.group(1))
                except ValueError:
                    value = None
                b.avg = value if value is not None and math.isfinite(value) else None
                b.avg_ok = None if m.group(2) is None else m.group(2) == "OK"
                b.complete = True
                self._close(b)
            return True
        return False

    def _footer_target(self, want: Callable[[_Builder], bool]) -> _Builder | None:
        return next((b for b in self._open() if (b.layout is not None or b.rows) and want(b)), None)

    def _set_nccl_version(self, version: str) -> None:
        target = next((b for b in self._open() if b.nccl_version is None), None)
        if target is not None:
            target.nccl_version = version
        else:
            self.pending_nccl_version = version

    def _command(self, body: str) -> None:
        """A shell command that starts a ``*_perf`` binary (prompt, ``mpirun``, ``srun``) opens a launch.

        A launcher line continued with a trailing backslash carries its ``-np`` to the line naming the
        binary.
        """
        continued = self.continuation
        self.continuation = body.endswith("\\")
        np_match = _NP_RE.search(body)
        if np_match:
            self._close_all()
            self.pending_np = int(np_match.group(1))
            self._launch()
        m = _PERF_RE.search(body)
        coll = _collective_of(m.group(1)) if m and not body.startswith("#") else None
        if coll is None:
            return
        self._close_all()
        self._launch()
        self.pending_collective = coll
        if not np_match and not continued:
            self.pending_np = None

    def _launch(self) -> None:
        self.launch_pending = True
        self.failed_launch = None

    def finish(self) -> NcclTestsReport:
        if not self.recognised:
            expected = "nccl-tests output (banner, column header, table rows or footer)"
            raise ParseError(FMT_TEXT, None, expected)
        self._close_all()
        collectives = {id(b): b.collective or self.hint or _collective_from_ratio(b.rows) for b in self.builders}
        nranks = {id(b): _nranks(b, collectives[id(b)]) for b in self.builders}
        non_mpi = _non_mpi_builders(self.builders, {k: n for k, (n, _) in nranks.items()})
        runs = [self._run(b, collectives[id(b)], nranks[id(b)], id(b) in non_mpi) for b in self.builders]
        return NcclTestsReport(source_format="text", runs=runs, errors=self.errors, env=self.env)

    def _run(
        self,
        b: _Builder,
        collective: Collective | None,
        counted: tuple[int | None, NranksSource | None],
        non_mpi: bool,
    ) -> NcclTestsRun:
        nranks, source = counted
        return NcclTestsRun(
            collective=collective,
            nranks=nranks,
            nranks_source=source,
            complete=b.complete,
            non_mpi_build=non_mpi,
            rows=b.rows,
            avg_busbw_gbps=b.avg,
            avg_busbw_ok=b.avg_ok,
            out_of_bounds=b.out_of_bounds,
            out_of_bounds_ok=b.out_of_bounds_ok,
            nccl_tests_version=b.nccl_tests_version,
            nccl_version=b.nccl_version,
            nthreads=b.nthreads,
            ngpus=b.ngpus,
            devices=b.devices,
            errors=b.errors,
            last_lines=b.last_lines,
            aborted=b.aborted,
            signal=b.signal,
            headerless=b.headerless,
        )


def _row_owner(tables: list[_Builder], size: int, dtype: str) -> _Builder | None:
    """The open table a row of ``size`` bytes and type ``dtype`` belongs to, when several processes print
    at once: the rule, written as a scan of ``tables`` (open, in creation order). The parser applies it through
    :class:`_Tables`, which gives the same answer in O(log n) (tested against this function).

    Each process sweeps sizes upwards (``-f``/``-i``), so the row continues the table whose last size is
    the closest below it (smallest step); a table without rows takes a size no other can continue. When
    no table can continue (``-d all`` and ``-N`` restart the sweep), the table with the fewest rows; but
    when every table came without a header, nothing says how many processes print: a row of another type
    restarts a table's sweep (``-d all``), a row of the same type starts another table (``None``).
    """

    def step(b: _Builder) -> float:
        last = b.rows[-1].size
        return size / last if last > 0 else float(size)

    growing = [b for b in tables if b.rows and b.rows[-1].size < size]
    if growing:
        return min(growing, key=step)
    fresh = [b for b in tables if not b.rows]
    if fresh:
        return fresh[0]
    if all(b.headerless for b in tables):
        return next((b for b in tables if b.rows[-1].type != dtype), None)
    return min(tables, key=lambda b: len(b.rows))


def _infer_layout(toks: list[str]) -> _Layout | None:
    """The layout of a data row seen without its column header, or ``None`` when ``toks`` is no row.

    Rows of the 2.13+ table have 13 columns (``size count type redop root`` and two sides of ``time algbw
    busbw #wrong``); pre-2.13 ones 11 to 13 (``redop`` blank for non-reducing collectives, ``root`` only for
    rooted ones, ``error`` a float). ``-S`` adds a date and a time. ``type`` and ``redop`` must be names
    nccl-tests prints, and every value must read: numbers alone are noise, not a row.
    """
    if len(toks) < 3 or toks[2] not in _TYPES:
        return None
    timestamp = _DATE_RE.match(toks[-2]) is not None and _CLOCK_RE.match(toks[-1]) is not None
    ncols = len(toks) - (2 if timestamp else 0)
    prefix = ncols - 8
    if prefix < 3 or prefix > 5:
        return None
    has_redop = toks[3] in _REDOPS if prefix > 3 else False
    has_root = prefix == 5 or (prefix == 4 and not has_redop)
    if prefix == 5 and not has_redop:
        return None
    # 2.13+ prints both redop and root and an integer #wrong; the old error column is a float (2e-07)
    wrong = prefix == 5 and all(t.isdigit() or t == "N/A" for t in (toks[8], toks[12]))
    side = ["time", "algbw", "busbw", "#wrong" if wrong else "error"]
    layout = _Layout(has_redop, has_root, [side, list(side)], timestamp)
    try:
        _read_row(layout, toks, 0, "")
    except ParseError:
        return None
    return layout


def _non_mpi_builders(builders: list[_Builder], nranks: dict[int, int | None]) -> set[int]:
    """Runs of a build without MPI (nccl-tests README: multi-process runs need ``MPI=1``).

    Signature 1: two or more processes of one launch each print a table whose only device is rank 0.
    Signature 2: the launcher asked for ``-np N > 1`` processes but the table lists the devices of one
    process only (an MPI build lists every process's devices).
    Signature 3: tables of one launch whose rows interleave (only the root process of an MPI build prints
    rows, so two tables printing at once are two processes each running alone), none of more than one
    rank (``nranks``, by run id): it needs no device line nor header, which pasted or filtered output lacks.
    """
    out: set[int] = set()
    groups: dict[int, list[_Builder]] = {}
    for b in builders:
        groups.setdefault(b.group, []).append(b)
    for members in groups.values():
        solo = [b for b in members if b.devices and all(d.rank == 0 for d in b.devices)]
        if len(solo) >= 2 and len({(d.host, d.pid) for b in solo for d in b.devices}) >= 2:
            out.update(id(b) for b in solo)
        interleaved = _interleaved(members)
        if len(interleaved) >= 2 and all((nranks[id(b)] or 1) == 1 for b in interleaved):
            out.update(id(b) for b in interleaved)
    for b in builders:
        if b.launcher_np and b.launcher_np > 1 and b.devices and len({d.pid for d in b.devices}) == 1:
            out.add(id(b))
    return out


def _interleaved(tables: list[_Builder]) -> list[_Builder]:
    """The tables whose rows were printed while another table's were (their line spans overlap), in the order
    given; O(n log n): sorted by first row, a span overlaps another when it starts before the furthest end of
    the spans started before it, or one started after it starts before its own end."""
    spans = sorted(
        (b.first_row_line, b.last_row_line, i)
        for i, b in enumerate(tables)
        if b.first_row_line is not None and b.last_row_line is not None
    )
    hit: set[int] = set()
    furthest: tuple[int, int] | None = None  #: the furthest end of the spans so far, and whose
    for k, (first, last, i) in enumerate(spans):
        if furthest is not None and first < furthest[0]:
            hit.update((i, furthest[1]))
        if k + 1 < len(spans) and spans[k + 1][0] < last:
            hit.update((i, spans[k + 1][2]))
        if furthest is None or last > furthest[0]:
            furthest = (last, i)
    return [b for i, b in enumerate(tables) if i in hit]


def _reliable_ratio(rows: list[Row]) -> float | None:
    """busbw / algbw of the row side with the largest algbw (>= 1 GB/s: two decimals give 3+ digits)."""
    best: tuple[float, float] | None = None
    for r in rows:
        for t in (r.out_of_place, r.in_place):
            if t is None or t.algbw_gbps is None or t.busbw_gbps is None or t.algbw_gbps < 1.0:
                continue
            if best is None or t.algbw_gbps > best[0]:
                best = (t.algbw_gbps, t.busbw_gbps)
    return None if best is None else best[1] / best[0]


def _collective_from_ratio(rows: list[Row]) -> Collective | None:
    """Only all_reduce has busbw > algbw (factor 2(n-1)/n > 1 for n >= 3; PERFORMANCE.md)."""
    ratio = _reliable_ratio(rows)
    return Collective.ALL_REDUCE if ratio is not None and ratio > 1.05 else None


def _nranks(b: _Builder, collective: Collective | None) -> tuple[int | None, NranksSource | None]:
    """Rank count: distinct device ranks if printed, else n solved from busbw/algbw = factor(n)."""
    if b.devices:
        return len({d.rank for d in b.devices}), "devices"
    ratio = _reliable_ratio(b.rows)
    if ratio is None or collective is None:
        return None, None
    if collective is Collective.ALL_REDUCE and ratio < 2.0:
        n = 2.0 / (2.0 - ratio)  # r = 2(n-1)/n
    elif collective in _FACTOR_N_MINUS_1_OVER_N and ratio < 1.0:
        n = 1.0 / (1.0 - ratio)  # r = (n-1)/n
    else:
        return None, None
    rounded = round(n)
    # values carry two printed decimals: accept n only when factor(n) reproduces the ratio to 0.5 %; a busbw
    # of 0.00 beside an algbw of 1 GB/s or more is factor 0: one rank
    if rounded < 1 or abs(busbw_factor(collective, rounded) - ratio) > 0.005 * ratio:
        return None, None
    return rounded, "busbw_ratio"


# ----------------------------------------------------------------------------------------------- JSON


def _jget(obj: object, key: str, where: str) -> object:
    if not isinstance(obj, dict) or key not in obj:
        raise ParseError(FMT_JSON, None, f"key {key!r} in {where}")
    return obj[key]


def _jnum(value: object, where: str) -> float | None:
    """A JSON number; null and the strings ``"nan"``/``"inf"`` (nccl-tests writes NaN so) -> ``None``."""
    if value is None or (isinstance(value, str) and value.strip().lower() in {"nan", "-nan", "inf", "-inf"}):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(FMT_JSON, None, f"a number for {where}", repr(value))
    return float(value) if math.isfinite(value) else None


def _jint(value: object, where: str) -> int | None:
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise ParseError(FMT_JSON, None, f"an integer for {where}", repr(value)) from None
    number = _jnum(value, where)
    if number is None:
        return None
    if number != int(number):
        raise ParseError(FMT_JSON, None, f"an integer for {where}", repr(value))
    return int(number)


def _jreq_int(obj: object, key: str, where: str) -> int:
    value = _jint(_jget(obj, key, where), f"{where}.{key}")
    if value is None:
        raise ParseError(FMT_JSON, None, f"an integer for {where}.{key}")
    return value


def _jstr(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ParseError(FMT_JSON, None, f"a string for {where}", repr(value))
    return value


def _jokay(value: object) -> bool | None:
    """``okay`` fields: true/false (bool or string); ``"unchecked"`` -> ``None``."""
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    return None


def _jper_iter(obj: object, where: str) -> PerIterStats | None:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise ParseError(FMT_JSON, None, f"an object for {where}")
    times = obj.get("times_us", [])
    if not isinstance(times, list):
        raise ParseError(FMT_JSON, None, f"a list for {where}.times_us")
    values = [_jnum(t, f"{where}.times_us") for t in times]
    skipped = obj.get("skipped_iterations")
    return PerIterStats(
        min_us=_jnum(obj.get("min_us"), where),
        max_us=_jnum(obj.get("max_us"), where),
        p99_us=_jnum(obj.get("p99_us"), where),
        cv_pct=_jnum(obj.get("cv_pct"), where),
        avg_us=_jnum(obj.get("avg_us"), where),
        p50_us=_jnum(obj.get("p50_us"), where),
        p95_us=_jnum(obj.get("p95_us"), where),
        stdev_us=_jnum(obj.get("stdev_us"), where),
        skipped_iterations=None if skipped is None else _jint(skipped, where),
        times_us=[v for v in values if v is not None],
    )


def _jside(result: dict[str, object], key: str, where: str) -> Timing | None:
    side = result.get(key)
    if side is None:
        return None
    if not isinstance(side, dict):
        raise ParseError(FMT_JSON, None, f"an object for {where}.{key}")
    here = f"{where}.{key}"
    nwrong = side.get("nwrong")
    return Timing(
        time_us=_jnum(side.get("time", side.get("cpu_time")), f"{here}.time"),
        algbw_gbps=_jnum(_jget(side, "alg_bw", here), f"{here}.alg_bw"),
        busbw_gbps=_jnum(_jget(side, "bus_bw", here), f"{here}.bus_bw"),
        wrong=None if nwrong is None else _jint(nwrong, f"{here}.nwrong"),
        cputime_us=_jnum(side.get("cpu_time"), f"{here}.cpu_time"),
        per_iter=_jper_iter(result.get(f"{key}_per_iter"), f"{here}_per_iter"),
    )


def _jrow(result: object, i: int) -> Row:
    where = f"results[{i}]"
    if not isinstance(result, dict):
        raise ParseError(FMT_JSON, None, f"an object for {where}")
    oop = _jside(result, "out_of_place", where)
    if oop is None:
        raise ParseError(FMT_JSON, None, f"{where}.out_of_place")
    redop = result.get("redop")
    root = result.get("root")
    return Row(
        size=_jreq_int(result, "size", where),
        count=_jreq_int(result, "count", where),
        type=_jstr(_jget(result, "type", where), f"{where}.type"),
        redop=None if redop is None else _jstr(redop, f"{where}.redop"),
        root=None if root is None else _jint(root, f"{where}.root"),
        out_of_place=oop,
        in_place=_jside(result, "in_place", where),
    )


def _jdevice(obj: object, i: int) -> Device:
    where = f"config.devices[{i}]"
    group = obj.get("group") if isinstance(obj, dict) else None
    return Device(
        rank=_jreq_int(obj, "rank", where),
        group=None if group is None else _jint(group, f"{where}.group"),
        pid=_jreq_int(obj, "pid", where),
        host=_jstr(_jget(obj, "hostname", where), f"{where}.hostname"),
        device=_jreq_int(obj, "device", where),
        bus_id=_jstr(_jget(obj, "device_hex", where), f"{where}.device_hex"),
        gpu_name=_jstr(_jget(obj, "device_info", where), f"{where}.device_info"),
    )


def _nccl_int_version(code: int | None) -> str | None:
    """NCCL_VERSION_CODE (major*10000 + minor*100 + patch since 2.9; ``nccl.h``) -> ``"2.28.9"``."""
    if code is None or code < 10000:
        return None
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def _jobject(value: object, where: str) -> dict[str, object]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParseError(FMT_JSON, None, f"an object for {where}")
    return value


def _jlist(value: object, where: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(FMT_JSON, None, f"a list for {where}")
    return value


def _parse_json(text: str, collective_hint: Collective | None) -> NcclTestsReport:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(FMT_JSON, exc.lineno, "valid JSON", exc.msg) from None
    except RecursionError:
        raise ParseError(FMT_JSON, None, "JSON nested less deeply") from None
    if not isinstance(doc, dict):
        raise ParseError(FMT_JSON, None, "a JSON object at the top level")
    results = _jlist(_jget(doc, "results", "the top level"), "results")
    config = _jobject(doc.get("config"), "config")
    devices = [_jdevice(d, i) for i, d in enumerate(_jlist(config.get("devices"), "config.devices"))]
    rows = [_jrow(r, i) for i, r in enumerate(results)]
    errors = [_jstr(e, "errors[]") for e in _jlist(doc.get("errors"), "errors") if e != ""]
    oob = _jobject(doc.get("out_of_bounds"), "out_of_bounds")
    avg = _jobject(doc.get("average_bus_bandwidth"), "average_bus_bandwidth")
    args = _jlist(doc.get("args"), "args")
    named = collective_from_name(args[0]) if args and isinstance(args[0], str) else None
    run = NcclTestsRun(
        collective=named or collective_hint,
        nranks=len({d.rank for d in devices}) if devices else None,
        nranks_source="devices" if devices else None,
        complete="end_time" in doc and bool(avg),  # written once the sweep ended
        rows=rows,
        avg_busbw_gbps=_jnum(avg.get("bandwidth"), "average_bus_bandwidth.bandwidth"),
        avg_busbw_ok=_jokay(avg.get("okay")),
        out_of_bounds=_jint(oob.get("count"), "out_of_bounds.count"),
        out_of_bounds_ok=_jokay(oob.get("okay")),
        nccl_version=_nccl_int_version(_jint(doc.get("nccl_version"), "nccl_version")),
        nthreads=_jint(config.get("nthreads"), "config.nthreads"),
        ngpus=_jint(config.get("ngpus"), "config.ngpus"),
        devices=devices,
        errors=errors,
    )
    return NcclTestsReport(source_format="json", runs=[run], errors=errors)


# ---------------------------------------------------------------------------------------------- entry


def parse_nccl_tests(text: str, collective_hint: Collective | str | None = None) -> NcclTestsReport:
    """Parse nccl-tests text output or its ``-J`` JSON (autodetected) into an :class:`NcclTestsReport`.

    ``collective_hint`` (e.g. :func:`collective_from_name` of the bundle file name) names the collective
    where the text does not (no command line, no ``Collective test starting``); it never overrides the
    text. Raises :class:`ParseError` for text with nothing recognisable, a row that does not fit its
    header, or bad JSON.
    """
    hint = _collective_of(collective_hint) if isinstance(collective_hint, str) else collective_hint
    if text.lstrip().startswith("{"):
        return _parse_json(text, hint)
    parser = _TextParser(hint)
    for lineno, line in enumerate(text.splitlines(), start=1):
        parser.feed(lineno, line)
    return parser.finish()
