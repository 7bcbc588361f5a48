"""Matching Flight Recorder dumps across ranks (orchestrator/postmortem/flight.py) on the real gloo dumps of
tests/fixtures/flight_recorder, and on subsets or corrupted copies of them (built in tmp_path, named as such);
and the same question put to PyTorch's own analyzer (``torch.distributed.flight_recorder``), when importable."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.postmortem import flight
from fleetdx.orchestrator.postmortem.flight import (
    analyze,
    analyze_dir,
    find_dumps,
    missing_evidence,
    read_dump,
    to_causes,
    to_timeline,
)
from fleetdx.probes.contracts import Severity
from fleetdx.probes.errors import ConfigError
from fleetdx.probes.parsers.flight_recorder import FrDump, FrGroup, FrGroupStatus

FIX = Path(__file__).parent / "fixtures" / "flight_recorder"
SKIP = FIX / "gloo_rank3_skips_allreduce"
DTYPE = FIX / "gloo_rank2_wrong_dtype"
#: the job layout make_dumps.py ran (gloo dumps do not record it): the default group and pair01
LAYOUT = {"0": ("default_pg", [0, 1, 2, 3]), "1": ("pair01", [0, 1])}


@pytest.mark.parametrize("kind", ["pickle", "json"])
def test_rank3_named_missing_at_first_divergence(kind: str) -> None:
    a = analyze_dir(SKIP / kind)
    assert a.ranks == [0, 1, 2, 3] and a.no_dump_ranks == [] and a.unreadable == {}
    assert a.backends == ["gloo"] and a.version == "2.10"
    first = a.first
    assert first is not None and len(a.divergences) == 1  # pair01 (ranks 0, 1) both stopped at seq 4: no divergence
    assert (first.kind, first.pg_name, first.pg_desc, first.seq_id) == ("missing", "0", "default_pg", 5)
    assert first.culprit_ranks == [3] and first.waiting_ranks == [0, 1, 2]
    assert (first.op, first.input_sizes, first.input_dtypes) == ("gloo:all_reduce", [[1024]], ["Float"])
    assert "last seq reached: rank 3: 4" in first.detail
    # evidence: rank 3's last collective (seq 4, its own file), then one waiting rank's entry at seq 5
    assert [(e.rank, e.seq_id, e.file) for e in first.evidence] == [
        (3, 4, "nccl_trace_rank_3"),
        (0, 5, "nccl_trace_rank_0"),
    ]
    assert first.time_created_ns is not None
    views = {g.desc: g for g in a.groups}
    assert views["default_pg"].membership == "world" and views["default_pg"].last_seq == {0: 5, 1: 5, 2: 5, 3: 4}
    assert views["pair01"].members == [0, 1] and views["pair01"].membership == "entries"
    assert any("gloo records no start/completion" in n for n in a.notes)


@pytest.mark.parametrize("kind", ["pickle", "json"])
def test_rank2_dtype_mismatch(kind: str) -> None:
    a = analyze_dir(DTYPE / kind)
    first = a.first
    assert first is not None and len(a.divergences) == 1
    assert (first.kind, first.pg_desc, first.seq_id, first.culprit_ranks) == ("mismatch", "default_pg", 4, [2])
    assert first.waiting_ranks == [0, 1, 3] and first.input_dtypes == ["Float"]
    assert first.evidence[0].rank == 2 and first.evidence[0].input_dtypes == ["Int"]
    assert "rank 2: gloo:all_reduce in [[1024]] Int" in first.detail
    # every rank reached seq 6: nobody is missing
    assert {g.desc: g.last_seq for g in a.groups}["default_pg"] == {0: 6, 1: 6, 2: 6, 3: 6}


def _subset(src: Path, dst: Path, ranks: list[int]) -> Path:
    dst.mkdir()
    for r in ranks:
        shutil.copy(src / f"nccl_trace_rank_{r}", dst / f"nccl_trace_rank_{r}")
    return dst


def test_missing_dump_is_not_judged(tmp_path: Path) -> None:
    """Subset of the real dumps (rank 3's file left out): ranks 0-2 agree, and rank 3 is not condemned on no
    evidence."""
    a = analyze_dir(_subset(SKIP / "pickle", tmp_path / "synth_without_rank3", [0, 1, 2]))
    assert a.divergences == [] and a.first is None
    assert a.ranks == [0, 1, 2]


def test_unreadable_dump_named_and_not_judged(tmp_path: Path) -> None:
    """Copy of the real dumps with rank 3's file cut to half (synthesised damage)."""
    d = _subset(SKIP / "pickle", tmp_path / "synth_rank3_cut", [0, 1, 2, 3])
    data = (d / "nccl_trace_rank_3").read_bytes()
    (d / "nccl_trace_rank_3").write_bytes(data[: len(data) // 2])
    a = analyze_dir(d)
    assert list(a.unreadable) == ["nccl_trace_rank_3"] and "flight-recorder" in a.unreadable["nccl_trace_rank_3"]
    assert a.no_dump_ranks == [3] and a.divergences == []
    assert any("not judged" in n for n in a.notes)


def test_no_majority_names_every_side(tmp_path: Path) -> None:
    """Subset of the real dtype dumps (ranks 2 and 3 only): one Int, one Float at seq 4: no majority."""
    a = analyze_dir(_subset(DTYPE / "json", tmp_path / "synth_ranks23", [2, 3]))
    first = a.first
    assert first is not None and first.kind == "mismatch" and first.seq_id == 4
    assert first.culprit_ranks == [2, 3] and first.waiting_ranks == [] and "no majority" in first.detail
    assert a.no_dump_ranks == [0, 1]


def test_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        analyze_dir(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no Flight Recorder dump"):
        analyze_dir(tmp_path / "empty")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(SKIP / "json" / "nccl_trace_rank_0", mixed / "jobA_0")
    shutil.copy(SKIP / "json" / "nccl_trace_rank_1", mixed / "other_1")
    with pytest.raises(ConfigError, match="several prefixes"):
        analyze_dir(mixed)
    assert [(r, p.name) for r, p in find_dumps(mixed, prefix="other_")] == [(1, "other_1")]
    tmpdir = _subset(SKIP / "json", tmp_path / "like_tmp", [0, 1])
    (tmpdir / "tmpab12").write_text("x")  # other files of /tmp ending in digits: the default prefix wins
    assert [p.name for _, p in find_dumps(tmpdir)] == ["nccl_trace_rank_0", "nccl_trace_rank_1"]
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "nccl_trace_rank_0").write_bytes(b"garbage")
    with pytest.raises(ConfigError, match="could be read"):
        analyze_dir(bad)


# ---- PyTorch's own analyzer on the same dumps -------------------------------------------------------------


def _torch_collectives(src: Path, dst: Path, *extra: str) -> list[Any]:
    """PyTorch's fr_trace ``build_db`` on the real dumps, their ``pg_config`` filled with the job's real layout
    (gloo records none, and fr_trace stops with a KeyError without it). Our own fixtures, so torch's loader
    (``pickle.load``) may read them."""
    builder = pytest.importorskip("torch.distributed.flight_recorder.components.builder")
    config = pytest.importorskip("torch.distributed.flight_recorder.components.config_manager")
    loader = pytest.importorskip("torch.distributed.flight_recorder.components.loader")
    dst.mkdir()
    for f in sorted(src.iterdir()):
        rank = int(f.name.rsplit("_", 1)[1])
        d = pickle.loads(f.read_bytes())  # noqa: S301 - our own fixture, for torch's analyzer
        d["pg_config"] = {
            k: {"name": k, "desc": desc, "ranks": str(ranks)} for k, (desc, ranks) in LAYOUT.items() if rank in ranks
        }
        (dst / f.name).write_bytes(pickle.dumps(d))
    args = config.JobConfig().parse_args([str(dst), *extra])
    details, version = loader.read_dir(args)
    return list(builder.build_db(details, args, version).collectives)


def test_torch_analyzer_names_the_same_missing_rank(tmp_path: Path) -> None:
    colls = _torch_collectives(SKIP / "pickle", tmp_path / "torch_skip")
    theirs = [(c.pg_desc, c.collective_seq_id, sorted(c.missing_ranks)) for c in colls if c.missing_ranks]
    first = analyze_dir(SKIP / "pickle").first
    assert first is not None
    ours = [(f"{first.pg_name}:{first.pg_desc}", first.seq_id, first.culprit_ranks)]
    assert theirs == ours == [("0:default_pg", 5, [3])]


def test_torch_analyzer_misreads_the_dtype_dumps(tmp_path: Path) -> None:
    """Where the two disagree, and why (see flight.py's module doc): fr_trace aligns ranks by ``record_id``, a
    per-rank counter across groups, so it drops ranks 2 and 3's entries up to seq 4 (they are in one group,
    ranks 0 and 1 in two), names them missing at seq 3, and never sees rank 2's int32 all-reduce, which the
    script that made the dumps did issue. If a torch upgrade changes this, re-check and update this test."""
    colls = _torch_collectives(DTYPE / "pickle", tmp_path / "torch_dtype")
    theirs = [(c.collective_seq_id, sorted(c.missing_ranks)) for c in colls if c.missing_ranks]
    assert theirs[0] == (3, [2, 3])
    assert not any(c.type_of_mismatch for c in colls)
    first = analyze_dir(DTYPE / "pickle").first
    assert first is not None and (first.seq_id, first.culprit_ranks) == (4, [2])


# ---- the same dumps in memory, and edited copies of them (synthesised, named as such) ---------------------


def _loaded(folder: Path) -> dict[int, tuple[str, Any]]:
    return {r: (p.name, read_dump(p)) for r, p in find_dumps(folder)}


def test_in_memory_analysis_equals_streamed() -> None:
    for folder in (SKIP / "pickle", DTYPE / "json"):
        assert analyze(_loaded(folder), str(folder)) == analyze_dir(folder)


@pytest.mark.parametrize("folder", sorted({p.parent for p in FIX.glob("*/*/nccl_trace_rank_*")}), ids=str)
def test_parallel_analysis_equals_serial_on_real_dumps(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker processes (forced even for a few dumps) give the very result of reading the dumps here."""
    serial = analyze_dir(folder, jobs=1)
    monkeypatch.setattr(flight, "PARALLEL_MIN", 1)
    assert analyze_dir(folder, jobs=2) == serial


def test_parallel_analysis_equals_serial_on_synth_dumps(tmp_path: Path) -> None:
    """A synthesised job of PARALLEL_MIN + 6 ranks from the real dumps: ranks cycle through the four ranks of the
    dtype-mismatch job (so the ranks' signature tables differ and are renumbered when merged), every fifth rank
    reads the JSON dump, one file is cut (unreadable), the last rank's last default_pg entry is dropped."""
    folder = tmp_path / "synth_fr_parallel"
    folder.mkdir()
    n = flight.PARALLEL_MIN + 6
    for r in range(n):
        src = DTYPE / ("json" if r % 5 == 0 else "pickle") / f"nccl_trace_rank_{r % 4}"
        data = src.read_bytes()
        if r == n - 1:
            doc = pickle.loads(DTYPE.joinpath("pickle", "nccl_trace_rank_1").read_bytes())  # noqa: S301 - our fixture
            last = max(i for i, e in enumerate(doc["entries"]) if e["process_group"][1] == "default_pg")
            del doc["entries"][last]
            doc["pg_status"] = {}
            data = pickle.dumps(doc)
        if r == 7:
            data = data[: len(data) // 2]
        (folder / f"nccl_trace_rank_{r}").write_bytes(data)
    serial = analyze_dir(folder, jobs=1)
    assert list(serial.unreadable) == ["nccl_trace_rank_7"] and len(serial.ranks) == n - 1
    first = serial.first
    assert first is not None and (first.kind, first.seq_id) == ("mismatch", 4)
    assert first.culprit_ranks == [r for r in range(2, n, 4) if r != 7]
    assert {g.desc: g.last_seq for g in serial.groups}["default_pg"][n - 1] == 5
    assert analyze_dir(folder, jobs=2) == serial


def test_parallel_analysis_through_a_forkserver_equals_serial(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where threads run (the HTTP service) workers come from a forkserver, not a fork of this process."""
    folder = DTYPE / "pickle"
    serial = analyze_dir(folder, jobs=1)
    monkeypatch.setattr(flight, "PARALLEL_MIN", 1)
    monkeypatch.setattr(flight, "_start_method", lambda: "forkserver")
    assert analyze_dir(folder, jobs=2) == serial


def test_synth_group_left_ring_buffer_is_read_from_pg_status() -> None:
    """Rank 0's pair01 entries removed (as if its ring buffer had dropped them), its pg_status kept: rank 0 is
    still a pair01 member that reached seq 4, not a rank that never got there."""
    dumps = _loaded(SKIP / "pickle")
    name, d0 = dumps[0]
    dumps[0] = (name, d0.model_copy(update={"entries": [e for e in d0.entries if e.pg_desc != "pair01"]}))
    a = analyze(dumps, "synth_rank0_pair01_dropped")
    assert {g.desc: g.last_seq for g in a.groups}["pair01"] == {0: 4, 1: 4}
    first = a.first
    assert first is not None and len(a.divergences) == 1 and first.culprit_ranks == [3]


def test_synth_sparse_sequence_ids_do_not_allocate_the_span() -> None:
    """Rank 3's last entry renumbered to seq 10**12 (hostile input): compared as a sparse record, and the
    gap it leaves at seq 4 names rank 3 missing there, not the three consistent ranks."""
    dumps = _loaded(SKIP / "json")
    name, d3 = dumps[3]
    last = d3.entries[-1].model_copy(update={"collective_seq_id": 10**12})
    dumps[3] = (name, d3.model_copy(update={"entries": [*d3.entries[:-1], last]}))
    first = analyze(dumps, "synth_sparse").first
    assert first is not None and first.kind == "missing" and first.seq_id == 4
    assert first.culprit_ranks == [3]  # rank 3's seq 4 is gone; it reached 10**12, but never recorded 4


# ---- into the postmortem's contracts ----------------------------------------------------------------------


def test_causes_of_the_skip_dumps() -> None:
    a = analyze_dir(SKIP / "pickle")
    (cause,) = to_causes(a, rank_hosts={3: "sim4", 0: "sim1"})
    assert cause.code is FindingCode.NCCL_TIMEOUT and cause.severity is Severity.CRITICAL
    assert (cause.rank, cause.host, cause.nodes) == (3, "sim4", ["sim4"])
    assert "rank 3 never issued gloo:all_reduce #5 of group 0:default_pg while 3 ranks waited" in cause.message
    assert cause.time is not None and cause.time.endswith("Z") and cause.time.startswith("2026-11-24T")
    ev = cause.evidence
    assert [Path(e.file).name for e in ev] == ["nccl_trace_rank_3", "nccl_trace_rank_0"]
    assert ev[0].line == 4 and "collective_seq_id 4" in ev[0].text and "[[1024]] Float" in ev[0].text
    assert ev[1].line == 8 and "collective_seq_id 5" in ev[1].text and "make_dumps.py" in ev[1].text
    assert Path(ev[0].file).parent == SKIP / "pickle"
    assert missing_evidence(a) == []
    tl = to_timeline(a, {3: "sim4"})
    assert [(t.rank, t.host, t.kind) for t in tl] == [(3, "sim4", "flight-recorder"), (0, None, "flight-recorder")]


def test_causes_of_the_dtype_dumps() -> None:
    (cause,) = to_causes(analyze_dir(DTYPE / "json"))
    assert cause.code is FindingCode.CONFIG_ERROR and cause.rank == 2 and cause.host is None and cause.nodes == []
    assert "collective desync" in cause.message and "Int" in cause.message
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in cause.action


def test_no_divergence_is_missing_evidence_not_a_cause(tmp_path: Path) -> None:
    d = _subset(SKIP / "pickle", tmp_path / "synth_without_rank3", [0, 1, 2])
    a = analyze_dir(d)
    assert to_causes(a) == []
    (line,) = missing_evidence(a)
    assert "3 dumps" in line and "no rank is missing" in line


def test_unreadable_is_missing_evidence(tmp_path: Path) -> None:
    d = _subset(SKIP / "json", tmp_path / "synth_rank3_garbage", [0, 1, 2, 3])
    (d / "nccl_trace_rank_3").write_bytes(b"\x80\x04garbage")
    lines = missing_evidence(analyze_dir(d))
    assert any("nccl_trace_rank_3: Flight Recorder dump not read" in x for x in lines)
    assert any("no readable dump from ranks [3]" in x for x in lines)


# ---- any set of parsed dumps: analysis never raises, names only dumped ranks --------------------------------

REAL_ENTRY = read_dump(SKIP / "json" / "nccl_trace_rank_0").entries[0]
FUZZ = settings(max_examples=120, deadline=None, derandomize=True, database=None)


@st.composite
def dump_sets(draw: st.DrawFn) -> dict[int, tuple[str, FrDump]]:
    ranks = draw(st.lists(st.integers(0, 7), min_size=1, max_size=6, unique=True))
    out: dict[int, tuple[str, FrDump]] = {}
    for r in ranks:
        n = draw(st.integers(0, 8))
        entries = [
            REAL_ENTRY.model_copy(
                update={
                    "record_id": i,
                    "collective_seq_id": draw(st.integers(-2, 12)),
                    "pg_name": draw(st.sampled_from(["0", "1", "x"])),
                    "pg_desc": draw(st.sampled_from(["default_pg", "pair01", ""])),
                    "pg_id": draw(st.sampled_from([0, 1, None])),
                    "input_dtypes": draw(st.sampled_from([["Float"], ["Int"], []])),
                    "is_p2p": draw(st.booleans()),
                    "time_created_ns": draw(st.sampled_from([None, 0, 1, 2**63 - 1, -(2**63)])),
                }
            )
            for i in range(n)
        ]
        status = [
            FrGroupStatus(key=k, last_enqueued=draw(st.sampled_from([None, 0, 3, 20])))
            for k in draw(st.lists(st.sampled_from(["0", "1", "9", "x"]), max_size=3, unique=True))
        ]
        groups = [FrGroup(key="0", name="0", desc="default_pg", ranks=draw(st.sampled_from([None, [0, 1], [5]])))]
        out[r] = (
            f"nccl_trace_rank_{r}",
            FrDump(format="json", version="2.10", entries=entries, status=status, groups=groups),
        )
    return out


@FUZZ
@given(dump_sets())
def test_fuzz_analysis_never_raises(dumps: dict[int, tuple[str, FrDump]]) -> None:
    a = analyze(dumps, "synth_fuzz")
    for d in a.divergences:
        assert d.culprit_ranks and set(d.culprit_ranks) <= set(dumps)
        assert set(d.waiting_ranks) <= set(dumps) and not set(d.waiting_ranks) & set(d.culprit_ranks)
    to_causes(a)
    to_timeline(a)
    missing_evidence(a)


EXITS = FIX / "gloo_rank3_exits_early"


def test_exited_rank_without_dump() -> None:
    """Rank 3 ran out of data and exited: no dump. Ranks 0-2 all stopped at default_pg seq 5; FR alone cannot
    name rank 3 (it is not judged), but with the job's world size it is the member that left no dump."""
    a = analyze_dir(EXITS / "pickle")
    assert a.ranks == [0, 1, 2] and a.divergences == [] and to_causes(a) == []
    assert {g.desc: g.last_seq for g in a.groups}["default_pg"] == {0: 5, 1: 5, 2: 5}
    b = analyze_dir(EXITS / "json", world_size=4)
    assert b.no_dump_ranks == [3] and b.divergences == []
    lines = missing_evidence(b)
    assert any("no readable dump from ranks [3]" in x for x in lines)
    assert any(
        "dumped ranks of group 0:default_pg all stopped at collective #5; members [3] left no dump" in x for x in lines
    )
    c = analyze_dir(EXITS / "json", world_size=2)
    assert any("beyond the world size 2" in n for n in c.notes)


def test_torch_analyzer_also_does_not_judge_the_rank_without_dump(tmp_path: Path) -> None:
    """Both leave rank 3 (no dump) unjudged: fr_trace (with --allow-incomplete-ranks) logs "We cannot decide ...
    missed FR dumps from ranks ({3})" and names no missing rank; fleetdx lists it in no_dump_ranks."""
    colls = _torch_collectives(EXITS / "pickle", tmp_path / "torch_exits", "--allow-incomplete-ranks")
    assert colls and not any(c.missing_ranks for c in colls)
    a = analyze_dir(EXITS / "pickle", world_size=4)
    assert a.divergences == [] and a.no_dump_ranks == [3]


def test_sizes_compared_as_fr_trace_does() -> None:
    """Copies of a real entry renamed to other collectives, one rank's sizes changed (synthesised): all_gather and
    reduce_scatter sizes must agree (a substring match on 'gather'/'scatter' must not excuse them); all-to-all
    and gather outputs may differ; send/recv are not matched by collective sequence id."""

    def run(op: str, field: str) -> list[int]:
        dumps = _loaded(SKIP / "json")
        for r, (name, d) in list(dumps.items()):
            entries = [e.model_copy(update={"profiling_name": f"gloo:{op}"}) for e in d.entries]
            if r == 1:
                entries = [e.model_copy(update={field: [[7]]}) if e.collective_seq_id == 2 else e for e in entries]
            dumps[r] = (name, d.model_copy(update={"entries": entries}))
        first = analyze(dumps, f"synth_{op}").first
        return first.culprit_ranks if first is not None and first.kind == "mismatch" else []

    assert run("all_gather", "input_sizes") == [1]
    assert run("reduce_scatter", "output_sizes") == [1]
    assert run("all_to_all_single", "input_sizes") == []
    assert run("gather", "output_sizes") == []
    assert run("send", "input_sizes") == []
    assert run("all_reduce", "input_sizes") == [1]


# --- NCCL: a collective the GPU never started (real dump written by ProcessGroupNCCL's watchdog on an H100) ---

NCCL_STALL = FIX / "nccl_1rank_gpu_stall"


def test_real_nccl_dump_names_the_rank_whose_gpu_never_started_the_collective() -> None:
    a = analyze_dir(NCCL_STALL / "pickle")
    assert a.backends == ["nccl"] and a.version == "2.10"
    (d,) = a.divergences
    assert (d.kind, d.seq_id, d.op, d.culprit_ranks, d.waiting_ranks) == (
        "not_started",
        5,
        "nccl:all_reduce",
        [0],
        [],
    )
    (cause,) = to_causes(a, rank_hosts={0: "h100-lent"})
    assert cause.code is FindingCode.NCCL_TIMEOUT and (cause.rank, cause.host) == (0, "h100-lent")
    assert "rank 0 enqueued nccl:all_reduce #5 of group 0:default_pg but its GPU never started it" in cause.message
    assert "state scheduled" in cause.evidence[0].text and "make_nccl_dump.py" in cause.evidence[0].text
    assert missing_evidence(a) == []


def _synth_ranks(dst: Path, states: dict[int, str], track_starts: bool = True) -> Path:
    """SYNTHESISED from the real rank-0 NCCL dump: one copy per rank, the last entry's state set as given
    (``started`` gets a start time), start times removed everywhere when ``track_starts`` is false."""
    real = pickle.loads((NCCL_STALL / "pickle" / "nccl_trace_rank_0").read_bytes())
    dst.mkdir(parents=True)
    for rank, state in states.items():
        d = pickle.loads(pickle.dumps(real))
        d["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": str(sorted(states))}}
        last = d["entries"][-1]
        last["state"] = state
        if state == "started":
            last["time_discovered_started_ns"] = last["time_created_ns"] + 1000
        if not track_starts:
            for e in d["entries"]:
                e["time_discovered_started_ns"] = None
        (dst / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(d))
    return dst


def test_synth_the_not_started_rank_is_named_and_the_waiting_ranks_are_not(tmp_path: Path) -> None:
    a = analyze_dir(_synth_ranks(tmp_path / "synth", {0: "started", 1: "started", 2: "scheduled", 3: "started"}))
    (d,) = a.divergences
    assert (d.kind, d.culprit_ranks, d.waiting_ranks) == ("not_started", [2], [0, 1, 3])
    (cause,) = to_causes(a)
    assert cause.rank == 2 and "while 3 ranks waited inside it" in cause.message


def test_synth_scheduled_is_no_evidence_when_starts_are_not_tracked(tmp_path: Path) -> None:
    """Without TORCH_NCCL_ENABLE_TIMING, ProcessGroupNCCL records no start: a running collective reads
    ``scheduled`` too, so nothing is concluded from it."""
    d = _synth_ranks(tmp_path / "synth", {0: "scheduled", 1: "scheduled"}, track_starts=False)
    a = analyze_dir(d)
    assert a.divergences == [] and to_causes(a) == []


def test_synth_every_rank_not_started_names_all_and_none_alone(tmp_path: Path) -> None:
    a = analyze_dir(_synth_ranks(tmp_path / "synth", {0: "scheduled", 1: "scheduled"}))
    (d,) = a.divergences
    assert (d.kind, d.culprit_ranks, d.waiting_ranks) == ("not_started", [0, 1], [])
    (cause,) = to_causes(a)
    assert cause.rank is None and "ranks [0, 1]" in cause.message
