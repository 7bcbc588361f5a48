"""Parser for one rank's PyTorch Flight Recorder dump (``TORCH_FR_BUFFER_SIZE`` / ``TORCH_NCCL_TRACE_BUFFER_SIZE``
with ``TORCH_NCCL_DUMP_ON_TIMEOUT``; files ``${TORCH_FR_DUMP_TEMP_FILE}<rank>``, default
``/tmp/nccl_trace_rank_<rank>``).

A dump is one dict (PyTorch's ``FlightRecorder::dump``, read by ``torch.distributed.flight_recorder``'s
``fr_trace`` analyzer, format versions 2.x)::

    {"version": "2.10", "comm_lib_version": "", "pg_config": {pg_name: {"name", "desc", "ranks": "[0, 1]"}},
     "pg_status": {pg: {"last_enqueued_collective": 5, "last_started_collective": -1,
                        "last_completed_collective": 5}},
     "entries": [{"record_id", "pg_id", "process_group": (name, desc), "collective_seq_id", "p2p_seq_id",
                  "op_id", "profiling_name": "nccl:all_reduce", "time_created_ns", "input_sizes": [[1024]],
                  "input_dtypes": ["Float"], "output_sizes", "output_dtypes", "state": "scheduled|started|completed",
                  "time_discovered_started_ns", "time_discovered_completed_ns", "retired", "timeout_ms",
                  "is_p2p", "frames": [{"name", "filename", "line"}]}, ...]}

written either as a pickle (``_dump_fr_trace``, what dump-on-timeout writes) or as JSON (``_dump_fr_trace_json``:
no frames, numbers in ``pg_status`` as strings, ``0`` for an unknown time). Versions before 2.2 name the
sequence id ``seq_id``; both are read.

**Pickles are never loaded with the default unpickler** (loading a pickle runs whatever callable it names). The
restricted unpickler here refuses every global (``find_class``), persistent id and out-of-band buffer, so only
the plain containers and scalars pickle builds by itself (dict, list, tuple, str, bytes, int, float, bool,
None) can come out; a dump that holds anything else is a :class:`ParseError`, and nothing in it ran. Real dumps
need nothing more (see ``tests/fixtures/flight_recorder``).

Input is bytes (the caller reads the file under a size limit); memory is bounded by it (pickle and JSON build
at most a few objects per input byte). Errors: :class:`~fleetdx.probes.errors.ParseError` (format
``"flight-recorder"``) and nothing else, whatever the bytes.

Three readers, one set of checks: :func:`parse_flight_recorder` (contracts), :func:`scan_flight_recorder` (lean
rows) and :func:`scan_columns` (columns, for many ranks: each field checked in one bulk pass, about 2 to 3 times
faster; a dump of any other than the usual shape is read entry by entry, so its error is the same).
"""

from __future__ import annotations

import gc
import io
import json
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from itertools import chain, repeat
from operator import is_not, itemgetter
from typing import Any, Literal, NamedTuple

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError

FMT = "flight-recorder"
#: the deepest nesting a dump needs is 5 (dump > entries > entry > sizes > dims); deeper input is refused
#: before it is read further, so a hostile dump cannot exhaust the stack
MAX_DEPTH = 12
#: stack frames kept per entry (innermost first, as recorded)
MAX_FRAMES = 16


class FrGroup(Contract):
    """One process group as ``pg_config`` names it; ``ranks`` are global ranks, ``None`` when not recorded."""

    key: str  #: the key in ``pg_config``
    name: str
    desc: str
    ranks: list[int] | None = None


class FrGroupStatus(Contract):
    """``pg_status`` of one process group: the sequence ids of the last collectives enqueued, started and
    completed on this rank (-1 or ``None``: none, or not reported)."""

    key: str
    last_enqueued: int | None = None
    last_started: int | None = None
    last_completed: int | None = None


class FrEntry(Contract):
    """One recorded collective or point-to-point operation of one rank."""

    record_id: int  #: position in this rank's ring buffer history (rank-local, across all groups)
    pg_name: str  #: ``process_group[0]``: the group's name (``"0"`` for the default group)
    pg_desc: str  #: ``process_group[1]``: ``"default_pg"`` or the user's ``group_desc``
    pg_id: int | None = None
    collective_seq_id: int  #: per group, 1-based, the same on every member for the same collective
    p2p_seq_id: int = 0
    op_id: int | None = None
    profiling_name: str  #: ``"nccl:all_reduce"``, ``"gloo:broadcast"``, ...
    is_p2p: bool = False
    input_sizes: list[list[int]] = Field(default_factory=list)
    output_sizes: list[list[int]] = Field(default_factory=list)
    input_dtypes: list[str] = Field(default_factory=list)
    output_dtypes: list[str] = Field(default_factory=list)
    state: str = ""  #: ``scheduled``, ``started`` or ``completed`` as recorded
    retired: bool | None = None
    time_created_ns: int | None = None  #: Unix time, ns
    time_started_ns: int | None = None  #: ``time_discovered_started_ns`` (None when 0 or absent)
    time_completed_ns: int | None = None  #: ``time_discovered_completed_ns``
    timeout_ms: int | None = None
    frames: list[str] = Field(default_factory=list)  #: ``"name at file:line"``, at most :data:`MAX_FRAMES`

    @property
    def op(self) -> str:
        """The operation without the backend prefix: ``"all_reduce"``."""
        return self.profiling_name.split(":", 1)[-1]


class FrDump(Contract):
    """One rank's dump. The rank itself is not in the dump: it is the number at the end of the file name."""

    format: Literal["pickle", "json"]
    version: str
    comm_lib_version: str = ""
    groups: list[FrGroup] = Field(default_factory=list)
    status: list[FrGroupStatus] = Field(default_factory=list)
    entries: list[FrEntry] = Field(default_factory=list)


class FrRow(NamedTuple):
    """One validated entry in the reader's lean form (:func:`scan_flight_recorder`): the fields of
    :class:`FrEntry`, sizes and dtypes as tuples (hashable), built without pydantic (about 1 us instead of 12)."""

    record_id: int
    pg_name: str
    pg_desc: str
    pg_id: int | None
    collective_seq_id: int
    p2p_seq_id: int
    op_id: int | None
    profiling_name: str
    is_p2p: bool
    input_sizes: tuple[tuple[int, ...], ...]
    output_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    state: str
    retired: bool | None
    time_created_ns: int | None
    time_started_ns: int | None
    time_completed_ns: int | None
    timeout_ms: int | None
    frames: tuple[str, ...]  #: formatted only when asked (:func:`scan_flight_recorder`'s ``frames``)

    def entry(self) -> FrEntry:
        """The same entry as the :class:`FrEntry` contract."""
        d = self._asdict()
        for k in ("input_sizes", "output_sizes"):
            d[k] = [list(s) for s in d[k]]
        for k in ("input_dtypes", "output_dtypes", "frames"):
            d[k] = list(d[k])
        return FrEntry.model_construct(**d)  # every field checked by _row: no second validation


class FrScan(NamedTuple):
    """One rank's dump as :func:`scan_flight_recorder` reads it: the header as contracts, the entries lean."""

    format: Literal["pickle", "json"]
    version: str
    comm_lib_version: str
    groups: list[FrGroup]
    status: list[FrGroupStatus]
    rows: list[FrRow]

    def dump(self) -> FrDump:
        """The same dump as the :class:`FrDump` contract."""
        return FrDump(
            format=self.format,
            version=self.version,
            comm_lib_version=self.comm_lib_version,
            groups=self.groups,
            status=self.status,
            entries=[r.entry() for r in self.rows],
        )


class FrCols(NamedTuple):
    """The entries of one dump by column (:func:`scan_columns`): each field of :class:`FrRow` as a sequence, one
    item an entry, in the dump's order; the values are those of :class:`FrRow` (``frames`` empty: not formatted)."""

    record_id: Sequence[int]
    pg_name: Sequence[str]
    pg_desc: Sequence[str]
    pg_id: Sequence[int | None]
    collective_seq_id: Sequence[int]
    p2p_seq_id: Sequence[int]
    op_id: Sequence[int | None]
    profiling_name: Sequence[str]
    is_p2p: Sequence[bool]
    input_sizes: Sequence[tuple[tuple[int, ...], ...]]
    output_sizes: Sequence[tuple[tuple[int, ...], ...]]
    input_dtypes: Sequence[tuple[str, ...]]
    output_dtypes: Sequence[tuple[str, ...]]
    state: Sequence[str]
    retired: Sequence[bool | None]
    time_created_ns: Sequence[int | None]
    time_started_ns: Sequence[int | None]
    time_completed_ns: Sequence[int | None]
    timeout_ms: Sequence[int | None]
    frames: Sequence[tuple[str, ...]]

    @classmethod
    def of(cls, rows: Sequence[FrRow]) -> FrCols:
        """The rows transposed."""
        return cls(*zip(*rows, strict=True)) if rows else cls(*([()] * len(cls._fields)))


class FrTable(NamedTuple):
    """One rank's dump as :func:`scan_columns` reads it: the header as contracts, the entries by column."""

    format: Literal["pickle", "json"]
    version: str
    comm_lib_version: str
    groups: list[FrGroup]
    status: list[FrGroupStatus]
    cols: FrCols


class _NoGlobals(pickle.Unpickler):
    """An unpickler that builds only what pickle builds without a global: no class, no function, no reduce."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: ARG002 - refuses everything
        raise pickle.UnpicklingError(f"global {module}.{name} refused (a Flight Recorder dump holds none)")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent id refused")


_CONTAINERS = frozenset((dict, list, tuple))  # what pickle and JSON build that holds other objects


#: how many levels of not yet measured containers :func:`_measure` descends into by itself (an entry's sizes and
#: frames: dict > list > list or dict) before it leaves a container to the iterative walk
_INLINE_LEVELS = 3


def _measure(o: Any, done: dict[int, tuple[int, int]], levels: int = _INLINE_LEVELS) -> tuple[int, int] | list[Any]:
    """``o``'s (objects along every path below and itself, height) when it can be measured descending at most
    ``levels`` levels of containers not measured yet (each one measured is kept in ``done``: one that reaches
    back to a container above it never is, so a cycle is left to the walk); else a frame for the iterative walk:
    ``[o, its container children, next child, count so far, height so far]``."""
    if type(o) is dict:
        n = 2 * len(o) + 1
        kids = [v for v in o.values() if type(v) in _CONTAINERS]
        if tuple in set(map(type, o)):  # the only container a key can be
            kids += [k for k in o if type(k) is tuple]
    else:
        n = len(o) + 1
        kids = [v for v in o if type(v) in _CONTAINERS]
    total, height = n, 0
    for v in kids:
        got = done.get(id(v))
        if got is None and type(v) is not dict:  # a list or tuple of leaves, the most common, measured here
            for x in v:
                if type(x) in _CONTAINERS:
                    break
            else:
                got = done[id(v)] = (len(v) + 1, 0)
        if got is None:
            if levels == 0:
                return [o, kids, 0, n, 0]
            inner = _measure(v, done, levels - 1)
            if isinstance(inner, list):
                return [o, kids, 0, n, 0]
            got = done[id(v)] = inner
        total += got[0]
        height = max(height, got[1] + 1)
    return total, height


def _shape_ok(obj: Any, budget: int) -> bool:
    """Whether ``obj``'s containers nest at most :data:`MAX_DEPTH` deep and hold at most ``budget`` objects,
    counted along every path. A pickle can share one list many times through its memo, so a few KB could
    otherwise stand for billions of paths; a real dump shares strings and frames.

    Each distinct container is walked once (iterative post-order, no recursion), its count of objects along
    every path below it and its height kept by ``id``; a shared one adds its count again at each reference
    without being walked again. So the answer is the one of a walk of every path, in time linear in the input
    (a reference costs at least one pickle opcode), and a reference cycle is refused as too deep."""
    done: dict[int, tuple[int, int]] = {}  # id -> (objects along every path below and itself, height)
    got = _measure(obj, done)
    if isinstance(got, tuple):
        return got[0] <= budget and got[1] < MAX_DEPTH
    stack = [got]
    on_path = {id(obj)}
    while stack:
        top = stack[-1]
        if top[2] < len(top[1]):
            child = top[1][top[2]]
            top[2] += 1
            if id(child) not in done:  # not measured yet (its depth is len(stack))
                if len(stack) >= MAX_DEPTH or id(child) in on_path:
                    return False
                got = _measure(child, done)
                if isinstance(got, list):
                    stack.append(got)
                    on_path.add(id(child))
                    continue
                done[id(child)] = got
            n, h = done[id(child)]
        else:
            stack.pop()
            on_path.discard(id(top[0]))
            n, h = done[id(top[0])] = (top[3], top[4])
            if not stack:
                break
            top = stack[-1]
        if len(stack) + h >= MAX_DEPTH:
            return False
        top[3] += n
        top[4] = max(top[4], h + 1)
        if top[3] > budget:
            return False
    return n <= budget


def _load(data: bytes) -> tuple[Literal["pickle", "json"], Any]:
    head = data[:64].lstrip()
    if not head:
        raise ParseError(FMT, None, "a Flight Recorder dump (pickle or JSON)", "empty input")
    if head.startswith(b"{"):
        try:
            return "json", json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise ParseError(FMT, None, "a Flight Recorder dump in JSON", str(e)) from None
    try:
        return "pickle", _NoGlobals(io.BytesIO(data)).load()
    except pickle.UnpicklingError as e:
        raise ParseError(FMT, None, "a pickle of plain containers and scalars", str(e)) from None
    except Exception as e:  # any failure of the unpickler on hostile or cut bytes is a bad dump, never a crash
        raise ParseError(FMT, None, "a Flight Recorder dump (pickle or JSON)", f"{type(e).__name__}: {e}") from None


def _short(v: Any) -> str:
    """A short, safe description of a bad value (no repr of huge ints or deep containers)."""
    if isinstance(v, (str, bytes, float, bool, type(None))):
        return repr(v)[:80]
    if isinstance(v, int):
        return "an integer out of range" if v.bit_length() > 64 else str(v)
    return type(v).__name__


def _where(i: int | None, key: str) -> str:
    return f"entries[{i}].{key}" if i is not None else key


_I64_MIN, _U64_END = -(2**63), 2**64
_SEQ = frozenset((list, tuple))


def _req_int(v: Any, i: int | None, key: str) -> int:
    """An int field; JSON dumps write some as strings (``"-1"``)."""
    if type(v) is int and _I64_MIN <= v < _U64_END:  # the common case first
        return v
    if isinstance(v, str):
        t = v.strip()
        if t.lstrip("-").isdigit() and len(t) < 40:
            return int(t)
    if isinstance(v, bool) or not isinstance(v, int) or not _I64_MIN <= v < _U64_END:
        raise ParseError(FMT, None, f"a 64-bit integer at {_where(i, key)}", _short(v))
    return v


def _int(v: Any, i: int | None, key: str) -> int | None:
    """An optional int field: ``None`` stays ``None``."""
    return None if v is None else _req_int(v, i, key)


def _str(v: Any, i: int | None, key: str) -> str:
    if type(v) is not str:
        raise ParseError(FMT, None, f"a string at {_where(i, key)}", _short(v))
    return v


def _shape(s: Any, i: int, key: str) -> tuple[int, ...]:
    if type(s) not in _SEQ:
        raise ParseError(FMT, None, f"a shape (list of ints) at {_where(i, key)}", _short(s))
    t = tuple(s)
    for d in t:
        if type(d) is not int or not _I64_MIN <= d < _U64_END:
            return tuple(_req_int(d, i, key) for d in t)  # a string number (JSON), or the error
    return t


def _sizes(v: Any, i: int, key: str) -> tuple[tuple[int, ...], ...]:
    if v is None:
        return ()
    if type(v) not in _SEQ:
        raise ParseError(FMT, None, f"a list of shapes at {_where(i, key)}", _short(v))
    return tuple([_shape(s, i, key) for s in v])


def _strs(v: Any, i: int, key: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if type(v) not in _SEQ:
        raise ParseError(FMT, None, f"a list of dtype names at {_where(i, key)}", _short(v))
    t = tuple(v)
    for s in t:
        if type(s) is not str:
            raise ParseError(FMT, None, f"a string at {_where(i, key)}", _short(s))
    return t


def _time(v: Any, i: int, key: str) -> int | None:
    if v is None:
        return None
    t = _req_int(v, i, key)
    return t if t else None  # JSON dumps write 0 for "not discovered"


def _frame_text(f: dict[Any, Any]) -> str:
    name, filename, line = f.get("name"), f.get("filename"), f.get("line")
    return (
        f"{name if isinstance(name, str) else '?'} at {filename if isinstance(filename, str) else '?'}"
        f":{_short(line) if isinstance(line, int) else '?'}"
    )


def _frames(v: Any, i: int, texts: dict[int, str] | None) -> tuple[str, ...]:
    """The first :data:`MAX_FRAMES` frames, checked; formatted only when ``texts`` (a cache by the frame dict's
    id, valid while the loaded dump lives: torch's pickle shares a frame dict between the entries that hold
    it) is given."""
    if not v:
        return ()
    if type(v) not in _SEQ:
        raise ParseError(FMT, None, f"a list of frames at {_where(i, 'frames')}", _short(v))
    fs = v[:MAX_FRAMES]
    for f in fs:
        if type(f) is not dict:
            raise ParseError(FMT, None, f"a frame dict at {_where(i, 'frames')}", _short(f))
    if texts is None:
        return ()
    out = []
    for f in fs:
        t = texts.get(id(f))
        if t is None:
            t = texts[id(f)] = _frame_text(f)
        out.append(t)
    return tuple(out)


def _row(i: int, e: Any, texts: dict[int, str] | None) -> FrRow:
    if type(e) is not dict:
        raise ParseError(FMT, None, f"a dict at entries[{i}]", _short(e))
    get = e.get
    pg: Any = get("process_group")
    if type(pg) not in _SEQ or len(pg) != 2:
        raise ParseError(FMT, None, f"process_group (name, desc) at entries[{i}]", _short(pg))
    seq = e["collective_seq_id"] if "collective_seq_id" in e else get("seq_id")
    if "profiling_name" not in e or seq is None or "record_id" not in e:
        raise ParseError(FMT, None, f"record_id, collective_seq_id and profiling_name at entries[{i}]")
    retired = get("retired")
    is_p2p = get("is_p2p", False)
    if (retired is not None and type(retired) is not bool) or type(is_p2p) is not bool:
        raise ParseError(FMT, None, f"booleans retired/is_p2p at entries[{i}]", f"{_short(retired)}, {_short(is_p2p)}")
    # the common types inline (an int in range, None); anything else through the checking helpers
    lo, end = _I64_MIN, _U64_END
    rid, pg_id, op_id, p2p = e["record_id"], get("pg_id"), get("op_id"), get("p2p_seq_id")
    created, started, completed = (
        get("time_created_ns"),
        get("time_discovered_started_ns"),
        get("time_discovered_completed_ns"),
    )
    timeout = get("timeout_ms")
    return FrRow(
        rid if type(rid) is int and lo <= rid < end else _req_int(rid, i, "record_id"),
        _str(pg[0], i, "process_group[0]"),
        _str(pg[1], i, "process_group[1]"),
        pg_id if pg_id is None or (type(pg_id) is int and lo <= pg_id < end) else _req_int(pg_id, i, "pg_id"),
        seq if type(seq) is int and lo <= seq < end else _req_int(seq, i, "collective_seq_id"),
        p2p if type(p2p) is int and lo <= p2p < end else (_int(p2p, i, "p2p_seq_id") or 0),
        op_id if op_id is None or (type(op_id) is int and lo <= op_id < end) else _req_int(op_id, i, "op_id"),
        _str(e["profiling_name"], i, "profiling_name"),
        is_p2p,
        _sizes(get("input_sizes"), i, "input_sizes"),
        _sizes(get("output_sizes"), i, "output_sizes"),
        _strs(get("input_dtypes"), i, "input_dtypes"),
        _strs(get("output_dtypes"), i, "output_dtypes"),
        _str(get("state", ""), i, "state"),
        retired,
        created if type(created) is int and 0 < created < end else _time(created, i, "time_created_ns"),
        started if type(started) is int and 0 < started < end else _time(started, i, "time_discovered_started_ns"),
        completed
        if type(completed) is int and 0 < completed < end
        else _time(completed, i, "time_discovered_completed_ns"),
        timeout
        if timeout is None or (type(timeout) is int and lo <= timeout < end)
        else _req_int(timeout, i, "timeout_ms"),
        _frames(get("frames"), i, texts),
    )


def _ranks(v: Any, key: str) -> list[int] | None:
    """``ranks`` as recorded: a string ``"[0, 1]"`` (read without eval) or a list; ``None`` when empty."""
    if isinstance(v, str):
        body = v.strip()
        if not (body.startswith("[") and body.endswith("]")):
            raise ParseError(FMT, None, f"ranks like '[0, 1]' at pg_config[{key!r}]", v)
        parts = [p.strip() for p in body[1:-1].split(",") if p.strip()]
        if not all(p.isdigit() for p in parts):
            raise ParseError(FMT, None, f"ranks like '[0, 1]' at pg_config[{key!r}]", v)
        out = [int(p) for p in parts]
    elif isinstance(v, (list, tuple)):
        out = [_req_int(r, None, f"pg_config[{key!r}].ranks") for r in v]
    elif v is None:
        return None
    else:
        raise ParseError(FMT, None, f"ranks at pg_config[{key!r}]", _short(v))
    return out or None


def _groups(v: Any) -> list[FrGroup]:
    if v is None:
        return []
    if not isinstance(v, dict):
        raise ParseError(FMT, None, "pg_config as a dict", _short(v))
    out = []
    for key, g in v.items():
        if not isinstance(key, str) or not isinstance(g, dict):
            raise ParseError(FMT, None, "pg_config {name: {name, desc, ranks}}", _short(key))
        out.append(
            FrGroup(
                key=key,
                name=_str(g.get("name", key), None, f"pg_config[{key!r}].name"),
                desc=_str(g.get("desc", ""), None, f"pg_config[{key!r}].desc"),
                ranks=_ranks(g.get("ranks"), key),
            )
        )
    return out


def _status(v: Any) -> list[FrGroupStatus]:
    if v is None:
        return []
    if not isinstance(v, dict):
        raise ParseError(FMT, None, "pg_status as a dict", _short(v))
    out = []
    for key, s in v.items():
        if not isinstance(key, str) or not isinstance(s, dict):
            raise ParseError(FMT, None, "pg_status {pg: {last_*_collective}}", _short(key))
        vals = {
            k: _int(s.get(f"last_{k}_collective"), None, f"pg_status[{key!r}].last_{k}_collective")
            for k in ("enqueued", "started", "completed")
        }
        out.append(
            FrGroupStatus(
                key=key,
                **{f"last_{k}": (None if x is None or x < 0 else x) for k, x in vals.items()},
            )
        )
    return out


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a dump is built and read: it would otherwise walk the growing tree
    of containers again and again (a third of the time of a 2000-entry dump); what it would free (a hostile
    pickle's reference cycle) is freed when it runs next. Its previous state is restored."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# ---- the column reader: the same checks, in bulk (C-level passes over each field), for a dump of the usual shape

_NONE = type(None)
_INT, _OPT_INT = frozenset((int,)), frozenset((int, _NONE))
_STR, _BOOL, _OPT_BOOL = frozenset((str,)), frozenset((bool,)), frozenset((bool, _NONE))
_DICT = frozenset((dict,))
_OPT_SEQ = _SEQ | {_NONE}
_not_none = partial(is_not, None)
_first, _second = itemgetter(0), itemgetter(1)
_as_shapes = partial(map, tuple)
#: the entry keys the column reader reads; any other key must hold a scalar
_READ = frozenset(
    ("record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id", "profiling_name", "is_p2p",
     "input_sizes", "output_sizes", "input_dtypes", "output_dtypes", "state", "retired", "time_created_ns",
     "time_discovered_started_ns", "time_discovered_completed_ns", "timeout_ms", "frames")
)  # fmt: skip


def _types_in(col: Iterable[Any], allowed: frozenset[Any]) -> bool:
    return set(map(type, col)) <= allowed


def _ints_ok(col: list[Any], allowed: frozenset[type]) -> bool:
    """Every item an int in the 64-bit range (or ``None`` where ``allowed`` has it)."""
    types = set(map(type, col))
    if not types <= allowed:
        return False
    vals = list(filter(_not_none, col)) if _NONE in types else col
    return not vals or (min(vals) >= _I64_MIN and max(vals) < _U64_END)


class _Budget:
    """Objects along every path counted so far (as :func:`_shape_ok` counts them), against the budget."""

    def __init__(self, budget: int) -> None:
        self.left = budget

    def take(self, n: int) -> bool:
        self.left -= n
        return self.left >= 0


def _seq_col(col: list[Any], b: _Budget) -> list[Any] | None:
    """The lists or tuples of a column (``None`` items skipped), counted; None when an item is anything else."""
    types = set(map(type, col))
    if not types <= _OPT_SEQ:
        return None
    seqs = list(filter(_not_none, col)) if _NONE in types else col
    return seqs if b.take(sum(map(len, seqs)) + len(seqs)) else None


def _sizes_col(col: list[Any], b: _Budget) -> list[tuple[tuple[int, ...], ...]] | None:
    """``input_sizes`` / ``output_sizes`` of every entry as :func:`_sizes` reads them; None: not the usual shape."""
    seqs = _seq_col(col, b)
    if seqs is None:
        return None
    shapes = list(chain.from_iterable(seqs))
    if not _types_in(shapes, _SEQ) or not b.take(sum(map(len, shapes)) + len(shapes)):
        return None
    if not _ints_ok(list(chain.from_iterable(shapes)), _INT):
        return None
    if len(shapes) == len(col) == len(seqs) and set(map(len, seqs)) == {1}:  # the usual: one tensor an entry
        return list(zip(map(tuple, shapes)))
    if len(seqs) != len(col):
        col = [() if v is None else v for v in col]
    return list(map(tuple, map(_as_shapes, col)))


def _strs_col(col: list[Any], b: _Budget) -> list[tuple[str, ...]] | None:
    seqs = _seq_col(col, b)
    if seqs is None or not _types_in(list(chain.from_iterable(seqs)), _STR):
        return None
    if len(seqs) != len(col):
        col = [() if v is None else v for v in col]
    return list(map(tuple, col))


def _frames_ok(col: list[Any], b: _Budget) -> bool:
    """Every entry's frames a list of dicts of scalars (or ``None``), counted: each frame reference at most as
    wide as the widest frame (an upper bound of the count, so a dump within it is within the exact one; one that
    is not is left to the exact check)."""
    seqs = _seq_col(col, b)
    if seqs is None:
        return False
    lists = dict(zip(map(id, seqs), seqs, strict=True)).values()  # each list once (shared ones too)
    frames = dict(zip(map(id, chain.from_iterable(lists)), chain.from_iterable(lists), strict=True)).values()
    if not _types_in(frames, _DICT):  # torch shares frame dicts between entries: each is checked once
        return False
    widest = max(map(len, frames), default=0)
    return (
        b.take(sum(map(len, seqs)) * (2 * widest + 1))
        and _CONTAINERS.isdisjoint(map(type, chain.from_iterable(frames)))
        and _CONTAINERS.isdisjoint(map(type, chain.from_iterable(map(dict.values, frames))))
    )


def _no_zero(col: list[Any]) -> list[Any]:
    """A time as :func:`_time` reads it: 0 (JSON's "not discovered") is None."""
    return [t or None for t in col] if 0 in col else col


def _fields(entries: Sequence[dict[Any, Any]]) -> tuple[set[Any], Callable[..., list[Any]]]:
    """The keys of the entries, and ``col(key, default=None)``: that key's value in each entry (``default`` where
    it is absent)."""
    n = len(entries)
    order = tuple(entries[0]) if n else ()
    if n and all(map(order.__eq__, map(tuple, entries))):  # the usual: every entry the same keys, in one order
        by_key = dict(zip(order, map(list, zip(*map(dict.values, entries), strict=True)), strict=True))
        return set(order), lambda key, default=None: by_key[key] if key in by_key else [default] * n
    return set().union(*entries), lambda key, default=None: list(map(dict.get, entries, repeat(key), repeat(default)))


def _fast_cols(obj: Any, b: _Budget) -> FrCols | None:
    """The entries of ``obj`` by column, checked as :func:`_row` checks each entry, with the objects along every
    path below ``entries`` counted into ``b`` as :func:`_shape_ok` counts them; None when the dump is not of the
    usual shape (a dict with a list of dicts whose fields hold the usual types, each container of a field
    holding scalars only): the caller then reads it entry by entry, which finds the error if there is one."""
    entries: Any = obj.get("entries") if type(obj) is dict else None
    if type(entries) not in _SEQ or type(obj.get("version")) is not str or not _types_in(entries, _DICT):
        return None
    n = len(entries)
    if not b.take(2 * n + 1 + 2 * sum(map(len, entries))):
        return None
    keys, col = _fields(entries)
    seq_key = "collective_seq_id" if "collective_seq_id" in keys else "seq_id"
    if not _types_in(keys, _STR):
        return None
    for k in keys - _READ - {seq_key}:
        if not _CONTAINERS.isdisjoint(map(type, col(k))):
            return None
    pgs = col("process_group")
    if not _types_in(pgs, _SEQ) or not set(map(len, pgs)) <= {2} or not b.take(3 * n):
        return None
    names, descs = list(map(_first, pgs)), list(map(_second, pgs))
    ints = [col(k) for k in ("record_id", seq_key, "pg_id", "p2p_seq_id", "op_id", "timeout_ms")]
    times = [col(k) for k in ("time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns")]
    rid, seq, pg_id, p2p, op_id, timeout = ints
    scalars_ok = (
        _ints_ok(rid, _INT)
        and _ints_ok(seq, _INT)
        and all(_ints_ok(c, _OPT_INT) for c in ints[2:] + times)
        and _types_in(names, _STR)
        and _types_in(descs, _STR)
        and _types_in(prof := col("profiling_name"), _STR)
        and _types_in(state := col("state", ""), _STR)
        and _types_in(is_p2p := col("is_p2p", False), _BOOL)
        and _types_in(retired := col("retired"), _OPT_BOOL)
    )
    if not scalars_ok or not _frames_ok(col("frames"), b):
        return None
    sizes = [_sizes_col(col(k), b) for k in ("input_sizes", "output_sizes")]
    dtypes = [_strs_col(col(k), b) for k in ("input_dtypes", "output_dtypes")]
    if sizes[0] is None or sizes[1] is None or dtypes[0] is None or dtypes[1] is None:
        return None
    return FrCols(
        rid, names, descs, pg_id, seq, [0 if v is None else v for v in p2p] if None in p2p else p2p, op_id, prof,
        is_p2p, sizes[0], sizes[1], dtypes[0], dtypes[1], state, retired, _no_zero(times[0]), _no_zero(times[1]),
        _no_zero(times[2]), timeout, [()] * n,
    )  # fmt: skip


def _read(data: bytes, frames: bool, columns: bool) -> tuple[FrScan, FrCols | None]:
    """The dump's header and, by column (:func:`_fast_cols`) where ``columns`` and the dump has the usual shape,
    its entries; else its entries as rows. The checks and their errors are the same either way."""
    fmt, obj = _load(data)
    budget = _Budget(2 * len(data) + 64)
    cols = _fast_cols(obj, budget) if columns else None
    # with the columns, the objects below entries are counted (the frames' count bounded from above): the rest of
    # the dump as _shape_ok counts it; over the budget (maybe only by the bound), the exact check decides
    ok = cols is not None and _shape_ok({k: v for k, v in obj.items() if k != "entries"}, budget.left - 2)
    if not ok:
        ok = not isinstance(obj, (dict, list, tuple)) or _shape_ok(obj, 2 * len(data) + 64)
    if not ok:
        raise ParseError(
            FMT, None, f"containers nested at most {MAX_DEPTH} deep, about one object per input byte", "refused"
        )
    if not isinstance(obj, dict) or "entries" not in obj or "version" not in obj:
        raise ParseError(FMT, None, "a dict with 'version' and 'entries'", _short(obj))
    entries = obj["entries"]
    if not isinstance(entries, (list, tuple)):
        raise ParseError(FMT, None, "entries as a list", _short(entries))
    version = obj["version"]
    if not isinstance(version, str):
        raise ParseError(FMT, None, "version as a string like '2.10'", _short(version))
    lib = obj.get("comm_lib_version", "")
    head = FrScan(
        fmt,
        version,
        lib if isinstance(lib, str) else "",
        _groups(obj.get("pg_config")),
        _status(obj.get("pg_status")),
        [],
    )
    if cols is not None:
        return head, cols
    texts: dict[int, str] | None = {} if frames else None
    return head._replace(rows=[_row(i, e, texts) for i, e in enumerate(entries)]), None


def scan_flight_recorder(data: bytes, frames: bool = False) -> FrScan:
    """One rank's Flight Recorder dump from its bytes, checked as :func:`parse_flight_recorder` checks it, with
    its entries in the lean form :class:`FrRow` (no pydantic object per entry); stack frames are checked but
    formatted only when ``frames``.

    Raises:
        ParseError: as :func:`parse_flight_recorder`.
    """
    if not isinstance(data, bytes):
        raise ParseError(FMT, None, "bytes", type(data).__name__)
    with gc_paused():
        return _read(data, frames, columns=False)[0]


def scan_columns(data: bytes) -> FrTable:
    """One rank's Flight Recorder dump from its bytes, checked as :func:`parse_flight_recorder` checks it (the
    same errors), with its entries by column (:class:`FrCols`; frames checked, not formatted): what matching
    many ranks' dumps needs. A dump of the usual shape is checked and read in bulk, a pass over each field
    instead of a call per entry, its objects along every path counted as :func:`_shape_ok` counts them; any
    other is read entry by entry (:func:`scan_flight_recorder`), which names the error if there is one.

    Raises:
        ParseError: as :func:`parse_flight_recorder`.
    """
    if not isinstance(data, bytes):
        raise ParseError(FMT, None, "bytes", type(data).__name__)
    with gc_paused():
        head, cols = _read(data, False, columns=True)
    return FrTable(
        head.format, head.version, head.comm_lib_version, head.groups, head.status, cols or FrCols.of(head.rows)
    )


def parse_flight_recorder(data: bytes) -> FrDump:
    """One rank's Flight Recorder dump from its bytes (pickle or JSON, told apart by the first byte).

    Raises:
        ParseError: empty input, not a pickle or JSON, a pickle naming any global (class, function: refused
            before anything runs), nesting deeper than :data:`MAX_DEPTH` or more objects along every path than
            about one per input byte (memo-shared containers), no ``version``/``entries``, or an entry without
            ``record_id``, ``process_group``, ``collective_seq_id`` and ``profiling_name`` of the right types.
    """
    return scan_flight_recorder(data, frames=True).dump()
