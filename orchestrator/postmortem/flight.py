"""Which rank hung the job: PyTorch Flight Recorder dumps of every rank, matched across ranks.

Each rank's dump (:mod:`fleetdx.probes.parsers.flight_recorder`) lists its last collectives with, per process
group, a ``collective_seq_id`` that counts 1, 2, 3, ... on every member of the group: the n-th collective a
group issues has the same sequence id on every member. So collectives are matched across ranks by
``(process group, sequence id)``, as PyTorch's own analyzer does (``torch.distributed.flight_recorder``,
``fr_trace``: ``build_collectives`` / ``check_current_entry_match``), and, per group, the first sequence id
where the members diverge is found:

* **missing**: a member never reached it (its last sequence id in the group, from its entries and its
  ``pg_status.last_enqueued_collective``, is lower). Those are the ranks the others waited for: the usual
  answer to "which rank hung the job" (a watchdog timeout on 511 ranks at ``SeqNum=N`` while one rank stopped
  at ``N-1``). nvidia-resiliency-ext's FR attribution (``nvidia_resiliency_ext.attribution.trace_analyzer``,
  v0.5) rests on the same figure, each rank's highest enqueued ``collective_seq_id``. A rank whose record of
  the group holds ids on both sides of N but not N (a ring buffer holds a contiguous run) is missing at N too.
* **mismatch**: every member reached it but issued different collectives there: another operation, other input
  or output sizes (not compared where they differ legitimately: all-to-all splits, the root's side of
  ``scatter``/``gather``, ``all_gather_v``/``reduce_scatter_v``, as in ``fr_trace``'s ``Op.match``) or other
  dtypes. The ranks outside the largest agreeing set are named; with no
  strict majority, all of them are, and none is singled out.

Differences from ``fr_trace``, on purpose:

* Ring buffers that dropped their oldest entries are compared only where each rank still holds the sequence id
  (``fr_trace`` aligns ranks by ``record_id``, a per-rank counter across all groups, which cuts the real
  entries of ranks that belong to fewer groups: on ``tests/fixtures/flight_recorder/gloo_rank2_wrong_dtype``
  it names ranks 2 and 3 missing at sequence 3, where they were present, and never sees rank 2's dtype).
* A group's membership comes from ``pg_config`` when recorded; gloo (torch 2.13) records none, so the default
  group (``default_pg``) is taken as ranks 0..N-1 (N: one past the highest rank among the dump files) and any
  other group as the ranks whose ``pg_status`` or entries name it; the result says which (``membership``).
  ``fr_trace`` stops with a KeyError on such dumps.
* A member without a readable dump is listed (``no_dump_ranks``), never judged.

* **not_started** (NCCL): every member reached the same last collective, but on some members the GPU never
  began it: its entry is still ``scheduled`` while the dump shows that starts are tracked (an entry with
  ``time_discovered_started_ns``: ProcessGroupNCCL records a start event only with
  ``TORCH_NCCL_ENABLE_TIMING=1`` or the desync debug on; without one, ``scheduled`` also covers a running
  collective and is no evidence). The collective was enqueued on the rank's stream behind work that never
  finished (a hung kernel, an XID, a GPU fallen off the bus), while the peers whose entry is ``started`` wait
  inside it: the not-started ranks are the culprits (when all are, none is singled out, except in a group of
  one). Seen for real on an H100 (``tests/fixtures/flight_recorder/nccl_1rank_gpu_stall``): watchdog timeout
  at ``SeqNum=5``, entry 5 ``scheduled``, ``pg_status`` last started 4.

When several groups diverge, the divergence whose collective was created earliest (``time_created_ns``, the
ranks' own wall clocks: skew between hosts of more than the gap between two collectives can reorder them) is
first. When no group diverges, every member reached the same last collective: a rank is not missing; a hang
there is inside the collective (network, NCCL), or the dumps were taken after a clean run.

At scale (``bench/flight_recorder.py``): each rank's dump is read by column
(:func:`~fleetdx.probes.parsers.flight_recorder.scan_columns`: every field checked in one bulk pass, with the
same checks and errors as the entry-by-entry reader, which it falls back to for a dump of any other shape) and
reduced on its own to sequence ids and signature indexes (:func:`_reduce`, pure), in worker processes from
:data:`PARALLEL_MIN` dumps on; the reductions are merged in rank order, so the result is the one of a serial
read, and the sequence ids on which every rank's record agrees are skipped by comparing the records as arrays.
About 7.5 ms of CPU per 2000-entry dump whose entries share their lists and 11 ms where each owns its own (as
torch writes them), where the entry-by-entry reader took 18 and 33 ms (the same session, 2026-11-27) and a dump
parsed into contracts 105 to 125 ms; unpickling alone takes 1.6 and 3.6 ms.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import re
import sys
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import compress, count, repeat
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from fleetdx.orchestrator.judgement import EvidenceLine, Finding, FindingCode
from fleetdx.orchestrator.postmortem.contracts import TimelineEntry, cause
from fleetdx.orchestrator.postmortem.sources import Context, Evidence
from fleetdx.probes.contracts import Contract, Severity
from fleetdx.probes.errors import ConfigError, ParseError
from fleetdx.probes.parsers.flight_recorder import (
    FrCols,
    FrDump,
    FrEntry,
    FrGroup,
    FrGroupStatus,
    FrRow,
    gc_paused,
    parse_flight_recorder,
    scan_columns,
)
from fleetdx.probes.parsers.logline import iso
from fleetdx.probes.rawfile import DEFAULT_MAX_BYTES, RawFileError, check_regular

#: a dump file is ``<prefix><rank>`` (PyTorch's ``TORCH_FR_DUMP_TEMP_FILE`` + rank; ``fr_trace``'s loader reads
#: the rank with the same pattern)
_RANK_RE = re.compile(r"^(.*?)(\d+)$")
#: the file name PyTorch gives a dump when ``TORCH_FR_DUMP_TEMP_FILE`` is unset (``/tmp/nccl_trace_rank_<rank>``)
DEFAULT_PREFIX = "nccl_trace_rank_"
#: collectives whose per-rank input / output sizes may legitimately differ (``fr_trace``'s ``Op.match``: all-to-all
#: splits, the root's side of scatter / gather, the variable-size v-collectives)
_ALLTOALL = {"all_to_all", "all_to_all_single", "all_to_all_v_single", "alltoall", "alltoall_base"}
_VARIABLE = {"all_gather_v", "reduce_scatter_v"}
_INPUT_MAY_DIFFER = _ALLTOALL | _VARIABLE | {"scatter"}
_OUTPUT_MAY_DIFFER = _ALLTOALL | _VARIABLE | {"gather"}
#: point-to-point ops, matched by peer (``p2p_seq_id``), not by the group's collective sequence id
_P2P = {"send", "recv", "_send", "_recv"}
#: the most dump files read from one folder (a 16k-rank job fits)
MAX_FILES = 65_536
#: from this many dumps on, :func:`analyze_dir` reads them in worker processes (about 10 ms of CPU per
#: 2000-entry dump; a pool of forked workers starts in tens of ms, a forkserver's in about a second)
PARALLEL_MIN = 64


class FrRankOp(Contract):
    """What one rank recorded at the divergent collective (or, for a missing rank, its last collective)."""

    rank: int
    file: str
    entry: int  #: 1-based position of the entry in the dump's ``entries`` (dumps are binary: no line numbers)
    seq_id: int
    op: str  #: profiling name, e.g. ``gloo:all_reduce``
    input_sizes: list[list[int]]
    output_sizes: list[list[int]]
    input_dtypes: list[str]
    state: str
    record_id: int
    time_created_ns: int | None = None
    frame: str | None = None  #: the caller's frame: the innermost recorded one outside torch (else the innermost)


class FrGroupView(Contract):
    """One process group across the job: its members and where each member stopped."""

    name: str
    desc: str
    members: list[int]
    membership: Literal["pg_config", "world", "entries"]  #: where ``members`` comes from (module doc)
    last_seq: dict[int, int]  #: rank -> last collective sequence id reached (0: none)


class FrDivergence(Contract):
    """The first collective of one process group where its members diverge."""

    pg_name: str
    pg_desc: str
    seq_id: int  #: the collective sequence id in that group
    kind: Literal["missing", "mismatch", "not_started"]
    op: str  #: the collective the agreeing ranks issued
    input_sizes: list[list[int]]
    input_dtypes: list[str]
    culprit_ranks: list[int]  #: missing ranks (never reached it), mismatched ranks (outside the majority), or
    #: ranks whose GPU never started it (``not_started``)
    waiting_ranks: list[int]  #: ranks that issued the collective (and waited, for ``missing``; that started
    #: it, for ``not_started``)
    detail: str  #: one line: what differs
    time_created_ns: int | None = None  #: earliest creation time of the collective among the ranks that issued it
    evidence: list[FrRankOp] = Field(default_factory=list)  #: the culprits' entries first, then one agreeing rank


class FrAnalysis(Contract):
    """The Flight Recorder dumps of one job, matched across ranks."""

    folder: str
    ranks: list[int]  #: ranks with a readable dump
    unreadable: dict[str, str] = Field(default_factory=dict)  #: file -> why it could not be read
    no_dump_ranks: list[int] = Field(default_factory=list)  #: group members with no readable dump (not judged)
    version: str
    backends: list[str]  #: from the profiling names: ``nccl``, ``gloo``
    groups: list[FrGroupView]
    divergences: list[FrDivergence]  #: earliest first
    notes: list[str] = Field(default_factory=list)  #: limits of the evidence (gloo states, inferred membership)

    @property
    def first(self) -> FrDivergence | None:
        """The first divergence: the collective the job hung on, and who broke it."""
        return self.divergences[0] if self.divergences else None


def _read_bytes(path: Path, max_bytes: int) -> bytes:
    st = check_regular(path)
    if st.st_size > max_bytes:
        raise RawFileError(f"{path}: {st.st_size} bytes, over the {max_bytes} byte limit (raise it with --max-bytes)")
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise RawFileError(f"{path}: cannot be read: {e.strerror}") from None
    if len(data) > max_bytes:
        raise RawFileError(f"{path}: over the {max_bytes} byte limit (raise it with --max-bytes)")
    return data


def read_dump(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> FrDump:
    """One dump file, read under a size limit and parsed. Raises :class:`RawFileError` (missing, not a regular
    file, over ``max_bytes``) or :class:`ParseError` (its contents)."""
    return parse_flight_recorder(_read_bytes(path, max_bytes))


def find_dumps(folder: Path, prefix: str | None = None) -> list[tuple[int, Path]]:
    """The dump files in ``folder`` (not recursive), ``(rank, path)`` sorted by rank: files named
    ``<prefix><rank>``; ``prefix`` defaults to the one prefix every file ending in digits shares, or to
    PyTorch's default :data:`DEFAULT_PREFIX` when it is among several (dumps left in ``/tmp``).

    Raises:
        ConfigError: ``folder`` is not a directory, holds no ``<prefix><rank>`` file, holds several prefixes
            and none is the default (pass ``prefix``), two files for one rank, or more than :data:`MAX_FILES` files.
    """
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a directory of Flight Recorder dumps")
    by_prefix: dict[str, list[tuple[int, Path]]] = {}
    for n, p in enumerate(folder.iterdir(), start=1):
        if n > MAX_FILES:
            raise ConfigError(f"{folder}: more than {MAX_FILES} files; point --fr at the dump folder itself")
        m = _RANK_RE.match(p.name)
        if m and len(m.group(2)) < 10 and not p.is_dir() and (prefix is None or m.group(1) == prefix):
            by_prefix.setdefault(m.group(1), []).append((int(m.group(2)), p))
    if not by_prefix:
        want = f"'{prefix}<rank>'" if prefix is not None else "'<prefix><rank>' (e.g. nccl_trace_rank_0)"
        raise ConfigError(f"{folder}: no Flight Recorder dump named {want}")
    if len(by_prefix) > 1 and DEFAULT_PREFIX in by_prefix:  # PyTorch's default name among other files
        by_prefix = {DEFAULT_PREFIX: by_prefix[DEFAULT_PREFIX]}
    if len(by_prefix) > 1:
        names = ", ".join(sorted(repr(k) for k in by_prefix))
        raise ConfigError(
            f"{folder}: dump files with several prefixes ({names}): give one job's dumps a folder of their own"
        )
    files = sorted(next(iter(by_prefix.values())))
    for (r1, p1), (r2, p2) in zip(files, files[1:], strict=False):
        if r1 == r2:
            raise ConfigError(f"{folder}: two dumps for rank {r1} ({p1.name}, {p2.name})")
    return files


@dataclass(frozen=True)
class _OpKind:
    """What a profiling name tells, worked out once per name."""

    backend: str | None  #: ``nccl`` of ``nccl:all_reduce``
    p2p: bool  #: a point-to-point op (matched by peer, not by the group's sequence id)
    same_input: bool  #: input sizes must agree across ranks
    same_output: bool


def _op_kind(profiling_name: str) -> _OpKind:
    op = profiling_name.split(":", 1)[-1]
    return _OpKind(
        profiling_name.split(":", 1)[0] if ":" in profiling_name else None,
        op in _P2P,
        op not in _INPUT_MAY_DIFFER,
        op not in _OUTPUT_MAY_DIFFER,
    )


def _rank_op(rank: int, file: str, e: FrEntry, index: int) -> FrRankOp:
    return FrRankOp(
        rank=rank,
        file=file,
        entry=index,
        seq_id=e.collective_seq_id,
        op=e.profiling_name,
        input_sizes=e.input_sizes,
        output_sizes=e.output_sizes,
        input_dtypes=e.input_dtypes,
        state=e.state,
        record_id=e.record_id,
        time_created_ns=e.time_created_ns,
        frame=next((f for f in e.frames if "/torch/" not in f), e.frames[0] if e.frames else None),
    )


def _describe(e: FrEntry) -> str:
    return f"{e.profiling_name} in {e.input_sizes} {'/'.join(e.input_dtypes) or '?'}"


class _RankGroup:
    """One rank's record of one group, compact: signature ids by sequence id (an array when the ids are dense,
    as they are in a ring buffer; a dict otherwise), and how far the rank got."""

    def __init__(self, sigs: dict[int, int], status: int | None, last_state: str = "") -> None:
        self.last_state = last_state  #: the state of the entry at ``hi`` (its last recorded collective)
        self.lo, self.hi = (min(sigs), max(sigs)) if sigs else (0, 0)
        self.count = len(sigs)
        self.dense: array[int] | None = None
        self.sparse: dict[int, int] | None = None
        if sigs and self.hi - self.lo + 1 == len(sigs) and list(sigs) == list(range(self.lo, self.hi + 1)):
            self.dense = array("l", sigs.values())  # the usual: every id from lo to hi, in order
        elif sigs and self.hi - self.lo < 2 * len(sigs) + 64:
            self.dense = array("l", [-1] * (self.hi - self.lo + 1))
            for s, i in sigs.items():
                self.dense[s - self.lo] = i
        else:
            self.sparse = sigs
        self.reach = max(self.hi, status or 0)

    def renumber(self, ids: list[int]) -> None:
        """Signature index ``i`` becomes ``ids[i]``."""
        if self.dense is not None:
            self.dense = array("l", [ids[i] if i >= 0 else -1 for i in self.dense])
        if self.sparse is not None:
            self.sparse = {s: ids[i] for s, i in self.sparse.items()}

    def get(self, seq: int) -> int | None:
        if self.dense is not None:
            if self.lo <= seq <= self.hi and (i := self.dense[seq - self.lo]) >= 0:
                return i
            return None
        return self.sparse.get(seq) if self.sparse is not None else None

    def seqs(self, start: int | None = None) -> list[int]:
        """The sequence ids recorded (from ``start`` on, when given), in order."""
        if self.dense is not None:
            skip = 0 if start is None else max(0, start - self.lo)
            return [self.lo + k for k, i in enumerate(self.dense[skip:], skip) if i >= 0]
        return sorted(s for s in self.sparse or {} if start is None or s >= start)


def _agreed_below(recs: dict[int, _RankGroup], reach: dict[int, int]) -> int | None:
    """A sequence id below which :func:`_first_divergence` can find nothing: every judged member's record is
    dense from the same first id and, up to this id, the same signature ids (holes included) as every other's,
    so at each id every member is present with one signature. None: no such id (records of other shapes)."""
    firsts = {rec.lo for rec in recs.values()}
    arrays = [rec.dense for rec in recs.values() if rec.dense is not None]
    if not recs or set(reach) != set(recs) or len(firsts) != 1 or len(arrays) != len(recs):
        return None
    ref = arrays[0]
    agreed = min(map(len, arrays))
    for a in arrays:
        if a[:agreed] != ref[:agreed]:  # the first difference, by bisection (each comparison in C)
            lo, hi = 0, agreed - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if a[:mid] == ref[:mid] else (lo, mid - 1)
            agreed = lo
    return firsts.pop() + agreed


@dataclass
class _RankSummary:
    """One rank's dump reduced to what matching needs (:func:`_reduce`: pure, so it runs in a worker process and
    comes back pickled, about 20 KB for 2000 entries); :meth:`_Matcher.merge` folds these in rank order."""

    version: str
    backends: set[str]
    pg_ids: dict[str, str]  #: the entries' pg_id -> group name
    desc: dict[str, str]  #: group name -> description, first seen first
    first_time: dict[str, dict[int, int]]  #: group name -> sequence id -> earliest time_created_ns on this rank
    sigs: list[tuple[object, ...]]  #: this rank's signatures; the groups' records hold indexes into it
    groups: dict[str, _RankGroup]
    pending: dict[str, int]  #: pg_id -> last enqueued, for pg_status keys no entry names
    wrapped: bool  #: the ring buffer dropped entries (oldest record_id > 0)
    tracks_start: bool  #: the dump records collectives' starts (module doc)
    config: dict[str, list[int]]  #: pg_config's membership of the groups the entries name


def _entry_sigs(c: FrCols, kinds: dict[str, _OpKind]) -> list[tuple[object, ...]]:
    """Each entry's part of a signature (:func:`_signature`): op, sizes (not for the ops whose sizes differ
    legitimately), dtypes."""
    if all(k.same_input and k.same_output for k in kinds.values()):
        return list(zip(c.profiling_name, c.input_sizes, c.output_sizes, c.input_dtypes, strict=True))
    return [
        (p, i if kinds[p].same_input else (), o if kinds[p].same_output else (), d)
        for p, i, o, d in zip(c.profiling_name, c.input_sizes, c.output_sizes, c.input_dtypes, strict=True)
    ]


@dataclass
class _GroupCols:
    """One group's collectives on one rank, in the dump's order: the columns :func:`_group_record` needs."""

    seqs: list[int]
    sigs: list[tuple[object, ...]]
    created: list[int | None]
    op_ids: list[int | None]
    record_ids: list[int]
    states: list[str]


def _group_record(g: _GroupCols, sig_ids: dict[tuple[object, ...], int], status: int | None) -> _RankGroup:
    """One group's record (:class:`_RankGroup`) and its earliest creation times by sequence id; signatures get
    ids in ``sig_ids`` in the order of their sequence ids' first entries."""
    if len(set(g.seqs)) == len(g.seqs):  # one entry a collective (no coalesced ops): in bulk
        first: dict[tuple[object, ...], int] = {}  # signature -> position of its first entry (one hash an entry)
        at = list(map(first.setdefault, zip(g.sigs), count()))
        ids = {j: sig_ids.setdefault(sig, len(sig_ids)) for sig, j in first.items()}
        sigs = dict(zip(g.seqs, map(ids.__getitem__, at), strict=True))
        state = g.states[g.seqs.index(max(g.seqs))] if g.seqs else ""
        return _RankGroup(sigs, status, state)
    by: dict[int, list[int]] = {}
    for j, s in enumerate(g.seqs):
        by.setdefault(s, []).append(j)
    sigs = {}
    for s, js in by.items():
        ordered = sorted(js, key=lambda j: (g.op_ids[j] or 0, g.record_ids[j])) if len(js) > 1 else js
        sigs[s] = sig_ids.setdefault(tuple(g.sigs[j] for j in ordered), len(sig_ids))
    last = by[max(by)]
    state = "scheduled" if all(g.states[j] == "scheduled" for j in last) else g.states[last[-1]]
    return _RankGroup(sigs, status, state)


def _earliest_times(g: _GroupCols) -> dict[int, int]:
    """Sequence id -> earliest ``time_created_ns`` of its entries (entries without one left out)."""
    if len(set(g.seqs)) == len(g.seqs):
        return dict(compress(zip(g.seqs, g.created, strict=True), g.created))  # type: ignore[arg-type]
    ts: dict[int, int] = {}
    for s, t in zip(g.seqs, g.created, strict=True):
        if t and (s not in ts or t < ts[s]):
            ts[s] = t
    return ts


def _by_group(c: FrCols, kinds: dict[str, _OpKind]) -> dict[str, tuple[str, _GroupCols]]:
    """The collectives (point-to-point ops left out: matched by peer, not here) by group name, first seen first:
    the group's description and its columns."""
    p2p_names = {p for p, k in kinds.items() if k.p2p}
    sigs = _entry_sigs(c, kinds)
    keep: list[int] | None = None
    if p2p_names or True in c.is_p2p:
        keep = [j for j, (f, p) in enumerate(zip(c.is_p2p, c.profiling_name, strict=True)) if not (f or p in p2p_names)]
    names = c.pg_name if keep is None else [c.pg_name[j] for j in keep]
    rows_of: dict[str, list[int] | None]
    if keep is None and len(set(names)) == 1:  # the usual: one group
        rows_of = {names[0]: None}
    else:
        firsts: dict[str, list[int]] = {}
        for j, name in enumerate(names):  # the rows of each group
            firsts.setdefault(name, []).append(j)
        rows_of = {n: (js if keep is None else [keep[j] for j in js]) for n, js in firsts.items()}
    out = {}
    for name, rows in rows_of.items():
        cols = [
            _pick(col, rows) for col in (c.collective_seq_id, sigs, c.time_created_ns, c.op_id, c.record_id, c.state)
        ]
        out[name] = (c.pg_desc[0 if rows is None else rows[0]], _GroupCols(*cols))
    return out


def _pick(col: Sequence[Any], rows: list[int] | None) -> list[Any]:
    """``col``'s items at ``rows`` (every item when None)."""
    return list(col) if rows is None else list(map(col.__getitem__, rows))


def _reduce(version: str, groups: Sequence[FrGroup], status_rows: Sequence[FrGroupStatus], c: FrCols) -> _RankSummary:
    """Pass 1 for one rank: its entries by (group, sequence id), each collective as an index into this rank's
    table of signatures."""
    kinds = {p: _op_kind(p) for p in dict.fromkeys(c.profiling_name)}
    named = zip(c.pg_id, c.pg_name, strict=True)
    pg_ids = {
        str(i): n
        for i, n in dict(named if None not in c.pg_id else ((i, n) for i, n in named if i is not None)).items()
    }
    by_group = _by_group(c, kinds)
    # pg_status is keyed by the entries' pg_id (PyTorch's FlightRecorder::getPgStatus), pg_config by name
    status = {pg_ids[s.key]: s.last_enqueued for s in status_rows if s.key in pg_ids}
    sig_ids: dict[tuple[object, ...], int] = {}
    records = {}
    for name in sorted(set(by_group) | set(status)):
        if name in by_group:
            records[name] = _group_record(by_group[name][1], sig_ids, status.get(name))
        else:
            records[name] = _RankGroup({}, status.get(name))
    return _RankSummary(
        version=version,
        backends={k.backend for k in kinds.values() if k.backend is not None},
        pg_ids=pg_ids,
        desc={name: d for name, (d, _) in by_group.items()},
        first_time={name: _earliest_times(g) for name, (_, g) in by_group.items()},
        sigs=list(sig_ids),
        groups=records,
        pending={s.key: s.last_enqueued for s in status_rows if s.key not in pg_ids and s.last_enqueued is not None},
        wrapped=bool(c.record_id) and min(c.record_id) > 0,
        tracks_start=c.time_started_ns.count(None) < len(c.time_started_ns) or "started" in c.state,
        config={cfg.key: cfg.ranks for cfg in groups if cfg.ranks and cfg.key in by_group},
    )


def _reduce_dump(dump: FrDump) -> _RankSummary:
    """A parsed dump held in memory (:func:`analyze`), through its entries' lean form."""
    rows = [
        FrRow(
            **{
                **e.model_dump(),
                "input_sizes": tuple(map(tuple, e.input_sizes)),
                "output_sizes": tuple(map(tuple, e.output_sizes)),
                "input_dtypes": tuple(e.input_dtypes),
                "output_dtypes": tuple(e.output_dtypes),
                "frames": tuple(e.frames),
            }
        )
        for e in dump.entries
    ]
    return _reduce(dump.version, dump.groups, dump.status, FrCols.of(rows))


def _read_reduced(path: Path, max_bytes: int) -> _RankSummary | str:
    """One dump file reduced, or why it cannot be read (picklable both ways: a worker process's task)."""
    try:
        with gc_paused():  # the reduction allocates as much again as the read
            t = scan_columns(_read_bytes(path, max_bytes))
            summary = _reduce(t.version, t.groups, t.status, t.cols)
            del t  # freed before the collector is back on, which would otherwise walk it once more
    except (ParseError, RawFileError) as e:
        return str(e)
    return summary


class _Matcher:
    """Pass 1 of the analysis: each rank's dump reduced to :class:`_RankGroup` s (:func:`_reduce`), then dropped,
    so memory grows with ranks x entries x 8 bytes, not with the parsed dumps (about 9 MB per 2000-entry dump).
    Merging in rank order gives the same result whether the ranks were reduced here or in worker processes."""

    def __init__(self) -> None:
        self.sig_ids: dict[tuple[object, ...], int] = {}
        self.groups: dict[str, dict[int, _RankGroup]] = {}  # pg name -> rank -> record
        self.desc: dict[str, str] = {}
        self.config: dict[str, set[int]] = {}
        self.first_time: dict[str, dict[int, int]] = {}  # pg -> seq -> earliest time_created_ns of any rank
        self.files: dict[int, str] = {}
        self.versions: set[str] = set()
        self.backends: set[str] = set()
        self.id_names: dict[str, set[str]] = {}  # pg_id -> group names, over all ranks
        self.pending: dict[int, dict[str, int]] = {}  # rank -> pg_id -> last enqueued, pg_id not in its entries
        self.wrapped: set[int] = set()  # ranks whose ring buffer dropped entries (oldest record_id > 0)
        self.tracks_start: set[int] = set()  # ranks whose dump records collectives' starts (module doc)

    def merge(self, rank: int, file: str, r: _RankSummary) -> None:
        """Fold one rank's summary in (ranks in increasing order)."""
        self.files[rank] = file
        self.versions.add(r.version)
        self.backends |= r.backends
        for name, d in r.desc.items():
            self.desc.setdefault(name, d)
        for name, times in r.first_time.items():
            self._earliest(name, times)
        ids = [self.sig_ids.setdefault(sig, len(self.sig_ids)) for sig in r.sigs]
        same = ids == list(range(len(ids)))  # usually: every rank issued the same collectives, in the same order
        for name, rec in r.groups.items():
            if not same:
                rec.renumber(ids)
            self.groups.setdefault(name, {})[rank] = rec
        for k, v in r.pg_ids.items():
            self.id_names.setdefault(k, set()).add(v)
        self.pending[rank] = r.pending
        if r.wrapped:
            self.wrapped.add(rank)
        if r.tracks_start:
            self.tracks_start.add(rank)
        for key, ranks in r.config.items():
            self.config.setdefault(key, set()).update(ranks)

    def _earliest(self, name: str, times: dict[int, int]) -> None:
        into = self.first_time.get(name)
        if into is None:
            self.first_time[name] = dict(times)
            return
        if len(into) == len(times) and list(into) == list(times):  # the usual: the same ids, in the same order
            self.first_time[name] = dict(zip(into, map(min, into.values(), times.values()), strict=True))
            return
        for seq, t in times.items():
            if seq not in into or t < into[seq]:
                into[seq] = t

    def resolve_pending(self) -> None:
        """A rank's ``pg_status`` for a group none of its own entries still name (they left its ring buffer): the
        group's name is read through the other ranks' ``pg_id`` (when they all agree on it)."""
        for rank, pending in self.pending.items():
            for key, last in pending.items():
                names = self.id_names.get(key, set())
                if len(names) == 1:
                    (name,) = names
                    self.groups.setdefault(name, {}).setdefault(rank, _RankGroup({}, last))
        self.pending.clear()

    def members(self, name: str, world: list[int]) -> tuple[list[int], Literal["pg_config", "world", "entries"]]:
        if self.config.get(name):
            return sorted(self.config[name]), "pg_config"
        if self.desc.get(name) == "default_pg" or name == "0":
            return world, "world"
        return sorted(self.groups[name]), "entries"


@dataclass
class _Found:
    """A divergence found in pass 1, before its evidence is read back (pass 2)."""

    pg: str
    seq: int
    kind: Literal["missing", "mismatch", "not_started"]
    culprits: list[int]
    present: list[int]
    agreeing: list[int]
    reach: dict[int, int]


def _first_divergence(m: _Matcher, name: str, members: list[int]) -> _Found | None:
    recs = {r: m.groups[name][r] for r in members if r in m.groups.get(name, {})}
    # a member with a dump that never recorded this group reached nothing in it, unless its ring buffer dropped
    # entries (then it may have, long ago: not judged)
    reach = {
        r: (recs[r].reach if r in recs else 0) for r in members if r in m.files and (r in recs or r not in m.wrapped)
    }
    start = _agreed_below(recs, reach)
    for s in sorted({s for rec in recs.values() for s in rec.seqs(start)}):
        present = {r: i for r, rec in recs.items() if (i := rec.get(s)) is not None}
        # never reached s, or recorded the group's ids on both sides of s but not s itself (a ring buffer holds a
        # contiguous run of ids, so a gap is a collective this rank did not issue)
        missing = sorted(
            r for r in reach if r not in present and (reach[r] < s or (r in recs and recs[r].count and recs[r].lo <= s))
        )
        counts = Counter(present.values())
        if not missing and len(counts) <= 1:
            continue
        (top, top_n), *rest = counts.most_common()
        agreeing = sorted(r for r, i in present.items() if i == top)
        if missing:
            return _Found(name, s, "missing", missing, sorted(present), agreeing, reach)
        if rest and rest[0][1] == top_n:  # no strict majority: every side is named, none singled out
            return _Found(name, s, "mismatch", sorted(present), sorted(present), [], reach)
        return _Found(
            name, s, "mismatch", sorted(r for r in present if present[r] != top), sorted(present), agreeing, reach
        )
    return _not_started(m, name, recs, reach)


def _not_started(m: _Matcher, name: str, recs: dict[int, _RankGroup], reach: dict[int, int]) -> _Found | None:
    """Every member reached the same last collective: the ranks whose GPU never started it (module doc)."""
    last = {r: recs[r].hi for r in recs if r in reach}
    if not last or len(set(last.values())) != 1 or any(reach[r] != s for r, s in last.items()):
        return None
    tracked = [r for r in last if r in m.tracks_start]
    stuck = sorted(r for r in tracked if recs[r].last_state == "scheduled")
    if not stuck:
        return None
    started = sorted(r for r in tracked if recs[r].last_state == "started")
    return _Found(name, next(iter(last.values())), "not_started", stuck, sorted(last), started, reach)


#: culprits whose entries are read back as evidence (the rest are named, not quoted)
MAX_EVIDENCE = 8


def _entries_at(dump: FrDump, pg: str, seq: int) -> list[tuple[int, FrEntry]]:
    """(1-based position, entry) of the group's collective ``seq`` in one dump."""
    return [
        (i, e)
        for i, e in enumerate(dump.entries, start=1)
        if e.pg_name == pg and e.collective_seq_id == seq and not (e.is_p2p or e.op in _P2P)
    ]


def _divergence(m: _Matcher, f: _Found, fetch: Callable[[int], FrDump]) -> FrDivergence:
    """Pass 2: the evidence of one divergence, read back from the few dumps it names."""
    desc = m.desc.get(f.pg, "")
    quoted = f.culprits[:MAX_EVIDENCE]
    evidence: list[FrRankOp] = []
    ref: FrEntry | None = None
    ref_at = 0
    if f.agreeing:
        ref_entries = _entries_at(fetch(f.agreeing[0]), f.pg, f.seq)
        ref_at, ref = ref_entries[0] if ref_entries else (0, None)
    culprit_entries: dict[int, FrEntry] = {}
    for r in quoted:
        seq = f.reach[r] if f.kind == "missing" else f.seq
        es = _entries_at(fetch(r), f.pg, seq)
        if es:
            culprit_entries[r] = es[0][1]
            evidence.append(_rank_op(r, m.files[r], es[0][1], es[0][0]))
    if ref is not None:
        evidence.append(_rank_op(f.agreeing[0], m.files[f.agreeing[0]], ref, ref_at))
    else:  # no majority: quote the culprits' own entries
        ref = next(iter(culprit_entries.values()), None)
    where = f"seq {f.seq} of group {f.pg}:{desc}"
    if f.kind == "missing":
        last_seen = ", ".join(f"rank {r}: {f.reach[r] or 'none'}" for r in f.culprits[:MAX_EVIDENCE])
        more = f" (+{len(f.culprits) - MAX_EVIDENCE} more)" if len(f.culprits) > MAX_EVIDENCE else ""
        what = _describe(ref) if ref is not None else "the collective"
        detail = (
            f"{len(f.present)} ranks issued {what} ({where}); ranks {f.culprits[:MAX_EVIDENCE]}{more} never did "
            f"(last seq reached: {last_seen})"
        )
    elif f.kind == "not_started":
        what = _describe(ref) if ref is not None else "the collective"
        inside = f"; ranks {f.agreeing[:MAX_EVIDENCE]} started it and waited inside" if f.agreeing else ""
        detail = (
            f"{len(f.present)} ranks issued {what} ({where}); on ranks {f.culprits[:MAX_EVIDENCE]} the GPU never "
            f"started it (state scheduled){inside}"
        )
    else:
        odd = "; ".join(f"rank {r}: {_describe(e)}" for r, e in culprit_entries.items())
        detail = (
            f"{where}: {len(f.agreeing)} ranks issued {_describe(ref)}; {odd}"
            if f.agreeing and ref is not None
            else f"{where}: no majority among {odd}"
        )
    return FrDivergence(
        pg_name=f.pg,
        pg_desc=desc,
        seq_id=f.seq,
        kind=f.kind,
        op=ref.profiling_name if ref is not None else "",
        input_sizes=ref.input_sizes if ref is not None else [],
        input_dtypes=ref.input_dtypes if ref is not None else [],
        culprit_ranks=f.culprits,
        waiting_ranks=f.agreeing,
        detail=detail,
        time_created_ns=m.first_time.get(f.pg, {}).get(f.seq),
        evidence=evidence,
    )


def _result(
    m: _Matcher,
    folder: str,
    unreadable: dict[str, str],
    fetch: Callable[[int], FrDump],
    world_size: int | None,
) -> FrAnalysis:
    bad_ranks = {int(x.group(2)) for f in unreadable if (x := _RANK_RE.match(f)) and len(x.group(2)) < 10}
    top = max([*m.files, *bad_ranks], default=-1) + 1
    world = list(range(max(top, world_size or 0)))
    m.resolve_pending()
    views: list[FrGroupView] = []
    divergences: list[FrDivergence] = []
    no_dump: set[int] = set()
    notes: list[str] = []
    if world_size is not None and top > world_size:
        notes.append(f"dumps from ranks up to {top - 1}, beyond the world size {world_size} given")
    for name in sorted(m.groups, key=lambda n: (m.desc.get(n) != "default_pg", n)):
        members, source = m.members(name, world)
        no_dump.update(r for r in members if r not in m.files)
        recs = m.groups[name]
        views.append(
            FrGroupView(
                name=name,
                desc=m.desc.get(name, ""),
                members=members,
                membership=source,
                last_seq={r: (recs[r].reach if r in recs else 0) for r in members if r in m.files},
            )
        )
        if source != "pg_config":
            notes.append(
                f"group {name}:{m.desc.get(name, '')}: no membership in pg_config; members taken from "
                + ("the dump files' ranks (0..N-1)" if source == "world" else "the ranks whose entries name it")
            )
        found = _first_divergence(m, name, members)
        if found is not None:
            divergences.append(_divergence(m, found, fetch))
    divergences.sort(key=lambda d: (d.time_created_ns is None, d.time_created_ns or 0))
    if "gloo" in m.backends:
        notes.append("gloo records no start/completion (every entry 'scheduled'): a collective's state is no evidence")
    if no_dump:
        notes.append(f"no readable dump from ranks {sorted(no_dump)}: they are not judged")
    if len(m.versions) > 1:
        notes.append(f"dumps of several format versions: {sorted(m.versions)}")
    return FrAnalysis(
        folder=folder,
        ranks=sorted(m.files),
        unreadable=unreadable,
        no_dump_ranks=sorted(no_dump),
        version=min(m.versions, default=""),
        backends=sorted(m.backends),
        groups=views,
        divergences=divergences,
        notes=notes,
    )


def analyze(
    dumps: Mapping[int, tuple[str, FrDump]],
    folder: str = "",
    unreadable: Mapping[str, str] | None = None,
    world_size: int | None = None,
) -> FrAnalysis:
    """Match parsed dumps held in memory (``rank -> (file name, dump)``); see :func:`analyze_dir`. Never raises on
    any set of parsed dumps."""
    m = _Matcher()
    for rank, (file, dump) in sorted(dumps.items()):
        m.merge(rank, file, _reduce_dump(dump))
    return _result(m, folder, dict(unreadable or {}), lambda r: dumps[r][1], world_size)


def default_jobs() -> int:
    """The CPUs this process may run on (``os.sched_getaffinity``: a Slurm step's or a container's share, not the
    whole machine's), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _start_method() -> str:
    """How worker processes start. ``fork`` on Linux while this process runs one thread (the CLI): the cheapest,
    each worker a copy of this process with fleetdx already imported, and safe there (what makes a fork unsafe is
    another thread holding a lock the child then waits on forever; the pool's own thread starts after its workers
    are forked). ``forkserver`` where threads run (the HTTP service): workers fork from a fresh single-threaded
    server, never from this process; the server imports this module once (preloaded), so each worker starts in
    milliseconds, where ``spawn`` would import fleetdx again in every worker (about 0.5 s of CPU each).
    ``spawn`` elsewhere (macOS: fork is unsafe with its system libraries, and forkserver is less tested there;
    Windows)."""
    methods = multiprocessing.get_all_start_methods()
    if sys.platform == "linux" and threading.active_count() == 1 and "fork" in methods:
        return "fork"
    return "forkserver" if sys.platform == "linux" and "forkserver" in methods else "spawn"


def _reduced(files: list[tuple[int, Path]], max_bytes: int, jobs: int) -> Iterator[_RankSummary | str]:
    """Every file's :func:`_read_reduced`, in the order of ``files``: here, or in ``jobs`` worker processes."""
    if jobs <= 1 or len(files) < PARALLEL_MIN or multiprocessing.current_process().daemon:  # a pool's worker
        for _, path in files:  # (a daemonic process may not start processes of its own)
            yield _read_reduced(path, max_bytes)
        return
    ctx = multiprocessing.get_context(_start_method())
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["fleetdx.orchestrator.postmortem.flight"])  # only before the server starts
    workers = min(jobs, len(files))
    chunk = max(1, min(16, len(files) // (workers * 8)))  # few round trips, yet an even share at the end
    gc.freeze()  # forked workers' collections leave this process's objects alone (no copy of their pages)
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            yield from pool.map(_read_reduced, [p for _, p in files], repeat(max_bytes), chunksize=chunk)
    finally:
        gc.unfreeze()


def analyze_dir(
    folder: Path,
    prefix: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    world_size: int | None = None,
    jobs: int | None = None,
) -> FrAnalysis:
    """Every rank's dump in ``folder`` (:func:`find_dumps`), matched by (process group, sequence id): the first
    divergence of each group, earliest first (module doc).

    Dumps are read and reduced to sequence ids and signature ids one at a time (pass 1): in ``jobs`` worker
    processes (default :func:`default_jobs`) when there are :data:`PARALLEL_MIN` dumps or more, merged in rank
    order, so the result is the same as read here; only the dumps a divergence names are read again for its
    evidence (pass 2). A dump that cannot be read or parsed is listed in ``unreadable`` and its rank is not judged.
    Where workers do not come from a fork (:func:`_start_method`: threads running, not Linux), a script calling
    this must keep its top level under ``if __name__ == "__main__":`` (multiprocessing's rule), or pass
    ``jobs=1``.

    ``world_size`` (the job's, when the job model or the logs tell it) makes the default group ranks
    0..world_size-1 where the dumps do not record its membership (gloo): a rank whose process ended without a dump
    is then listed in ``no_dump_ranks`` instead of unseen.

    Raises:
        ConfigError: as :func:`find_dumps`, and when no dump in the folder could be read (each file's error named).
    """
    files = find_dumps(folder, prefix)
    m = _Matcher()
    unreadable: dict[str, str] = {}
    paths: dict[int, Path] = {}
    with gc_paused():  # the collector would walk the growing record again and again: 10-18% of pass 1's CPU
        for (rank, path), summary in zip(files, _reduced(files, max_bytes, jobs or default_jobs()), strict=True):
            if isinstance(summary, str):
                unreadable[path.name] = summary
            else:
                m.merge(rank, path.name, summary)
                paths[rank] = path
    if not paths:
        first = "; ".join(f"{k}: {v}" for k, v in list(unreadable.items())[:3])
        raise ConfigError(f"{folder}: no Flight Recorder dump could be read ({first})")
    return _result(m, str(folder), unreadable, lambda r: read_dump(paths[r], max_bytes), world_size)


# ---- into the postmortem's contracts (fleetdx postmortem --fr DIR) ----------------------------------------


def _iso(ns: int | None) -> str | None:
    """A recorder time (Unix ns) as the postmortem's ISO 8601 UTC (:func:`fleetdx.probes.parsers.joblog.iso`)."""
    if not ns:
        return None
    try:
        return iso(ns / 1e9)
    except (OverflowError, ValueError):  # a hostile time far outside the calendar
        return None


def _evidence_line(folder: str, op: FrRankOp, pg: str) -> EvidenceLine:
    dtypes = "/".join(op.input_dtypes) or "?"
    return EvidenceLine(
        file=str(Path(folder) / op.file) if folder else op.file,
        line=op.entry,
        text=(
            f"rank {op.rank}: entry {op.entry} (record_id {op.record_id}): {op.op} collective_seq_id {op.seq_id} "
            f"of group {pg}, input_sizes {op.input_sizes} {dtypes}, state {op.state or '?'}"
            + (f", at {_iso(op.time_created_ns)}" if op.time_created_ns else "")
            + (f"; {op.frame}" if op.frame else "")
        ),
    )


def to_causes(a: FrAnalysis, rank_hosts: Mapping[int, str] | None = None) -> list[Finding]:
    """The divergences as postmortem causes, earliest first.

    * ``missing`` -> ``NCCL_TIMEOUT`` (critical): the ranks that never issued the collective the others waited
      in; ``rank`` is the culprit when there is one, else ``None`` (all are in the message).
    * ``mismatch`` -> ``CONFIG_ERROR`` (critical): a collective desync in the program (other op, sizes or dtype
      at the same sequence id); ``rank`` the odd rank when there is one.
    * ``not_started`` -> ``NCCL_TIMEOUT`` (critical): the ranks whose GPU never began the collective.

    Dumps name ranks, not hosts: ``host``/``nodes`` come from ``rank_hosts`` (the logs' rank -> host map) when
    given. Evidence lines point at the dump file, ``line`` being the entry's 1-based position in it.
    """
    hosts = dict(rank_hosts or {})
    out: list[Finding] = []
    for d in a.divergences:
        pg = f"{d.pg_name}:{d.pg_desc}"
        culprits = d.culprit_ranks
        nodes = sorted({hosts[r] for r in culprits if r in hosts})
        one = culprits[0] if len(culprits) == 1 else None
        names = (
            f"rank {culprits[0]}"
            if one is not None
            else f"ranks {culprits[:MAX_EVIDENCE]}"
            + (f" (+{len(culprits) - MAX_EVIDENCE})" if len(culprits) > MAX_EVIDENCE else "")
        )
        if d.kind == "missing":
            code = FindingCode.NCCL_TIMEOUT
            message = (
                f"Flight Recorder: {names} never issued {d.op} #{d.seq_id} of group {pg} "
                f"while {len(d.waiting_ranks)} ranks waited in it: {names} hung the job"
            )
            action = (
                f"look at what {names} did instead (its last log lines, py-spy dump, its host's kernel log); "
                "if its host is at fault, drain it and resubmit excluding it; if the program skips a collective "
                "on some ranks, fix that code path"
            )
        elif d.kind == "not_started":
            code = FindingCode.NCCL_TIMEOUT
            blocked = "its" if one is not None else "their"
            message = (
                f"Flight Recorder: {names} enqueued {d.op} #{d.seq_id} of group {pg} but {blocked} GPU never started "
                f"it (state scheduled)"
                + (f" while {len(d.waiting_ranks)} ranks waited inside it" if d.waiting_ranks else "")
                + f": work queued before it on the GPU stream of {names} never finished"
            )
            action = (
                f"check the GPU of {names}: its host's kernel log for XIDs or a GPU fallen off the bus, nvidia-smi "
                "for a hung or foreign process; py-spy dump shows what the process waits on; drain the host if the GPU "
                "is at fault and resubmit excluding it"
            )
        else:
            code = FindingCode.CONFIG_ERROR
            message = f"Flight Recorder: collective desync: {d.detail}"
            action = (
                "fix the program: every rank of a group must issue the same collectives in the same order with "
                "the same shapes and dtypes (TORCH_DISTRIBUTED_DEBUG=DETAIL checks them before each collective)"
            )
        out.append(
            cause(
                code=code,
                severity=Severity.CRITICAL,
                rank=one,
                host=hosts.get(one) if one is not None else None,
                nodes=nodes,
                time=_iso(d.time_created_ns),
                message=message,
                action=action,
                evidence=[_evidence_line(a.folder, e, pg) for e in d.evidence],
            )
        )
    return out


def to_timeline(a: FrAnalysis, rank_hosts: Mapping[int, str] | None = None) -> list[TimelineEntry]:
    """One timeline entry per rank the divergences quote: its entry at (or, for a missing rank, before) the
    divergent collective, at the entry's creation time (``kind`` ``"flight-recorder"``)."""
    hosts = dict(rank_hosts or {})
    return [
        TimelineEntry(
            time=_iso(e.time_created_ns),
            host=hosts.get(e.rank),
            rank=e.rank,
            kind="flight-recorder",
            text=f"{e.op} #{e.seq_id} of group {d.pg_name}:{d.pg_desc} ({d.kind} at #{d.seq_id})",
        )
        for d in a.divergences
        for e in d.evidence
    ]


def missing_evidence(a: FrAnalysis) -> list[str]:
    """What the dumps could not tell: unreadable files, members without a dump, and no divergence at all."""
    out = [
        f"{Path(a.folder) / f if a.folder else f}: Flight Recorder dump not read: {why}"
        for f, why in a.unreadable.items()
    ]
    if a.no_dump_ranks:
        out.append(f"Flight Recorder: no readable dump from ranks {a.no_dump_ranks}: they are not judged")
    diverged = {d.pg_name for d in a.divergences}
    for g in a.groups:
        absent = [r for r in g.members if r not in g.last_seq]
        stops = set(g.last_seq.values())
        if g.name not in diverged and absent and len(stops) == 1:
            out.append(
                f"Flight Recorder: the {len(g.last_seq)} dumped ranks of group {g.name}:{g.desc} all stopped at "
                f"collective #{stops.pop()}; members {absent[:MAX_EVIDENCE]} left no dump (a rank that crashed or "
                "exited leaves none): their logs say what they did"
            )
    if not a.divergences:
        out.append(
            f"Flight Recorder ({len(a.ranks)} dumps): every group's ranks reached the same collectives: no rank is "
            "missing from a collective (a hang inside the last one points at the network or NCCL, not a rank)"
        )
    return out


@dataclass
class FlightRecorderDumps:
    """``fleetdx postmortem --fr DIR``: the job's Flight Recorder dumps as an evidence source
    (:class:`~fleetdx.orchestrator.postmortem.sources.EvidenceSource`) that judges its inputs itself: its causes
    (:func:`to_causes`) and timeline (:func:`to_timeline`) get the logs' rank -> host map once every source is
    read; what the dumps could not tell is missing evidence (:func:`missing_evidence`). A folder that cannot be
    read as dumps is missing evidence too, as an unreadable log is."""

    folder: Path
    world_size: int | None = None  #: the job's, when known (default-group membership of gloo dumps)
    prefix: str | None = None
    jobs: int | None = None  #: worker processes reading the dumps (:func:`analyze_dir`; default: the CPUs)

    def collect(self, ctx: Context) -> Evidence:  # noqa: ARG002 - dumps carry their own Unix times
        try:
            fr = analyze_dir(self.folder, self.prefix, world_size=self.world_size, jobs=self.jobs)
        except ConfigError as e:
            return Evidence(missing=[f"Flight Recorder dumps not read: {e}"])
        return Evidence(
            missing=missing_evidence(fr),
            causes=lambda hosts: to_causes(fr, hosts),
            timeline=lambda hosts: to_timeline(fr, hosts),
        )
