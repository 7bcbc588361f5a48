"""Retention: remove what is older than a configured age from the store (runs with everything under them,
postmortems, step analyses, live job states) and from a node's disk (the Slurm prolog's reports, the epilog's bundles).
``fleetdx db prune`` runs it; slurm/fleetdx-prune.timer and k8s/prune-cronjob.yaml run that every day.

What is kept whatever its age (decided here, stated in the README):

- **a node's newest run**: the run of greatest ``started_at`` among those that checked the node (a pair or
  group run counts for each of its nodes). It is the node's current state: placement, ``/metrics`` and the
  fleet's node states read it, and a node that has not been checked for longer than the retention age must
  not turn "never seen". Its findings, raw outputs and curves stay with it.
- **a node's newest prolog report and newest epilog bundle**, for the same reason.
- **a node's current state** (``node_states``) and the newest of its state changes (``node_transitions``; the
  older ones go with the age like runs).
- API tokens (they are credentials, not history; ``fleetdx token revoke`` ends them): :data:`KEPT_TABLES`.
  tests/test_retention.py fails when a table is added to the store without being pruned here or kept.

A run's age is its ``started_at``, a postmortem's and a step analysis's its ``created_at``, a live job state's its
last push, a file's its modification time (a bundle's: the newest file in it). Rows are deleted children first
(probe results, finding hosts and curve hosts, then nodes, findings, recommendations, curves and raw outputs, then
the run), explicitly rather than through ``ON DELETE CASCADE``, so the same statements hold on SQLite and
PostgreSQL; runs go in batches of :data:`BATCH_RUNS`, one transaction each, so a large first prune never holds the
database's write lock for long. SQLite keeps the freed pages for new rows (``VACUUM`` shrinks the file; not done
here: it locks the database for its whole duration).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field
from sqlalchemy import ColumnElement, Select, and_, delete, exists, func, select
from sqlalchemy.orm import Session, aliased

from fleetdx.orchestrator.store.models import (
    Base,
    CurveNodeRow,
    CurveRow,
    FindingNodeRow,
    FindingRow,
    LiveJobRow,
    NodeRow,
    NodeTransitionRow,
    PostmortemHostRow,
    PostmortemRow,
    ProbeResultRow,
    RawOutputRow,
    RecommendationRow,
    RunRow,
    StepAnalysisRow,
)
from fleetdx.orchestrator.store.store import Store
from fleetdx.probes.contracts import Contract

#: runs deleted per transaction
BATCH_RUNS = 500
#: the prolog's report names (slurm/prolog.sh): prolog-JOBID-HOST.json
PROLOG_REPORT = re.compile(r"^prolog-(?P<job>[0-9]+(?:_[0-9]+)?)-(?P<host>.+)\.json$")
#: ages as ``fleetdx db prune --older-than`` takes them: a number and a unit
_AGE = re.compile(r"^\s*(?P<n>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>s|m|h|d|w)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

#: Where = a run id list (or subquery) -> the rows of one table that belong to those runs
Where = Callable[[Any], ColumnElement[bool]]


def _node_pks(runs: Any) -> Select[Any]:
    return select(NodeRow.id).where(NodeRow.run_pk.in_(runs))


def _finding_pks(runs: Any) -> Select[Any]:
    return select(FindingRow.id).where(FindingRow.run_pk.in_(runs))


def _curve_pks(runs: Any) -> Select[Any]:
    return select(CurveRow.id).where(CurveRow.run_pk.in_(runs))


#: the tables under a run, children before their parents: (table, its rows of the given runs)
RUN_CHILDREN: list[tuple[type[Base], Where]] = [
    (ProbeResultRow, lambda runs: ProbeResultRow.node_pk.in_(_node_pks(runs))),
    (FindingNodeRow, lambda runs: FindingNodeRow.finding_pk.in_(_finding_pks(runs))),
    (CurveNodeRow, lambda runs: CurveNodeRow.curve_pk.in_(_curve_pks(runs))),
    (NodeRow, lambda runs: NodeRow.run_pk.in_(runs)),
    (FindingRow, lambda runs: FindingRow.run_pk.in_(runs)),
    (RecommendationRow, lambda runs: RecommendationRow.run_pk.in_(runs)),
    (CurveRow, lambda runs: CurveRow.run_pk.in_(runs)),
    (RawOutputRow, lambda runs: RawOutputRow.run_pk.in_(runs)),
    (RunRow, lambda runs: RunRow.id.in_(runs)),
]
#: the same for postmortems
POSTMORTEM_CHILDREN: list[tuple[type[Base], Where]] = [
    (PostmortemHostRow, lambda pms: PostmortemHostRow.postmortem_pk.in_(pms)),
    (PostmortemRow, lambda pms: PostmortemRow.id.in_(pms)),
]
#: the same for step analyses and live job states (no child rows)
STEP_ANALYSIS_CHILDREN: list[tuple[type[Base], Where]] = [(StepAnalysisRow, lambda ids: StepAnalysisRow.id.in_(ids))]
LIVE_JOB_CHILDREN: list[tuple[type[Base], Where]] = [(LiveJobRow, lambda ids: LiveJobRow.id.in_(ids))]


#: tables never pruned: credentials, and each node's current state (one row per host)
KEPT_TABLES = frozenset({"api_tokens", "node_states"})


def _old_transitions(cutoff: float) -> Select[Any]:
    """Node state changes before ``cutoff``, except each host's newest (the change into its current state)."""
    later = aliased(NodeTransitionRow)
    newer = exists().where(later.host == NodeTransitionRow.host, later.at > NodeTransitionRow.at)
    return select(NodeTransitionRow.id).where(NodeTransitionRow.at < cutoff, newer)


class RemovedFile(Contract):
    """One prolog report or epilog bundle (a ``JOBID/HOST`` folder) removed, or that would be."""

    path: str
    kind: str  #: "prolog-report" or "epilog-bundle"
    bytes: int
    modified_at: float


class PruneResult(Contract):
    """What ``fleetdx db prune`` removed (or, with ``dry_run``, would remove). ``cutoff``: Unix seconds; older
    is removed. ``rows``: table name -> rows; ``kept_newest``: runs older than the cutoff kept because each is a
    node's newest; ``files``: the files and folders, with ``kept_newest_files`` kept for the same reason."""

    schema_version: int = 1
    cutoff: float
    older_than_s: float
    dry_run: bool
    store: str | None = None
    rows: dict[str, int] = Field(default_factory=dict)
    kept_newest: int = 0
    files: list[RemovedFile] = Field(default_factory=list)
    kept_newest_files: int = 0


def parse_age(text: str) -> float:
    """Seconds of an age such as ``90d``, ``12h``, ``2w``, ``30m`` or ``3600s``. Raises ValueError otherwise
    (a bare number is refused: days or seconds would be a guess)."""
    m = _AGE.match(text)
    if m is None:
        raise ValueError(f"age {text!r}: give a number and a unit: s, m, h, d or w (e.g. 90d)")
    seconds = float(m["n"]) * _UNIT_S[m["unit"]]
    if seconds <= 0:
        raise ValueError(f"age {text!r}: must be more than 0")
    return seconds


def _newest_run_pks() -> Select[Any]:
    """The runs that are some node's newest (ties: all of them)."""
    newest = (
        select(NodeRow.host, func.max(RunRow.started_at).label("newest"))
        .join(RunRow, NodeRow.run_pk == RunRow.id)
        .group_by(NodeRow.host)
        .subquery()
    )
    return (
        select(NodeRow.run_pk)
        .join(RunRow, NodeRow.run_pk == RunRow.id)
        .join(newest, and_(NodeRow.host == newest.c.host, RunRow.started_at == newest.c.newest))
    )


def _old_runs(cutoff: float) -> Select[Any]:
    return select(RunRow.id).where(RunRow.started_at < cutoff, RunRow.id.not_in(_newest_run_pks()))


def _count(session: Session, table: type[Base], where: ColumnElement[bool]) -> int:
    return int(session.scalar(select(func.count()).select_from(table).where(where)) or 0)


def prune_store(
    store: Store, cutoff: float, *, dry_run: bool = False, older_than_s: float = 0, batch: int = BATCH_RUNS
) -> PruneResult:
    """Remove the runs started before ``cutoff`` (Unix s) that are no node's newest, with every row under them,
    the postmortems made before it and the node state changes before it but each host's newest (see the module
    doc). ``dry_run``: count only. Raises StoreError (or DatabaseUnreachable) as the store does."""
    with store._errors(), Session(store.engine) as session:  # noqa: SLF001  (the store's own error mapping)
        kept = _count(session, RunRow, and_(RunRow.started_at < cutoff, RunRow.id.in_(_newest_run_pks())))
        if dry_run:
            rows = _would_remove(session, cutoff)
    if not dry_run:
        rows = dict.fromkeys(_would_remove_names(), 0)
        for counts in _delete_batches(store, cutoff, batch):
            for name, n in counts.items():
                rows[name] += n
        for name, n in store._write(lambda session: _drop_the_rest(session, cutoff, batch)).items():  # noqa: SLF001
            rows[name] += n
    return PruneResult(
        cutoff=cutoff, older_than_s=older_than_s, dry_run=dry_run, store=store.url, rows=rows, kept_newest=kept
    )


def _would_remove_names() -> list[str]:
    tables = RUN_CHILDREN + POSTMORTEM_CHILDREN + STEP_ANALYSIS_CHILDREN + LIVE_JOB_CHILDREN
    return [t.__tablename__ for t, _ in tables] + [NodeTransitionRow.__tablename__]


def _old_postmortems(cutoff: float) -> Select[Any]:
    return select(PostmortemRow.id).where(PostmortemRow.created_at < cutoff)


def _old_step_analyses(cutoff: float) -> Select[Any]:
    return select(StepAnalysisRow.id).where(StepAnalysisRow.created_at < cutoff)


def _old_live_jobs(cutoff: float) -> Select[Any]:
    return select(LiveJobRow.id).where(LiveJobRow.updated_at < cutoff)


#: the stored documents (postmortems, step analyses, live job states): their rows, and which are old
_DOCUMENTS = (
    (POSTMORTEM_CHILDREN, _old_postmortems),
    (STEP_ANALYSIS_CHILDREN, _old_step_analyses),
    (LIVE_JOB_CHILDREN, _old_live_jobs),
)


def _would_remove(session: Session, cutoff: float) -> dict[str, int]:
    """Rows per table that a prune at ``cutoff`` removes."""
    rows = {t.__tablename__: _count(session, t, where(_old_runs(cutoff))) for t, where in RUN_CHILDREN}
    for children, old in _DOCUMENTS:
        rows |= {t.__tablename__: _count(session, t, where(old(cutoff))) for t, where in children}
    transitions = NodeTransitionRow.id.in_(_old_transitions(cutoff))
    rows[NodeTransitionRow.__tablename__] = _count(session, NodeTransitionRow, transitions)
    return rows


def _drop_the_rest(session: Session, cutoff: float, batch: int) -> dict[str, int]:
    """Delete the old postmortems, step analyses and node state changes (in one transaction, ``batch`` ids per
    statement)."""
    counts: dict[str, int] = {}
    for children, old in _DOCUMENTS:
        counts |= {table.__tablename__: 0 for table, _ in children}
        pks = list(session.scalars(old(cutoff)))
        for start in range(0, len(pks), batch):
            for name, n in _delete(session, children, pks[start : start + batch]).items():
                counts[name] += n
    ids = list(session.scalars(_old_transitions(cutoff)))  # materialised: the subquery reads the same table
    counts[NodeTransitionRow.__tablename__] = 0
    for start in range(0, len(ids), batch):  # bounded IN lists (SQLite and libpq cap parameters)
        gone = session.execute(
            delete(NodeTransitionRow)
            .where(NodeTransitionRow.id.in_(ids[start : start + batch]))
            .execution_options(synchronize_session=False)
        )
        counts[NodeTransitionRow.__tablename__] += int(getattr(gone, "rowcount", 0) or 0)
    return counts


def _delete_batches(store: Store, cutoff: float, batch: int) -> Iterator[dict[str, int]]:
    """Delete the old runs ``batch`` at a time, one write transaction each; yield each batch's row counts."""
    while True:

        def one_batch(session: Session) -> dict[str, int]:
            pks = list(session.scalars(_old_runs(cutoff).order_by(RunRow.id).limit(batch)))
            return _delete(session, RUN_CHILDREN, pks) if pks else {}

        counts = store._write(one_batch)  # noqa: SLF001  (the store's write transaction and its retries)
        if not counts:
            return
        yield counts


def _delete(session: Session, tables: Sequence[tuple[type[Base], Where]], pks: list[int]) -> dict[str, int]:
    counts = {}
    for table, where in tables:
        result = session.execute(delete(table).where(where(pks)).execution_options(synchronize_session=False))
        counts[table.__tablename__] = int(getattr(result, "rowcount", 0) or 0)
    return counts


@dataclass(frozen=True)
class SlurmDirs:
    """Where slurm/prolog.sh writes its reports and slurm/epilog.sh its bundles (defaults as theirs)."""

    log_dir: Path = Path("/var/log/fleetdx")
    bundle_dir: Path = Path("/var/lib/fleetdx/bundles")


def slurm_dirs(conf: Path) -> SlurmDirs:
    """``FLEETDX_LOG_DIR`` and ``FLEETDX_BUNDLE_DIR`` of a fleetdx-slurm.conf (shell ``NAME=value`` lines, as
    the scripts source it; a name it does not set keeps the scripts' default). Raises OSError when unreadable."""
    found: dict[str, str] = {}
    for line in conf.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.match(r"^\s*(?:export\s+)?(FLEETDX_LOG_DIR|FLEETDX_BUNDLE_DIR)=(.*?)\s*$", line)
        if m is not None:
            found[m[1]] = m[2].strip("'\"")
    default = SlurmDirs()
    return SlurmDirs(
        log_dir=Path(found["FLEETDX_LOG_DIR"]) if found.get("FLEETDX_LOG_DIR") else default.log_dir,
        bundle_dir=Path(found["FLEETDX_BUNDLE_DIR"]) if found.get("FLEETDX_BUNDLE_DIR") else default.bundle_dir,
    )


def prune_files(dirs: SlurmDirs, cutoff: float, *, dry_run: bool = False, older_than_s: float = 0) -> PruneResult:
    """Remove the prolog reports (``LOG_DIR/prolog-JOBID-HOST.json``) and epilog bundles
    (``BUNDLE_DIR/JOBID/HOST/``, then a ``JOBID`` folder left empty) last modified before ``cutoff``, except
    each host's newest report and newest bundle. Symbolic links are never followed nor removed; a folder that
    does not exist has nothing to prune."""
    removed: list[RemovedFile] = []
    kept = 0
    reports = [(p, m["host"]) for p in _entries(dirs.log_dir) if (m := PROLOG_REPORT.match(p.name)) and _is_file(p)]
    bundles = [
        (host_dir, host_dir.name)
        for job_dir in _entries(dirs.bundle_dir)
        if _is_dir(job_dir)
        for host_dir in _entries(job_dir)
        if _is_dir(host_dir)
    ]
    for kind, items in (("prolog-report", reports), ("epilog-bundle", bundles)):
        old, n_kept = _old_but_not_newest(items, cutoff)
        kept += n_kept
        for path, (size, modified) in old:
            removed.append(RemovedFile(path=str(path), kind=kind, bytes=size, modified_at=modified))
            if not dry_run:
                _remove(path)
    if not dry_run:
        for job_dir in _entries(dirs.bundle_dir):
            if _is_dir(job_dir) and not any(job_dir.iterdir()):
                job_dir.rmdir()
    return PruneResult(cutoff=cutoff, older_than_s=older_than_s, dry_run=dry_run, files=removed, kept_newest_files=kept)


def _old_but_not_newest(
    items: list[tuple[Path, str]], cutoff: float
) -> tuple[list[tuple[Path, tuple[int, float]]], int]:
    """The items modified before ``cutoff`` that are not their host's newest, with (bytes, mtime); and how many
    old ones were kept as a host's newest."""
    stats = {path: _size_and_mtime(path) for path, _ in items}
    newest: dict[str, Path] = {}
    for path, host in items:
        if host not in newest or stats[path][1] > stats[newest[host]][1]:
            newest[host] = path
    keep = set(newest.values())
    old = [(path, stats[path]) for path, _ in items if stats[path][1] < cutoff and path not in keep]
    kept = sum(1 for path in keep if stats[path][1] < cutoff)
    return sorted(old), kept


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _is_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _is_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _size_and_mtime(path: Path) -> tuple[int, float]:
    """A file's size and mtime; a folder's total size and newest mtime (itself included), links not followed."""
    st = path.lstat()
    if not _is_dir(path):
        return st.st_size, st.st_mtime
    size, newest = 0, st.st_mtime
    for root, dirnames, filenames in os.walk(path):
        for name in filenames + dirnames:
            s = (Path(root) / name).lstat()
            newest = max(newest, s.st_mtime)
            size += s.st_size if name in filenames else 0
    return size, newest


def _remove(path: Path) -> None:
    if _is_dir(path):
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def cutoff_of(older_than_s: float, now: float | None = None) -> float:
    """The Unix time before which things are removed."""
    return (time.time() if now is None else now) - older_than_s
