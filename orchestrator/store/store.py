"""The Store: saves :class:`~fleetdx.orchestrator.report.RunReport` runs with their raw tool outputs and answers
history queries. The only module of fleetdx that talks to the database.

Typical use::

    store = Store.open(None)          # --db URL, else $FLEETDX_DB_URL, else the user's SQLite file
    store.save_report(report, raw={"node01": {"nvidia-smi_topo_-m.txt": text}})
    store.node_history("node01", limit=20)

SQLite databases are migrated to the newest schema when opened (a user's own file). PostgreSQL databases
are shared and production: they are migrated only by ``fleetdx db upgrade``, and opening one whose schema
is missing or old raises :class:`SchemaOutdated` saying so.
"""

from __future__ import annotations

import hashlib
import random
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import ColumnElement, Engine, Table, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, selectinload

from fleetdx.orchestrator.diagnosis.node_states import DEFAULT_FLAP_WINDOW_S
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.judgement.envelope import Report
from fleetdx.orchestrator.report import (
    BusbwCurve,
    BusbwPoint,
    NodeHistoryEntry,
    NodeReport,
    ProbeSummary,
    Recommendation,
    RunReport,
)
from fleetdx.orchestrator.store import migrate
from fleetdx.orchestrator.store.engine import WRITE_OPTION, display_url, is_sqlite, make_engine, parse_url
from fleetdx.orchestrator.store.errors import DatabaseUnreachable, SchemaOutdated, StoreError
from fleetdx.orchestrator.store.models import (
    Base,
    CurveNodeRow,
    CurveRow,
    FindingNodeRow,
    FindingRow,
    LiveJobRow,
    NodeRow,
    PostmortemHostRow,
    PostmortemRow,
    RawOutputRow,
    RunRow,
    StepAnalysisRow,
)
from fleetdx.orchestrator.store.records import (
    BusbwHistoryPoint,
    FindingRecord,
    LiveJobRecord,
    PostmortemRecord,
    RunSummary,
    StepAnalysisRecord,
)
from fleetdx.orchestrator.store.rows import RAW_ENCODING, Row, write_runs
from fleetdx.orchestrator.store.settings import resolve_db_url, resolve_flap_window_s
from fleetdx.probes.contracts import Job, Severity

if TYPE_CHECKING:
    from fleetdx.orchestrator.notify import Event as NotifyEvent

T = TypeVar("T")
R = TypeVar("R", bound=Report)

#: attempts of one write when SQLite still reports "database is locked" after busy_timeout
WRITE_ATTEMPTS = 5
#: attempts of one run's write when a concurrent writer made a row it makes too (a node's first state row)
CONFLICT_ATTEMPTS = 3
#: base of the randomised exponential backoff between those attempts (s): attempt k waits 1-4 x base x 2^k
RETRY_BACKOFF_S = 0.05


class RunNotFound(StoreError):
    """No stored run has this run_id."""


class Store:
    """A handle on one database. Thread-safe (one engine, a session per call); close it when done."""

    def __init__(self, engine: Engine, flap_window_s: float = DEFAULT_FLAP_WINDOW_S) -> None:
        """Wrap an engine made by :func:`fleetdx.orchestrator.store.engine.make_engine`; use :meth:`open` instead.
        ``flap_window_s``: the flap window of node states (:mod:`fleetdx.orchestrator.diagnosis.node_states`)."""
        self.engine = engine
        self.flap_window_s = flap_window_s

    # -- opening -----------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        auto_upgrade: bool | None = None,
        check_schema: bool = True,
        flap_window_s: float | None = None,
    ) -> Store:
        """Open the database at ``url`` (None: ``$FLEETDX_DB_URL``, else the user's SQLite file).

        ``auto_upgrade`` (default: true for SQLite, false otherwise) migrates an old schema to the newest;
        ``check_schema=False`` only checks that the database answers (for ``fleetdx db upgrade``/``current``);
        ``flap_window_s`` (None: ``$FLEETDX_FLAP_WINDOW_S``, else 24 h) is the flap window of node states.
        Raises :class:`DatabaseUnreachable` (the URL and the driver's reason), :class:`SchemaOutdated`, or
        :class:`StoreError` for an unusable URL.
        """
        resolved = resolve_db_url(url)
        try:
            window = resolve_flap_window_s(flap_window_s)
        except ValueError as e:
            raise StoreError(str(e)) from None
        try:
            parsed = parse_url(resolved)
            engine = make_engine(parsed)
        except (SQLAlchemyError, ImportError, ValueError) as e:  # bad URL, unknown dialect, driver missing
            raise StoreError(f"cannot use database URL {resolved.split('@')[-1]!r}: {e}") from None
        except OSError as e:  # the SQLite file's directory cannot be created
            raise DatabaseUnreachable(
                f"cannot reach database {display_url(parsed)}: cannot create {e.filename}: {e.strerror}"
            ) from None
        store = cls(engine, window)
        try:
            if check_schema:
                store._check_schema(is_sqlite(parsed) if auto_upgrade is None else auto_upgrade)
            else:
                store.revision()  # raises DatabaseUnreachable when the database does not answer
        except BaseException:
            engine.dispose()
            raise
        return store

    @property
    def url(self) -> str:
        """The database URL with its password masked."""
        return display_url(self.engine.url)

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def revision(self) -> str | None:
        """The schema revision stamped in the database (``None``: never migrated). On SQLite the read is retried
        like a write (:meth:`_retry_locked`) while the file stays locked: a process opening a file that another
        one is creating or migrating at the same moment can find it locked (a CI run under load did, with four
        first uses of one new file at once)."""
        return self._retry_locked(lambda: migrate.current_revision(self.engine))

    def upgrade(self) -> tuple[str | None, str]:
        """Migrate to the newest schema; returns (revision before, revision after). Raises
        :class:`SchemaOutdated` when the database is at a revision newer than this fleetdx knows.

        On SQLite a migration waits for another process's migration of the same file like any write: its
        transaction opens with ``BEGIN IMMEDIATE``, waits ``busy_timeout`` and is retried (``WRITE_ATTEMPTS``)
        while the file stays locked, then finds the schema current and does nothing; a migration on a loaded
        machine may hold the lock longer than one ``busy_timeout``."""
        engine = self.engine.execution_options(**{WRITE_OPTION: True})

        def migrate_once() -> tuple[str | None, str]:
            before = migrate.current_revision(self.engine)
            if before is not None and before not in migrate.known_revisions():
                raise SchemaOutdated(
                    f"database {self.url} has schema revision {before}, newer than this fleetdx knows "
                    f"(head {migrate.head_revision()}): upgrade fleetdx"
                )
            return migrate.upgrade(engine), migrate.head_revision()

        return self._retry_locked(migrate_once)

    def _check_schema(self, auto_upgrade: bool) -> None:
        current = self.revision()
        if current == migrate.HEAD:  # the common case, decided without importing Alembic
            return
        head = migrate.head_revision()
        if auto_upgrade or (current is not None and current not in migrate.known_revisions()):
            self.upgrade()
            return
        state = "has no fleetdx schema" if current is None else f"has schema revision {current}"
        raise SchemaOutdated(f"database {self.url} {state}; fleetdx needs {head}: run `fleetdx db upgrade --db URL`")

    # -- writing -----------------------------------------------------------------------------------------
    def save_report(self, report: RunReport, raw: Mapping[str, Mapping[str, str]] | None = None) -> bool:
        """Store one run and its raw outputs (``raw``: host -> bundle file name -> raw text, any host) in
        one transaction. Returns False, storing nothing, when a run with this ``run_id`` is already stored
        (saving is idempotent, so re-importing a spool file never duplicates a run).

        Raises :class:`StoreError` when a host appears twice in ``report.nodes``, and
        :class:`DatabaseUnreachable` when the database goes away.
        """
        raw = raw or {}
        hosts = [n.host for n in report.nodes]
        if len(set(hosts)) != len(hosts):
            raise StoreError(f"run {report.run_id}: a host appears twice in its nodes")
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                return self._write(lambda s: write_runs(CoreSink(s), [(report, raw)], self.flap_window_s)[0])
            except _Conflict:
                # another writer stored the same run_id between our check and our insert
                if self._run_exists(report.run_id):
                    return False
                # or created a row this run's transaction creates too (a node's first state, stored by a run of
                # the same host committed meanwhile): the transaction is tried again, and then updates that row
                if attempt == CONFLICT_ATTEMPTS:
                    raise StoreError(f"run {report.run_id}: rejected by a constraint of {self.url}") from None
        raise AssertionError("unreachable")

    def save_reports(self, items: Sequence[tuple[RunReport, Mapping[str, Mapping[str, str]] | None]]) -> list[bool]:
        """Store several runs, each with its raw outputs (as :meth:`save_report`), in one transaction: one
        commit, and the rows of all of them inserted together (a batch of the service's concurrent uploads).
        Returns, per item in order, whether it was stored: False for a ``run_id`` already stored or earlier in
        ``items``. Nothing is stored when it raises.

        Raises:
            StoreError: a host appears twice in a report's nodes, or the batch broke a constraint (another
                writer stored one of its runs meanwhile): save the items one by one to tell which.
            DatabaseUnreachable: the database went away.
        """
        for report, _raw in items:
            hosts = [n.host for n in report.nodes]
            if len(set(hosts)) != len(hosts):
                raise StoreError(f"run {report.run_id}: a host appears twice in its nodes")
        try:
            return self._write(lambda session: write_runs(CoreSink(session), items, self.flap_window_s))
        except _Conflict as e:
            raise StoreError(f"a batch of {len(items)} runs was refused by a constraint: {e}") from None

    def save_postmortem(self, record: PostmortemRecord, report: Report | Mapping[str, Any]) -> bool:
        """Store one postmortem (``report``: its model, or the model's JSON data) apart from node history,
        indexed by its job and by the hosts its causes name. Returns False, storing nothing, when one with this
        ``postmortem_id`` is already stored. Raises :class:`DatabaseUnreachable` when the database goes away."""
        document = report.model_dump(mode="json") if isinstance(report, Report) else dict(report)

        def insert(session: Session) -> bool:
            if session.scalar(select(PostmortemRow.id).where(PostmortemRow.postmortem_id == record.postmortem_id)):
                return False
            row = PostmortemRow(
                postmortem_id=record.postmortem_id,
                job_id=record.job_id,
                created_at=record.created_at,
                verdict=record.verdict,
                first_cause=record.first_cause,
                document=dict(document),
            )
            row.hosts = [PostmortemHostRow(host=h) for h in dict.fromkeys(record.hosts)]
            session.add(row)
            return True

        try:
            return self._write(insert)
        except _Conflict:
            return False  # another writer stored the same postmortem_id first

    def list_postmortems(
        self, limit: int = 20, job_id: str | None = None, host: str | None = None
    ) -> list[PostmortemRecord]:
        """The ``limit`` newest postmortems, newest first; only job ``job_id``'s, or those naming ``host``."""
        stmt = select(PostmortemRow).order_by(PostmortemRow.created_at.desc(), PostmortemRow.id.desc()).limit(limit)
        if job_id is not None:
            stmt = stmt.where(PostmortemRow.job_id == job_id)
        if host is not None:
            stmt = stmt.where(PostmortemRow.hosts.any(PostmortemHostRow.host == host))
        with self._errors(), Session(self.engine) as session:
            return [
                PostmortemRecord(
                    postmortem_id=r.postmortem_id,
                    job_id=r.job_id,
                    created_at=r.created_at,
                    verdict=r.verdict,
                    first_cause=r.first_cause,
                    hosts=[h.host for h in r.hosts],
                )
                for r in session.scalars(stmt.options(selectinload(PostmortemRow.hosts)))
            ]

    def get_postmortem(self, postmortem_id: str, model: type[R]) -> R:
        """The stored report of ``postmortem_id`` as ``model`` (the postmortem's report contract, which lives
        above the store: the caller names it; older documents are upgraded by its validators).

        Raises:
            RunNotFound: no such postmortem.
            StoreError: a stored document that ``model`` does not read (one line: the first error).
        """
        return self._document(PostmortemRow.document, PostmortemRow.postmortem_id, postmortem_id, "postmortem", model)

    def save_step_analysis(self, record: StepAnalysisRecord, report: Report | Mapping[str, Any]) -> bool:
        """Store one step analysis (``report``: its model, or the model's JSON data), indexed by its job. Returns
        False, storing nothing, when one with this ``analysis_id`` is already stored. Raises
        :class:`DatabaseUnreachable` when the database goes away."""
        document = report.model_dump(mode="json") if isinstance(report, Report) else dict(report)

        def insert(session: Session) -> bool:
            if session.scalar(select(StepAnalysisRow.id).where(StepAnalysisRow.analysis_id == record.analysis_id)):
                return False
            session.add(StepAnalysisRow(**record.model_dump(), document=dict(document)))
            return True

        try:
            return self._write(insert)
        except _Conflict:
            return False  # another writer stored the same analysis_id first

    def list_step_analyses(self, limit: int = 20, job_id: str | None = None) -> list[StepAnalysisRecord]:
        """The ``limit`` newest step analyses, newest first; only job ``job_id``'s when given."""
        row = StepAnalysisRow
        stmt = select(row).order_by(row.created_at.desc(), row.id.desc()).limit(limit)
        if job_id is not None:
            stmt = stmt.where(row.job_id == job_id)
        with self._errors(), Session(self.engine) as session:
            return [
                StepAnalysisRecord(
                    analysis_id=r.analysis_id,
                    job_id=r.job_id,
                    created_at=r.created_at,
                    verdict=r.verdict,
                    first_finding=r.first_finding,
                    ranks=r.ranks,
                )
                for r in session.scalars(stmt)
            ]

    def get_step_analysis(self, analysis_id: str, model: type[R]) -> R:
        """The stored report of ``analysis_id`` as ``model`` (the steps report contract, named by the caller).

        Raises:
            RunNotFound: no such analysis.
            StoreError: a stored document that ``model`` does not read (one line: the first error).
        """
        return self._document(
            StepAnalysisRow.document, StepAnalysisRow.analysis_id, analysis_id, "step analysis", model
        )

    def save_live_job(self, record: LiveJobRecord) -> None:
        """Keep ``record`` as its job's latest live state (replacing the one before, unless that one is newer:
        pushes that arrive out of order never go back in time). Raises :class:`DatabaseUnreachable` when the
        database goes away."""
        doc = record.model_dump(mode="json")

        def upsert(session: Session) -> None:
            row = session.scalar(select(LiveJobRow).where(LiveJobRow.job_id == record.job_id))
            if row is None:
                session.add(
                    LiveJobRow(job_id=record.job_id, updated_at=record.updated_at, state=record.state, document=doc)
                )
            elif row.updated_at <= record.updated_at:
                row.updated_at, row.state, row.document = record.updated_at, record.state, doc

        try:
            self._write(upsert)
        except _Conflict:  # another writer created the job's row first: this push updates it
            self._write(upsert)

    def list_live_jobs(self, since: float | None = None, limit: int = 100) -> list[LiveJobRecord]:
        """The live states pushed at or after ``since`` (Unix s), newest first, at most ``limit``."""
        stmt = select(LiveJobRow.document).order_by(LiveJobRow.updated_at.desc(), LiveJobRow.id.desc()).limit(limit)
        if since is not None:
            stmt = stmt.where(LiveJobRow.updated_at >= since)
        with self._errors(), Session(self.engine) as session:
            return [LiveJobRecord.model_validate(d) for d in session.scalars(stmt)]

    def get_live_job(self, job_id: str) -> LiveJobRecord | None:
        """The job's latest live state, ``None`` when none was pushed."""
        with self._errors(), Session(self.engine) as session:
            doc = session.scalar(select(LiveJobRow.document).where(LiveJobRow.job_id == job_id))
        return LiveJobRecord.model_validate(doc) if doc is not None else None

    def _document(self, document: Any, key: Any, value: str, what: str, model: type[R]) -> R:
        """The stored JSON ``document`` column of the row whose ``key`` is ``value``, as ``model`` (RunNotFound:
        no such row; StoreError: a document ``model`` does not read, one line)."""
        with self._errors(), Session(self.engine) as session:
            doc = session.scalar(select(document).where(key == value))
            if doc is None:
                raise RunNotFound(f"no stored {what} {value!r} in {self.url}")
        try:
            return model.model_validate(doc)
        except ValidationError as e:
            first = e.errors()[0]["msg"]
            raise StoreError(f"stored {what} {value!r} is not a {model.__name__}: {first}") from None

    def newest_run_pk(self) -> int | None:
        """The primary key of the newest stored run (``None`` when there is none): it changes whenever a run is
        saved (runs are never updated or deleted), so a cache of answers drawn from runs can key on it."""
        with self._errors(), Session(self.engine) as session:
            return session.scalar(select(func.max(RunRow.id)))

    def _run_exists(self, run_id: str) -> bool:
        with self._errors(), Session(self.engine) as session:
            return session.scalar(select(RunRow.id).where(RunRow.run_id == run_id)) is not None

    def _write(self, work: Callable[[Session], T]) -> T:
        """Run ``work`` in a write transaction, retrying when SQLite is still locked after busy_timeout."""
        engine = self.engine.execution_options(**{WRITE_OPTION: True})

        def write_once() -> T:
            try:
                with Session(engine) as session, session.begin():
                    return work(session)
            except IntegrityError as e:
                raise _Conflict(_reason(e)) from e

        return self._retry_locked(write_once)

    def _retry_locked(self, once: Callable[[], T]) -> T:
        """``once()`` with driver errors turned into store errors (:meth:`_errors`), run again up to
        ``WRITE_ATTEMPTS`` times, after a randomised exponential backoff, while SQLite is still locked after
        busy_timeout (another process's write or migration holds the file)."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with self._errors(retryable=attempt < WRITE_ATTEMPTS):
                    return once()
            except _Locked:
                time.sleep(random.uniform(1.0, 4.0) * RETRY_BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable: the last attempt raises")  # pragma: no cover

    # -- reading -----------------------------------------------------------------------------------------
    def get_run(self, run_id: str) -> RunReport:
        """The stored report of ``run_id``, equal to the one saved. Raises :class:`RunNotFound`."""
        with self._errors(), Session(self.engine) as session:
            row = session.scalars(
                select(RunRow)
                .where(RunRow.run_id == run_id)
                .options(
                    selectinload(RunRow.nodes).selectinload(NodeRow.probes),
                    selectinload(RunRow.findings).selectinload(FindingRow.hosts),
                    selectinload(RunRow.recommendations),
                    selectinload(RunRow.curves),
                )
            ).one_or_none()
            if row is None:
                raise RunNotFound(f"no stored run with run_id {run_id!r} in {self.url}")
            return _report_of(row)

    def get_raw(self, run_id: str, host: str) -> dict[str, str]:
        """The raw outputs of ``host`` in ``run_id``: file name -> text, decompressed and checked against the
        stored size and sha256 (a mismatch raises :class:`StoreError`)."""
        with self._errors(), Session(self.engine) as session:
            rows = session.scalars(
                select(RawOutputRow)
                .join(RunRow)
                .where(RunRow.run_id == run_id, RawOutputRow.host == host)
                .order_by(RawOutputRow.file_name)
            ).all()
            return {r.file_name: _decompress(r) for r in rows}

    def list_runs(self, limit: int = 50, job_id: str | None = None) -> list[RunSummary]:
        """The ``limit`` newest runs (by ``started_at``), newest first; only job ``job_id``'s when given."""
        n_nodes = select(func.count(NodeRow.id)).where(NodeRow.run_pk == RunRow.id).scalar_subquery()
        n_findings = select(func.count(FindingRow.id)).where(FindingRow.run_pk == RunRow.id).scalar_subquery()
        stmt = select(RunRow, n_nodes, n_findings).order_by(RunRow.started_at.desc(), RunRow.id.desc()).limit(limit)
        if job_id is not None:
            stmt = stmt.where(RunRow.job_id == job_id)
        with self._errors(), Session(self.engine) as session:
            return [_summary_of(run, nodes, findings) for run, nodes, findings in session.execute(stmt)]

    def node_history(self, host: str, limit: int = 20, job_id: str | None = None) -> list[NodeHistoryEntry]:
        """``host``'s verdict and findings in its ``limit`` newest runs (those that list it as a node),
        newest first; only the runs of job ``job_id`` when given. A finding is ``host``'s when its ``nodes``
        name it: a pair or group finding is in the history of each of its hosts."""
        stmt = (
            select(NodeRow, RunRow)
            .join(RunRow)
            .where(NodeRow.host == host)
            .order_by(RunRow.started_at.desc(), RunRow.id.desc())
            .limit(limit)
        )
        if job_id is not None:
            stmt = stmt.where(RunRow.job_id == job_id)
        with self._errors(), Session(self.engine) as session:
            rows = session.execute(stmt).all()
            run_pks = [run.id for _, run in rows]
            by_run: dict[int, list[Finding]] = {pk: [] for pk in run_pks}
            if run_pks:
                findings = session.scalars(
                    select(FindingRow)
                    .where(FindingRow.run_pk.in_(run_pks), _names(host))
                    .order_by(FindingRow.run_pk, FindingRow.position)
                    .options(selectinload(FindingRow.hosts))
                )
                for f in findings:
                    by_run[f.run_pk].append(_finding_of(f))
            return [
                NodeHistoryEntry(
                    run_id=run.run_id,
                    kind=run.kind,
                    level=run.level,
                    schedule=run.schedule,
                    started_at=run.started_at,
                    verdict=node.verdict,
                    simulated=run.simulated,
                    job_id=run.job_id,
                    findings=by_run[run.id],
                )
                for node, run in rows
            ]

    def find_findings(
        self,
        code: FindingCode | None = None,
        severity: Severity | None = None,
        host: str | None = None,
        limit: int = 100,
    ) -> list[FindingRecord]:
        """Stored findings matching every given filter, newest run first; ``host`` matches a finding whose
        ``nodes`` name it (a pair or group finding matches each of its hosts)."""
        stmt = select(FindingRow, RunRow.run_id, RunRow.started_at).join(RunRow)
        if code is not None:
            stmt = stmt.where(FindingRow.code == code)
        if severity is not None:
            stmt = stmt.where(FindingRow.severity == severity)
        if host is not None:
            stmt = stmt.where(_names(host))
        stmt = (
            stmt.order_by(RunRow.started_at.desc(), RunRow.id.desc(), FindingRow.position)
            .limit(limit)
            .options(selectinload(FindingRow.hosts))
        )
        with self._errors(), Session(self.engine) as session:
            return [
                FindingRecord(run_id=run_id, started_at=started, finding=_finding_of(f))
                for f, run_id, started in session.execute(stmt)
            ]

    def recent_busbw(self, host: str, collective: str | Enum, limit: int = 20) -> list[BusbwHistoryPoint]:
        """The peak busbw of each stored ``collective`` curve that ran on ``host`` (alone or with other
        nodes), newest run first: the node's own history for bandwidth regression detection."""
        name = collective.value if isinstance(collective, Enum) else collective
        stmt = (
            select(CurveRow, RunRow.run_id, RunRow.started_at)
            .join(RunRow)
            .join(CurveNodeRow)
            .where(CurveNodeRow.host == host, CurveRow.collective == name)
            .order_by(RunRow.started_at.desc(), RunRow.id.desc(), CurveRow.position)
            .limit(limit)
        )
        with self._errors(), Session(self.engine) as session:
            return [
                BusbwHistoryPoint(
                    run_id=run_id,
                    started_at=started,
                    collective=c.collective,
                    backend=c.backend,
                    nodes=list(c.nodes),
                    nranks=c.nranks,
                    peak_busbw_gbps=c.peak_busbw_gbps,
                    peak_size=c.peak_size,
                )
                for c, run_id, started in session.execute(stmt)
            ]

    # -- errors ------------------------------------------------------------------------------------------
    @contextmanager
    def _errors(self, retryable: bool = False) -> Iterator[None]:
        """Turn driver errors into store errors: unreachable/locked -> :class:`DatabaseUnreachable` (or
        :class:`_Locked` to retry), anything else -> :class:`StoreError`; never a bare driver traceback."""
        try:
            yield
        except OperationalError as e:
            reason = _reason(e)
            locked = is_sqlite(self.engine.url) and "locked" in reason
            if locked and retryable:
                raise _Locked(reason) from e
            if locked:
                msg = f"database {self.url} stayed locked by other writers: {reason}"
                raise DatabaseUnreachable(msg) from None
            raise DatabaseUnreachable(f"cannot reach database {self.url}: {reason}") from None
        except SQLAlchemyError as e:
            raise StoreError(f"database error on {self.url}: {_reason(e)}") from None


class _Conflict(Exception):
    """A write broke a unique constraint (e.g. a concurrent save of the same run_id)."""


class _Locked(Exception):
    """SQLite was still locked after busy_timeout; the write is retried."""


def _reason(e: SQLAlchemyError) -> str:
    """The driver's own message, on one line."""
    orig = getattr(e, "orig", None)
    text = str(orig if orig is not None else e)
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or type(e).__name__


# -- report -> rows: the writer is rows.write_runs; this is its SQLAlchemy Core sink ---------------------
class CoreSink:
    """:class:`~fleetdx.orchestrator.store.rows.Sink` on a session's connection (SQLite or PostgreSQL): bulk Core
    inserts of each table's rows (``executemany``; ``RETURNING id`` in parameter order where the keys are
    needed), no ORM objects. Webhook events go out after the session commits."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.conn = session.connection()

    @staticmethod
    def _table(name: str) -> Table:
        return Base.metadata.tables[name]

    def insert(self, table: str, rows: Sequence[Row]) -> None:
        self.conn.execute(insert(self._table(table)), list(rows))

    def insert_ids(self, table: str, rows: Sequence[Row]) -> list[int]:
        t = self._table(table)
        if len(rows) == 1:
            return [self.conn.execute(insert(t).returning(t.c.id), rows[0]).scalar_one()]
        stmt = insert(t).returning(t.c.id, sort_by_parameter_order=True)
        return list(self.conn.execute(stmt, list(rows)).scalars())

    def stored_run_ids(self, run_ids: Sequence[str]) -> set[str]:
        return set(self.conn.execute(select(RunRow.run_id).where(RunRow.run_id.in_(run_ids))).scalars())

    def node_states(self, hosts: Sequence[str]) -> dict[str, Row]:
        t = self._table("node_states")
        stmt = select(t).where(t.c.host.in_(hosts)).order_by(t.c.host).with_for_update()
        return {row.host: dict(row._mapping) for row in self.conn.execute(stmt)}

    def update_node_states(self, rows: Sequence[Row]) -> None:
        t = self._table("node_states")
        stmt = update(t).where(t.c.host == bindparam("key_host"))
        self.conn.execute(stmt, [{**row, "key_host": row["host"]} for row in rows])

    def after_commit(self, events: Sequence[NotifyEvent]) -> None:
        from sqlalchemy import event as sa_event

        from fleetdx.orchestrator.notify import notify

        pending = self.session.info.setdefault("fleetdx_notify", [])
        if not pending:

            @sa_event.listens_for(self.session, "after_commit", once=True)
            def _send(committed: Session) -> None:
                for e in committed.info.pop("fleetdx_notify", []):
                    notify(e)

        pending.extend(events)


def _decompress(row: RawOutputRow) -> str:
    if row.encoding != RAW_ENCODING:
        raise StoreError(f"raw output {row.file_name}: unknown encoding {row.encoding!r}")
    data = zlib.decompress(row.data)
    if len(data) != row.size or hashlib.sha256(data).hexdigest() != row.sha256:
        raise StoreError(f"raw output {row.file_name}: size or sha256 does not match the stored one")
    return data.decode("utf-8")


def _names(host: str) -> ColumnElement[bool]:
    """The condition "this finding is about ``host``" (an EXISTS on ``finding_nodes``: one row per finding
    even when its nodes name the host twice)."""
    return FindingRow.hosts.any(FindingNodeRow.host == host)


def _finding_of(row: FindingRow) -> Finding:
    return Finding(
        code=row.code,
        severity=row.severity,
        nodes=[h.host for h in row.hosts],
        subject=row.subject,
        message=row.message,
        evidence=row.evidence or [],
        scope=row.scope,
        rank=row.rank,
        gpu=row.gpu,
        action=row.action or "",
        time=row.time,
        details=row.details or {},
    )


def _report_of(run: RunRow) -> RunReport:
    return RunReport(
        schema_version=run.schema_version,
        run_id=run.run_id,
        kind=run.kind,
        started_at=run.started_at,
        finished_at=run.finished_at,
        level=run.level,
        schedule=run.schedule,
        verdict=run.verdict,
        exit_code=run.exit_code,
        simulated=run.simulated,
        nodes=[
            NodeReport(
                host=n.host,
                verdict=n.verdict,
                unjudged=n.unjudged,
                probes=[
                    ProbeSummary(name=p.name, status=p.status, duration_s=p.duration_s, error=p.error) for p in n.probes
                ],
            )
            for n in run.nodes
        ],
        findings=[_finding_of(f) for f in run.findings],
        exclude=run.exclude,
        recommendations=[
            Recommendation(node=r.node, kind=r.kind, subject=r.subject, message=r.message, data=r.data)
            for r in run.recommendations
        ],
        curves=[
            BusbwCurve(
                collective=c.collective,
                nodes=list(c.nodes),
                nranks=c.nranks,
                backend=c.backend,
                points=[BusbwPoint.model_validate(p) for p in c.points],
            )
            for c in run.curves
        ],
        job=Job.model_validate(run.job) if run.job is not None else None,
    )


def _summary_of(run: RunRow, node_count: int, finding_count: int) -> RunSummary:
    return RunSummary(
        run_id=run.run_id,
        kind=run.kind,
        level=run.level,
        schedule=run.schedule,
        started_at=run.started_at,
        finished_at=run.finished_at,
        verdict=run.verdict,
        exit_code=run.exit_code,
        simulated=run.simulated,
        exclude=run.exclude,
        job_id=run.job_id,
        node_count=node_count,
        finding_count=finding_count,
    )
