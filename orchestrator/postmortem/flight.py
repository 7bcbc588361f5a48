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
  at ``N-1``). nvidia-resiliency-ext's FR attribution reads dumps the same way.
* **mismatch**: every member reached it but issued different collectives there: another operation, other input
  or output sizes (not compared for ``all_to_all``/``scatter``/``gather``, whose sizes differ legitimately, as in
  ``fr_trace``'s ``Op.match``) or other dtypes. The ranks outside the largest agreeing set are named; with no
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

When several groups diverge, the divergence whose collective was created earliest (``time_created_ns``, the
ranks' own wall clocks: skew between hosts of more than the gap between two collectives can reorder them) is
first. When no group diverges, every member reached the same last collective: a rank is not missing; a hang
there is inside the collective (network, NCCL), or the dumps were taken after a clean run.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ConfigError, ParseError
from fleetdx.probes.parsers.flight_recorder import FrDump, FrEntry, parse_flight_recorder
from fleetdx.probes.rawfile import DEFAULT_MAX_BYTES, RawFileError, check_regular

#: a dump file is ``<prefix><rank>`` (PyTorch's ``TORCH_FR_DUMP_TEMP_FILE`` + rank; ``fr_trace``'s loader reads
#: the rank with the same pattern)
_RANK_RE = re.compile(r"^(.*?)(\d+)$")
#: collectives whose per-rank sizes may legitimately differ (``fr_trace``'s ``Op.match``)
_SIZES_MAY_DIFFER = ("all_to_all", "scatter", "gather", "alltoall")
#: the most dump files read from one folder (a 16k-rank job fits)
MAX_FILES = 65_536


class FrRankOp(Contract):
    """What one rank recorded at the divergent collective (or, for a missing rank, its last collective)."""

    rank: int
    file: str
    seq_id: int
    op: str  #: profiling name, e.g. ``gloo:all_reduce``
    input_sizes: list[list[int]]
    output_sizes: list[list[int]]
    input_dtypes: list[str]
    state: str
    record_id: int
    time_created_ns: int | None = None
    frame: str | None = None  #: the innermost recorded stack frame


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
    kind: Literal["missing", "mismatch"]
    op: str  #: the collective the agreeing ranks issued
    input_sizes: list[list[int]]
    input_dtypes: list[str]
    culprit_ranks: list[int]  #: missing ranks (never reached it) or mismatched ranks (outside the majority)
    waiting_ranks: list[int]  #: ranks that issued the collective (and waited, for ``missing``)
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


def load_dumps(
    folder: Path, prefix: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> tuple[dict[int, tuple[str, FrDump]], dict[str, str]]:
    """Every rank's dump in ``folder`` (not recursive): files named ``<prefix><rank>``.

    Args:
        folder: the dump folder (``dirname`` of ``TORCH_FR_DUMP_TEMP_FILE``).
        prefix: the file name before the rank; default: the one prefix every file ending in digits shares.
        max_bytes: size limit of one dump file.

    Returns:
        (rank -> (file name, dump), file name -> error) for the files that could not be read or parsed.

    Raises:
        ConfigError: ``folder`` is not a directory, holds no ``<prefix><rank>`` file, holds several prefixes
            (pass ``prefix``), holds two files for one rank, or more than :data:`MAX_FILES` files.
    """
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a directory of Flight Recorder dumps")
    by_prefix: dict[str, list[tuple[int, Path]]] = {}
    n = 0
    for p in folder.iterdir():
        n += 1
        if n > MAX_FILES:
            raise ConfigError(f"{folder}: more than {MAX_FILES} files; point --fr at the dump folder itself")
        m = _RANK_RE.match(p.name)
        if m and not p.is_dir() and (prefix is None or m.group(1) == prefix):
            by_prefix.setdefault(m.group(1), []).append((int(m.group(2)), p))
    if not by_prefix:
        want = f"'{prefix}<rank>'" if prefix is not None else "'<prefix><rank>' (e.g. nccl_trace_rank_0)"
        raise ConfigError(f"{folder}: no Flight Recorder dump named {want}")
    if len(by_prefix) > 1:
        names = ", ".join(sorted(repr(k) for k in by_prefix))
        raise ConfigError(f"{folder}: dump files with several prefixes ({names}): name the one to read")
    files = next(iter(by_prefix.values()))
    dumps: dict[int, tuple[str, FrDump]] = {}
    errors: dict[str, str] = {}
    for rank, p in sorted(files):
        if rank in dumps:
            raise ConfigError(f"{folder}: two dumps for rank {rank} ({dumps[rank][0]}, {p.name})")
        try:
            dumps[rank] = (p.name, parse_flight_recorder(_read_bytes(p, max_bytes)))
        except (ParseError, RawFileError) as e:
            errors[p.name] = str(e)
    return dumps, errors


def _signature(op: str, entries: list[FrEntry]) -> tuple[object, ...]:
    sizes_matter = not any(k in op for k in _SIZES_MAY_DIFFER)
    return tuple(
        (
            e.profiling_name,
            tuple(map(tuple, e.input_sizes)) if sizes_matter else (),
            tuple(map(tuple, e.output_sizes)) if sizes_matter else (),
            tuple(e.input_dtypes),
        )
        for e in sorted(entries, key=lambda e: (e.op_id or 0, e.record_id))
    )


def _rank_op(rank: int, file: str, e: FrEntry) -> FrRankOp:
    return FrRankOp(
        rank=rank,
        file=file,
        seq_id=e.collective_seq_id,
        op=e.profiling_name,
        input_sizes=e.input_sizes,
        output_sizes=e.output_sizes,
        input_dtypes=e.input_dtypes,
        state=e.state,
        record_id=e.record_id,
        time_created_ns=e.time_created_ns,
        frame=e.frames[0] if e.frames else None,
    )


def _describe(e: FrEntry) -> str:
    return f"{e.profiling_name} in {e.input_sizes} {'/'.join(e.input_dtypes) or '?'}"


class _Group:
    """One process group's entries on every dumped member (working state of :func:`analyze`)."""

    def __init__(self, name: str, desc: str) -> None:
        self.name, self.desc = name, desc
        self.seqs: dict[int, dict[int, list[FrEntry]]] = {}  # rank -> seq -> entries (coalesced: several)
        self.status: dict[int, int] = {}  # rank -> pg_status last enqueued
        self.config_ranks: set[int] = set()

    def reach(self, rank: int) -> int:
        return max([0, self.status.get(rank, 0), *self.seqs.get(rank, {})])


def _collect(dumps: dict[int, tuple[str, FrDump]]) -> dict[str, _Group]:
    """Entries by group name and rank. ``pg_status`` is keyed by the entries' ``pg_id`` (PyTorch's
    ``FlightRecorder::getPgStatus``: ``std::to_string(pg_id)``), ``pg_config`` by the group's name; a status whose
    ``pg_id`` this rank's entries do not name is read through the other ranks' (when they agree)."""
    groups: dict[str, _Group] = {}
    id_names: dict[int, set[str]] = {}
    for rank, (_, dump) in dumps.items():
        for e in dump.entries:
            if e.pg_id is not None:
                id_names.setdefault(e.pg_id, set()).add(e.pg_name)
            if e.is_p2p:
                continue  # point-to-point ops count in p2p_seq_id, matched by peer, not here
            g = groups.setdefault(e.pg_name, _Group(e.pg_name, e.pg_desc))
            g.seqs.setdefault(rank, {}).setdefault(e.collective_seq_id, []).append(e)
    for rank, (_, dump) in dumps.items():
        own = {str(e.pg_id): e.pg_name for e in dump.entries if e.pg_id is not None}
        for s in dump.status:
            others = id_names.get(int(s.key), set()) if s.key.isdigit() and len(s.key) < 20 else set()
            name = own.get(s.key) or (next(iter(others)) if len(others) == 1 else None)
            if name in groups and s.last_enqueued is not None:
                groups[name].status[rank] = s.last_enqueued
        for cfg in dump.groups:
            if cfg.ranks and cfg.key in groups:
                groups[cfg.key].config_ranks.update(cfg.ranks)
    return groups


def _members(g: _Group, world: list[int]) -> tuple[list[int], Literal["pg_config", "world", "entries"]]:
    if g.config_ranks:
        return sorted(g.config_ranks), "pg_config"
    if g.desc == "default_pg" or g.name == "0":
        return world, "world"
    return sorted(set(g.seqs) | set(g.status)), "entries"


def _diverge(g: _Group, members: list[int], files: dict[int, str]) -> FrDivergence | None:
    dumped = [r for r in members if r in files]
    reach = {r: g.reach(r) for r in dumped}
    all_seqs = sorted({s for r in dumped for s in g.seqs.get(r, {})})
    for s in all_seqs:
        present = {r: g.seqs[r][s] for r in dumped if s in g.seqs.get(r, {})}
        missing = [r for r in dumped if reach[r] < s]
        sigs = {r: _signature(es[0].op, es) for r, es in present.items()}
        counts = Counter(sigs.values())
        if not missing and len(counts) <= 1:
            continue
        (top_sig, top_n), *rest = counts.most_common()
        agreeing = [r for r in present if sigs[r] == top_sig]
        ref = present[agreeing[0]][0]
        times = [e.time_created_ns for es in present.values() for e in es if e.time_created_ns]
        if missing:
            evidence = []
            for r in missing:
                last = [e for seq, es in g.seqs.get(r, {}).items() if seq == reach[r] for e in es]
                if last:
                    evidence.append(_rank_op(r, files[r], last[0]))
            last_seen = ", ".join(f"rank {r}: {reach[r] or 'none'}" for r in missing)
            detail = (
                f"ranks {sorted(present)} issued {_describe(ref)} (seq {s} of group {g.name}:{g.desc}); "
                f"ranks {missing} never did (last seq reached: {last_seen})"
            )
            return FrDivergence(
                pg_name=g.name,
                pg_desc=g.desc,
                seq_id=s,
                kind="missing",
                op=ref.profiling_name,
                input_sizes=ref.input_sizes,
                input_dtypes=ref.input_dtypes,
                culprit_ranks=missing,
                waiting_ranks=sorted(present),
                detail=detail,
                time_created_ns=min(times) if times else None,
                evidence=[*evidence, _rank_op(agreeing[0], files[agreeing[0]], ref)],
            )
        strict = not rest or top_n > rest[0][1]
        odd = sorted(r for r in present if sigs[r] != top_sig) if strict else sorted(present)
        what = "; ".join(f"rank {r}: {_describe(present[r][0])}" for r in odd)
        detail = (
            f"seq {s} of group {g.name}:{g.desc}: ranks {sorted(agreeing)} issued {_describe(ref)}; {what}"
            if strict
            else f"seq {s} of group {g.name}:{g.desc}: no majority among {what}"
        )
        return FrDivergence(
            pg_name=g.name,
            pg_desc=g.desc,
            seq_id=s,
            kind="mismatch",
            op=ref.profiling_name,
            input_sizes=ref.input_sizes,
            input_dtypes=ref.input_dtypes,
            culprit_ranks=odd,
            waiting_ranks=sorted(agreeing) if strict else [],
            detail=detail,
            time_created_ns=min(times) if times else None,
            evidence=[
                *(_rank_op(r, files[r], present[r][0]) for r in odd),
                *([_rank_op(agreeing[0], files[agreeing[0]], ref)] if strict else []),
            ],
        )
    return None


def analyze(
    dumps: dict[int, tuple[str, FrDump]], folder: str = "", unreadable: dict[str, str] | None = None
) -> FrAnalysis:
    """Match the ranks' collectives by (process group, sequence id) and find, per group, the first divergence.

    Args:
        dumps: rank -> (file name, parsed dump), as :func:`load_dumps` returns.
        folder: where they came from (for the report).
        unreadable: file name -> error, for the files :func:`load_dumps` could not read.

    Returns:
        :class:`FrAnalysis`, divergences earliest first (module doc). Never raises on any set of parsed dumps.
    """
    files = {r: f for r, (f, _) in dumps.items()}
    unreadable = dict(unreadable or {})
    bad_ranks = {int(m.group(2)) for f in unreadable if (m := _RANK_RE.match(f))}
    top = max([*files, *bad_ranks], default=-1)
    world = list(range(top + 1))
    groups = _collect(dumps)
    views: list[FrGroupView] = []
    divergences: list[FrDivergence] = []
    no_dump: set[int] = set()
    notes: list[str] = []
    for g in sorted(groups.values(), key=lambda g: (g.desc != "default_pg", g.name)):
        members, source = _members(g, world)
        no_dump.update(r for r in members if r not in files)
        views.append(
            FrGroupView(
                name=g.name,
                desc=g.desc,
                members=members,
                membership=source,
                last_seq={r: g.reach(r) for r in members if r in files},
            )
        )
        if source != "pg_config":
            notes.append(
                f"group {g.name}:{g.desc}: no membership in pg_config; members taken from "
                + ("the dump files' ranks (0..N-1)" if source == "world" else "the ranks whose entries name it")
            )
        d = _diverge(g, members, files)
        if d is not None:
            divergences.append(d)
    divergences.sort(key=lambda d: (d.time_created_ns is None, d.time_created_ns or 0))
    backends = sorted(
        {
            e.profiling_name.split(":", 1)[0]
            for _, dump in dumps.values()
            for e in dump.entries
            if ":" in e.profiling_name
        }
    )
    if "gloo" in backends:
        notes.append("gloo records no start/completion (every entry 'scheduled'): a collective's state is no evidence")
    if no_dump:
        notes.append(f"no readable dump from ranks {sorted(no_dump)}: they are not judged")
    versions = sorted({d.version for _, d in dumps.values()})
    if len(versions) > 1:
        notes.append(f"dumps of several format versions: {versions}")
    return FrAnalysis(
        folder=folder,
        ranks=sorted(files),
        unreadable=unreadable,
        no_dump_ranks=sorted(no_dump),
        version=versions[0] if versions else "",
        backends=backends,
        groups=views,
        divergences=divergences,
        notes=notes,
    )


def analyze_dir(folder: Path, prefix: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> FrAnalysis:
    """:func:`load_dumps` then :func:`analyze`. Raises :class:`ConfigError` as :func:`load_dumps` does, and when no
    dump in the folder could be read (each file's error named)."""
    dumps, errors = load_dumps(folder, prefix, max_bytes)
    if not dumps:
        first = "; ".join(f"{k}: {v}" for k, v in list(errors.items())[:3])
        raise ConfigError(f"{folder}: no Flight Recorder dump could be read ({first})")
    return analyze(dumps, str(folder), errors)
