"""The Flight Recorder dump parser on the real gloo dumps of tests/fixtures/flight_recorder (facts read from the
files by eye, see its README), on hostile pickles (nothing in them may run), and under hypothesis fuzzing (only
ParseError ever escapes)."""

from __future__ import annotations

import io
import json
import os
import pickle
import pickletools
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers import flight_recorder
from fleetdx.probes.parsers.flight_recorder import MAX_FRAMES, FrDump, parse_flight_recorder

FIX = Path(__file__).parent / "fixtures" / "flight_recorder"
SKIP = FIX / "gloo_rank3_skips_allreduce"
DTYPE = FIX / "gloo_rank2_wrong_dtype"
ALL_DUMPS = sorted(FIX.glob("*/*/nccl_trace_rank_*"))

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _parse(path: Path) -> FrDump:
    return parse_flight_recorder(path.read_bytes())


def test_fixtures_are_all_here() -> None:
    # gloo: 4 + 4 + 3 ranks (rank 3 of gloo_rank3_exits_early left none), pickle and JSON; NCCL: one pickle
    assert len(ALL_DUMPS) == 23


@pytest.mark.parametrize("kind", ["pickle", "json"])
def test_rank3_skip_facts(kind: str) -> None:
    r0 = _parse(SKIP / kind / "nccl_trace_rank_0")
    r3 = _parse(SKIP / kind / "nccl_trace_rank_3")
    assert r0.format == kind and r0.version == "2.10"
    # rank 0: 8 entries (the ring size), record ids 1-8, default_pg and pair01 interleaved
    assert [e.record_id for e in r0.entries] == list(range(1, 9))
    assert [(e.pg_desc, e.collective_seq_id) for e in r0.entries][-2:] == [("pair01", 4), ("default_pg", 5)]
    last = r0.entries[-1]
    assert (last.pg_name, last.op, last.profiling_name) == ("0", "all_reduce", "gloo:all_reduce")
    assert last.input_sizes == [[1024]] and last.input_dtypes == ["Float"] and last.output_sizes == [[1024]]
    assert last.state == "scheduled" and last.retired is True and last.timeout_ms == 3000
    assert last.time_started_ns is None and last.time_completed_ns is None  # gloo reports neither
    assert last.time_created_ns is not None and last.time_created_ns > 1_700_000_000 * 10**9
    # rank 3 stopped at default_pg seq 4
    assert [e.collective_seq_id for e in r3.entries] == [1, 2, 3, 4]
    st0 = {s.key: s for s in r0.status}
    assert st0["0"].last_enqueued == 5 and st0["1"].last_enqueued == 4 and st0["0"].last_started is None
    assert {s.key: s.last_enqueued for s in r3.status} == {"0": 4}
    # gloo's pg_config: one entry keyed "" (not the groups' membership)
    assert [(g.key, g.ranks) for g in r0.groups] == [("", None)]
    assert [(g.key, g.ranks) for g in r3.groups] == [("", [0, 1, 2, 3])]


def test_pickle_and_json_agree_but_for_frames() -> None:
    for p in sorted(FIX.glob("gloo_*/pickle/nccl_trace_rank_*")):  # the NCCL watchdog writes the pickle only
        a, b = _parse(p), _parse(p.parent.parent / "json" / p.name)
        assert a.entries and all(e.frames for e in a.entries) and not any(e.frames for e in b.entries)
        strip = [e.model_copy(update={"frames": []}) for e in a.entries]
        assert strip == b.entries
        assert a.status == b.status and a.groups == b.groups
        assert len(a.entries[0].frames) <= MAX_FRAMES
        assert a.entries[0].frames[0].startswith(f"{a.entries[0].op} at ")


def test_dtype_fact() -> None:
    r2 = _parse(DTYPE / "pickle" / "nccl_trace_rank_2")
    assert [(e.collective_seq_id, e.input_dtypes) for e in r2.entries][3] == (4, ["Int"])


def test_real_dumps_use_no_global() -> None:
    """The reason the restricted unpickler suffices: the dumps torch writes name no class or function."""
    for p in (SKIP / "pickle").iterdir():
        ops = {op.name for op, _, _ in pickletools.genops(p.read_bytes())}
        assert not ops & {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "EXT1"}


class _Boom:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


class _Obj:
    pass


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_code_running_pickle_is_refused_and_does_not_run(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "ran"
    payload = pickle.dumps({"version": "2.10", "entries": [], "x": _Boom(marker)}, protocol=protocol)
    with pytest.raises(ParseError, match="refused"):
        parse_flight_recorder(payload)
    assert not marker.exists()
    # sanity: the default unpickler would have run it
    pickle.loads(payload)
    assert marker.exists()


def test_objects_and_builtins_refused() -> None:
    for obj in (_Obj(), {"version": "2.10", "entries": [set([1])]}, {"version": "2.10", "entries": [], "b": eval}):
        with pytest.raises(ParseError):
            parse_flight_recorder(pickle.dumps(obj, protocol=4))


def test_persistent_id_refused() -> None:
    buf = io.BytesIO()

    class P(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            return "x" if obj == "p" else None

    P(buf, protocol=2).dump({"version": "2.10", "entries": ["p"]})
    with pytest.raises(ParseError, match="persistent"):
        parse_flight_recorder(buf.getvalue())


def test_shared_reference_bomb_refused() -> None:
    """A pickle that shares one list many times through its memo: a few KB standing for 100**6 paths."""
    x: list[Any] = [0]
    for _ in range(6):
        x = [x] * 100
    payload = pickle.dumps({"version": "2.10", "entries": x}, protocol=2)
    assert len(payload) < 10_000
    with pytest.raises(ParseError, match="nested|object per input byte"):
        parse_flight_recorder(payload)


def test_deep_nesting_refused() -> None:
    n = 100_000  # a pickle of lists nested n deep, written by hand (pickle.dumps itself would recurse)
    deep = b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b"."
    with pytest.raises(ParseError, match="nested"):
        parse_flight_recorder(deep)
    with pytest.raises(ParseError):
        parse_flight_recorder(b'{"version": "2.10", "entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"   ",
        b"not a dump",
        b"\x80\x04",
        b"{",
        b'{"version": 2, "entries": []}',
        b'{"version": "2.10"}',
        b'{"version": "2.10", "entries": [{"record_id": 0}]}',
        b'{"version": "2.10", "entries": [], "pg_config": {"0": {"ranks": "__import__(\'os\')"}}}',
        json.dumps({"version": "2.10", "entries": [{"record_id": 10**30}]}).encode(),
        pickle.dumps([1, 2, 3]),
        pickle.dumps({"version": "2.10", "entries": [{"record_id": 2**70, "process_group": ("0", "d")}]}),
    ],
)
def test_bad_input_is_parse_error(data: bytes) -> None:
    with pytest.raises(ParseError):
        parse_flight_recorder(data)


def test_old_seq_id_key_and_list_ranks() -> None:
    """Dumps before format 2.2 name the sequence id ``seq_id``; ranks may be a list."""
    doc = {
        "version": "2.1",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": [0, 1]}},
        "entries": [{"record_id": 0, "process_group": ["0", "default_pg"], "seq_id": 7, "profiling_name": "x"}],
    }
    d = parse_flight_recorder(json.dumps(doc).encode())
    assert d.entries[0].collective_seq_id == 7 and d.groups[0].ranks == [0, 1]


REAL_BYTES = [p.read_bytes() for p in ALL_DUMPS]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(REAL_BYTES)))
    op = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "splice"]))
    n = len(data)
    i = draw(st.integers(0, n - 1))
    if op == "flip":
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, n - 1))] = draw(st.integers(0, 255))
    elif op == "truncate":
        del data[i:]
    elif op == "insert":
        data[i:i] = draw(st.binary(min_size=1, max_size=16))
    elif op == "delete":
        del data[i : i + draw(st.integers(1, 32))]
    else:
        other = draw(st.sampled_from(REAL_BYTES))
        data = data[:i] + other[draw(st.integers(0, len(other) - 1)) :]
    return bytes(data)


def _only_parse_error(data: bytes) -> None:
    try:
        parse_flight_recorder(data)
    except ParseError:
        pass


def _same_answer(data: bytes) -> bool:
    """The column reader (what ``analyze_dir`` reads each rank with) answers as the entry-by-entry reader: the
    same columns, or the same error. True when it read the entries in bulk (not by falling back)."""
    try:
        want: Any = [list(c) for c in flight_recorder.FrCols.of(flight_recorder.scan_flight_recorder(data).rows)]
    except ParseError as e:
        want = str(e)
    try:
        got: Any = [list(c) for c in flight_recorder.scan_columns(data).cols]
    except ParseError as e:
        got = str(e)
    assert got == want
    try:
        return flight_recorder._read(data, False, columns=True)[1] is not None
    except ParseError:
        return False


@FUZZ
@given(mutated())
def test_fuzz_mutated_real_dumps(data: bytes) -> None:
    _only_parse_error(data)


@FUZZ
@given(st.binary(max_size=512))
def test_fuzz_random_bytes(data: bytes) -> None:
    _only_parse_error(data)
    _only_parse_error(b"\x80\x02" + data)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=30,
)
ENTRY_KEYS = st.sampled_from(
    ["record_id", "process_group", "collective_seq_id", "profiling_name", "input_sizes", "input_dtypes",
     "state", "retired", "is_p2p", "frames", "time_created_ns", "pg_id", "timeout_ms"]
)  # fmt: skip


@FUZZ
@given(
    st.dictionaries(ENTRY_KEYS, JSON_VALUES, max_size=13),
    st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=3),
    st.sampled_from(["json", "pickle"]),
)
def test_fuzz_structured_entries(entry: dict[str, Any], extra: dict[str, Any], enc: str) -> None:
    doc = {"version": "2.10", "entries": [entry], "pg_config": extra, "pg_status": extra}
    data = json.dumps(doc).encode() if enc == "json" else pickle.dumps(doc, protocol=4)
    _only_parse_error(data)
    _same_answer(data)


def test_reference_cycle_refused() -> None:
    x: list[Any] = []
    x.append(x)  # pickle keeps the cycle through its memo
    with pytest.raises(ParseError, match="nested"):
        parse_flight_recorder(pickle.dumps({"version": "2.10", "entries": x}, protocol=2))


def test_shared_containers_within_the_budget_are_read() -> None:
    """torch's pickle shares frame dicts between entries; every entry still gets its own frames and sizes."""
    frames = [{"name": "f", "filename": "a.py", "line": 3}] * 4
    sizes = [[1024]]
    entries = [
        {"record_id": i, "process_group": ("0", "default_pg"), "collective_seq_id": i + 1,
         "profiling_name": "nccl:all_reduce", "input_sizes": sizes, "frames": frames}
        for i in range(300)
    ]  # fmt: skip
    d = parse_flight_recorder(pickle.dumps({"version": "2.10", "entries": entries}, protocol=4))
    assert len(d.entries) == 300 and all(e.frames == ["f at a.py:3"] * 4 for e in d.entries)
    assert d.entries[-1].input_sizes == [[1024]] and d.entries[0].input_sizes is not d.entries[1].input_sizes


def _every_path_shape_ok(obj: Any, budget: int) -> bool:
    """The reference: the walk of every path (exponential on shared containers), as the reader once did it."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    seen = 0
    while stack:
        o, d = stack.pop()
        if d >= flight_recorder.MAX_DEPTH:
            return False
        items = [*o.keys(), *o.values()] if isinstance(o, dict) else o
        seen += len(items) + 1
        if seen > budget:
            return False
        stack.extend((v, d + 1) for v in items if isinstance(v, (dict, list, tuple)))
    return True


def _hashable(o: Any) -> bool:
    try:
        hash(o)
    except TypeError:
        return False
    return True


def test_shape_check_is_the_walk_of_every_path() -> None:
    """Random object graphs with shared containers, deep chains and cycles: the linear-time check by container
    identity answers as the walk of every path does."""
    rng = random.Random(22)
    answers = set()
    for _ in range(3000):
        pool: list[Any] = []
        for _ in range(rng.randint(1, 25)):
            kids = [
                rng.choice(pool) if pool and rng.random() < 0.6 else rng.randrange(5) for _ in range(rng.randint(0, 5))
            ]
            kind = rng.randrange(4)
            o: Any = list(kids) if kind == 0 else tuple(kids) if kind == 1 else {f"k{j}": c for j, c in enumerate(kids)}
            if kind == 3 and kids and isinstance(kids[0], tuple) and _hashable(kids[0]):
                o = {kids[0]: 1}  # a tuple key
            if kind == 0 and rng.random() < 0.05:
                o.append(o)
            pool.append(o)
        budget = rng.choice([5, 20, 100, 1000, 10**6])
        want = _every_path_shape_ok(pool[-1], budget)
        assert flight_recorder._shape_ok(pool[-1], budget) == want
        answers.add(want)
    assert answers == {True, False}


_ODD_VALUES: list[Any] = [None, "5", "-3", 0, -1, True, 2**70, -(2**64), [1], (1, 2), {"a": 1}, 1.5, "", [], [[]]]


def _mutate(rng: random.Random, doc: dict[str, Any]) -> dict[str, Any]:
    """A few edits of a real dump's entries: odd values, missing keys, coalesced and point-to-point entries,
    other groups, shared lists, JSON's zeros, frames of other shapes."""
    es = doc["entries"]
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(es))
        e = es[i] = dict(es[i])
        key = rng.choice([*e, "seq_id", "extra"])
        edit = rng.randrange(16)
        if edit >= 8:  # a value of the usual type (sometimes 0 or None, as JSON dumps and older versions write)
            v = e.get(key)
            e[key] = rng.choice([0, None, 7]) if type(v) is int else v
            e[key] = rng.choice(_ODD_VALUES)
        elif edit == 1:
            e.pop(key, None)
        elif edit == 2:
            es.insert(i, dict(e, op_id=rng.randrange(3)))
        elif edit == 3:
            e["profiling_name"] = rng.choice(["nccl:send", "gloo:all_to_all", "gloo:scatter", "x"])
            e["is_p2p"] = rng.random() < 0.3
        elif edit == 4:
            e["process_group"] = rng.choice([("1", "tp"), ["0", "default_pg"], ("0",), ("0", 1)])
        elif edit == 5:
            e["input_sizes"] = es[rng.randrange(len(es))].get("input_sizes")
        elif edit == 6:
            e[rng.choice(["time_created_ns", "time_discovered_started_ns"])] = rng.choice([0, "0", "12", None, 2**64])
        else:
            many = [{"name": "f", "line": 2}] * (MAX_FRAMES + 1) + [5]  # not a dict past MAX_FRAMES: not read
            e["frames"] = rng.choice([None, [], [1], [{"name": [1]}], many, [None], [[1, "2"]]])
    return doc


def test_column_reader_answers_as_the_entry_reader() -> None:
    """Real dumps edited at random (pickle and JSON): the column reader gives the entry reader's columns or its
    error, reading in bulk where the dump has the usual shape and falling back where it has not."""
    rng = random.Random(22)
    docs = [pickle.loads(b) for b in REAL_BYTES if b.startswith(b"\x80")]  # our own fixtures
    bulk = fallback = 0
    for _ in range(400):
        doc = rng.choice(docs)
        doc = _mutate(rng, {**doc, "entries": list(doc["entries"])})
        if rng.random() < 0.2:
            try:
                data = json.dumps(doc).encode()
            except (TypeError, ValueError):
                data = pickle.dumps(doc, protocol=4)
        else:
            data = pickle.dumps(doc, protocol=rng.choice([2, 4, 5]))
        if _same_answer(data):
            bulk += 1
        else:
            fallback += 1
    assert bulk > 50 and fallback > 50
    assert all(_same_answer(b) for b in REAL_BYTES)  # every real dump is read in bulk


def test_column_reader_refuses_what_the_shape_check_refuses() -> None:
    """Memo-shared containers inside the usual shape (every entry the same dict, its sizes one shared list), a
    bomb under a key the reader does not read, in the header, a cycle, deep nesting: refused by the column
    reader too, before anything walks them."""
    shape = [[0] * 100] * 100
    entry = {"record_id": 0, "process_group": ("0", "d"), "collective_seq_id": 1, "profiling_name": "x"}
    bomb: list[Any] = [0]
    for _ in range(6):
        bomb = [bomb] * 100
    cycle: list[Any] = []
    cycle.append(cycle)
    payloads = [
        {"version": "2.10", "entries": [dict(entry, input_sizes=shape)] * 1000},
        {"version": "2.10", "entries": [dict(entry, thread_name=bomb)]},
        {"version": "2.10", "entries": [entry], "pg_config": {"0": {"ranks": bomb}}},
        {"version": "2.10", "entries": [dict(entry, frames=[{"name": bomb}])]},
        {"version": "2.10", "entries": [dict(entry, input_sizes=cycle)]},
    ]
    for doc in payloads:
        data = pickle.dumps(doc, protocol=4)
        assert len(data) < 20_000
        with pytest.raises(ParseError, match="nested|object per input byte"):
            flight_recorder.scan_columns(data)
    head = b"\x80\x02}(X\x07\x00\x00\x00versionX\x04\x00\x00\x002.10X\x07\x00\x00\x00entries"
    deep = head + b"]" * 100_000 + b"a" * 99_999 + b"u."  # {"version": "2.10", "entries": [[[...]]]}
    with pytest.raises(ParseError, match="nested"):
        flight_recorder.scan_columns(deep)
