"""The one writer of a run's rows (:mod:`fleetdx.orchestrator.store.rows`) writes exactly what the ORM wrote:
the same reports saved through the ORM's unit of work (the store's write path before the writer: a copy of it
below, :func:`orm_save`), through :meth:`Store.save_report` / ``save_reports`` (SQLAlchemy Core bulk inserts)
and, on SQLite, through :mod:`fleetdx.orchestrator.store.direct` (``sqlite3``, a prolog's save) give the same
rows in every table, surrogate keys and stored encodings (JSON text, 0/1, types) included."""

from __future__ import annotations

import hashlib
import sqlite3
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from fleetdx.orchestrator.diagnosis.node_states import CheckEvent, NodeStatus, step
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import (
    BusbwCurve,
    NodeReport,
    Recommendation,
    RunKind,
    RunReport,
)
from fleetdx.orchestrator.store import Store, direct, save_or_spool
from fleetdx.orchestrator.store.models import (
    Base,
    CurveNodeRow,
    CurveRow,
    FindingNodeRow,
    FindingRow,
    NodeRow,
    NodeStateRow,
    NodeTransitionRow,
    ProbeResultRow,
    RawOutputRow,
    RecommendationRow,
    RunRow,
)
from fleetdx.orchestrator.store.rows import JSON_COLUMNS, Sink, write_runs
from fleetdx.probes.contracts import Job, Level, SchedulerKind, Severity, Verdict
from tests.store_samples import (
    bandwidth_raw,
    bandwidth_run,
    full_preflight_run,
    migrated,
    pair_run,
    preflight_raw,
    preflight_run,
)

pytest_plugins = ["tests.pgfixtures"]

T0 = 1_800_000_000.0
WINDOW = 24 * 3600.0


# -- the reference: the ORM write path as the store had it before the one writer ------------------------
def _orm_run_row(report: RunReport, raw: Mapping[str, Mapping[str, str]]) -> RunRow:
    run = RunRow(
        run_id=report.run_id,
        schema_version=report.schema_version,
        kind=report.kind,
        started_at=report.started_at,
        finished_at=report.finished_at,
        level=report.level,
        schedule=report.schedule,
        verdict=report.verdict,
        exit_code=report.exit_code,
        simulated=report.simulated,
        exclude=report.exclude,
        job_id=report.job.job_id if report.job else None,
        job=report.job.model_dump(mode="json") if report.job else None,
    )
    run.nodes = [_orm_node_row(i, n) for i, n in enumerate(report.nodes)]
    run.raw_outputs = [_orm_raw_row(h, name, t) for h in sorted(raw) for name, t in sorted(raw[h].items())]
    run.findings = [_orm_finding_row(i, f) for i, f in enumerate(report.findings)]
    run.recommendations = [_orm_recommendation_row(i, r) for i, r in enumerate(report.recommendations)]
    run.curves = [_orm_curve_row(i, c) for i, c in enumerate(report.curves)]
    return run


def _orm_node_row(position: int, node: NodeReport) -> NodeRow:
    row = NodeRow(position=position, host=node.host, verdict=node.verdict, unjudged=node.unjudged)
    row.probes = [
        ProbeResultRow(position=i, name=p.name, status=p.status, duration_s=p.duration_s, error=p.error)
        for i, p in enumerate(node.probes)
    ]
    return row


def _orm_raw_row(host: str, file_name: str, raw_text: str) -> RawOutputRow:
    data = raw_text.encode("utf-8")
    return RawOutputRow(
        host=host,
        file_name=file_name,
        encoding="zlib",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        data=zlib.compress(data, 6),
    )


def _orm_finding_row(position: int, f: Finding) -> FindingRow:
    data = f.model_dump(mode="json", include={"evidence", "details"})
    row = FindingRow(
        position=position,
        code=f.code,
        severity=f.severity,
        subject=f.subject,
        message=f.message,
        evidence=data["evidence"],
        scope=f.scope.value,
        rank=f.rank,
        gpu=f.gpu,
        action=f.action,
        time=f.time,
        details=data["details"],
    )
    row.hosts = [FindingNodeRow(position=i, host=h) for i, h in enumerate(f.nodes)]
    return row


def _orm_recommendation_row(position: int, r: Recommendation) -> RecommendationRow:
    return RecommendationRow(
        position=position,
        node=r.node,
        kind=r.kind,
        subject=r.subject,
        message=r.message,
        data=r.model_dump(mode="json")["data"],
    )


def _orm_curve_row(position: int, c: BusbwCurve) -> CurveRow:
    peak = max(c.points, key=lambda p: p.busbw_gbps, default=None)
    row = CurveRow(
        position=position,
        collective=c.collective,
        nranks=c.nranks,
        backend=c.backend,
        nodes=list(c.nodes),
        points=[p.model_dump(mode="json") for p in c.points],
        peak_busbw_gbps=None if peak is None else peak.busbw_gbps,
        peak_size=None if peak is None else peak.size,
    )
    row.hosts = [CurveNodeRow(host=h) for h in dict.fromkeys(c.nodes)]
    return row


def _orm_move_nodes(session: Session, report: RunReport) -> None:
    if report.kind is not RunKind.PREFLIGHT or report.simulated:
        return
    for node in report.nodes:
        want = {Verdict.CRITICAL: Severity.CRITICAL, Verdict.UNKNOWN: Severity.UNKNOWN}.get(node.verdict)
        cause, code = None, None
        for f in report.findings:
            if want is not None and f.severity is want and node.host in f.nodes:
                subject = f.subject if f.subject not in ("", "node") else ""
                cause, code = f"{f.code.value} {subject}".strip(), f.code.value
                break
        else:
            if node.verdict is Verdict.UNKNOWN:
                cause = f"no verdict: {node.unjudged}" if node.unjudged else "no verdict"
        event = CheckEvent(
            at=report.finished_at,
            run_id=report.run_id,
            verdict=node.verdict,
            level=report.level,
            cause=cause,
            code=code,
        )
        row = session.scalars(select(NodeStateRow).where(NodeStateRow.host == node.host)).one_or_none()
        before = None if row is None else NodeStatus.model_validate(row, from_attributes=True)
        result = step(before, node.host, event, flap_window_s=WINDOW)
        t, new = result.transition, result.status
        if t is None or new is None:
            continue
        values = new.model_dump(exclude={"host"})
        if row is None:
            session.add(NodeStateRow(host=node.host, **values))
        else:
            for key, value in values.items():
                setattr(row, key, value)
        session.add(NodeTransitionRow(**t.model_dump()))


def orm_save(url: str, items: Sequence[tuple[RunReport, Mapping[str, Mapping[str, str]] | None]]) -> None:
    """Save ``items`` in one transaction as the ORM did: the runs not stored yet added, one flush, then their
    nodes' states in order."""
    engine = create_engine(url)
    try:
        with Session(engine) as session, session.begin():
            ids = [report.run_id for report, _raw in items]
            seen = set(session.scalars(select(RunRow.run_id).where(RunRow.run_id.in_(ids))))
            new = []
            for report, raw in items:
                if report.run_id not in seen:
                    seen.add(report.run_id)
                    new.append(report)
                    session.add(_orm_run_row(report, raw or {}))
            session.flush()
            for report in new:
                _orm_move_nodes(session, report)
    finally:
        engine.dispose()


# -- the reports: every table; node states created, and updated twice in one batch -------------
def critical_run(run_id: str, at: float, host: str) -> RunReport:
    finding = Finding(
        code=FindingCode.GPU_FOREIGN_PROCESS,
        severity=Severity.CRITICAL,
        nodes=[host],
        subject="GPU0",
        message="pid 4242 (python3) holds GPU0 with 1000 MiB",
        evidence=[{"file": "nvidia-smi_-q_-x.xml", "line": 3, "text": "<pid>4242</pid>"}],
    )
    return RunReport(
        run_id=run_id,
        kind=RunKind.PREFLIGHT,
        started_at=at,
        finished_at=at + 2,
        level=Level.QUICK,
        verdict=Verdict.CRITICAL,
        exit_code=2,
        nodes=[NodeReport(host=host, verdict=Verdict.CRITICAL)],
        findings=[finding],
        job=Job(scheduler=SchedulerKind.SLURM, job_id="4242", nodes=[host]),
    )


def batches() -> list[list[tuple[RunReport, Any]]]:
    return [
        [(preflight_run("pf-1", T0), preflight_raw())],
        [(bandwidth_run("bw-1", T0 + 10, degraded=True), bandwidth_raw(True))],
        [(pair_run("pair-1", T0 + 20), None), (full_preflight_run("full-1", T0 + 30), None)],
        [
            (critical_run("crit-1", T0 + 40, "gpu07"), {"gpu07": {"x.txt": "é\x1b[4mGPU0\r\n"}}),
            (preflight_run("pf-2", T0 + 50, host="gpu07"), None),
            (critical_run("crit-2", T0 + 60, "gpu07"), None),
        ],
        [(full_preflight_run("full-2", T0 + 70), None), (preflight_run("pf-1", T0), None)],  # pf-1: stored already
    ]


def dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, ordered by every column; on SQLite each value with SQLite's own type of it, on
    PostgreSQL as its text (the JSON as stored)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            for table in Base.metadata.sorted_tables:
                cols = [c.name for c in table.columns]
                typed = ", ".join(f'"{c}", typeof("{c}")' for c in cols)
                order = ", ".join(f'"{c}"' for c in cols)
                out[table.name] = conn.execute(f'SELECT {typed} FROM "{table.name}" ORDER BY {order}').fetchall()
        finally:
            conn.close()
        return out
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            for table in Base.metadata.sorted_tables:
                cols = ", ".join(f'"{c.name}"::text' for c in table.columns)
                rows = conn.execute(text(f'SELECT {cols} FROM "{table.name}"'))
                out[table.name] = sorted((tuple(r) for r in rows), key=lambda r: [(v is None, v or "") for v in r])
    finally:
        engine.dispose()
    return out


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def three_urls(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """Three migrated SQLite files (the ORM's, the Store's, the prolog's), or two PostgreSQL databases."""
    if request.param == "sqlite":
        return [migrated(f"sqlite:///{tmp_path / f'db{i}.db'}") for i in range(3)]
    from tests.pgfixtures import _create_database, _drop_database, pg_server_url

    pg_server_url()
    made = [_create_database() for _ in range(2)]
    request.addfinalizer(lambda: [_drop_database(name) for name, _url in made])
    return [migrated(url) for _name, url in made]


def test_the_writer_stores_what_the_orm_stored(three_urls: list[str]) -> None:
    orm_url, core_url, *direct_url = three_urls
    stored: set[str] = set()
    for batch in batches():
        orm_save(orm_url, batch)
        with Store.open(core_url, flap_window_s=WINDOW) as store:
            if len(batch) == 1:
                assert store.save_report(*batch[0]) is True
            else:
                assert store.save_reports(batch) == [r.run_id not in stored for r, _raw in batch]
        for url in direct_url:  # one report at a time, as a prolog saves
            for report, raw in batch:
                assert direct.save(url, report, raw, WINDOW) is (report.run_id not in stored)
        stored |= {r.run_id for r, _raw in batch}
    want = dump(orm_url)
    assert all(want[t] for t in ("runs", "probe_results", "finding_nodes", "busbw_curve_nodes", "node_transitions"))
    states = [row for row in want["node_transitions"] if "gpu07" in row]
    assert len(states) == 3  # gpu07: new -> suspect, -> ok, -> suspect (two of them in one batch)
    for url in (core_url, *direct_url):
        got = dump(url)
        for table, rows in want.items():
            assert got[table] == rows, table


def test_the_json_columns_and_every_column_are_written(tmp_path: Path) -> None:
    """:data:`JSON_COLUMNS` names exactly the JSON columns of the models, and the writer gives every column
    but the generated keys a value."""
    from sqlalchemy import JSON

    json_columns = {
        t.name: frozenset(c.name for c in t.columns if isinstance(c.type, JSON)) for t in Base.metadata.sorted_tables
    }
    assert JSON_COLUMNS == {name: cols for name, cols in json_columns.items() if cols and name in JSON_COLUMNS}
    written: dict[str, set[str]] = {}

    class Recorder:
        def insert(self, table: str, rows: Sequence[dict[str, Any]]) -> None:
            written.setdefault(table, set()).update(*(r.keys() for r in rows))

        def insert_ids(self, table: str, rows: Sequence[dict[str, Any]]) -> list[int]:
            self.insert(table, rows)
            return list(range(1, len(rows) + 1))

        def stored_run_ids(self, run_ids: Sequence[str]) -> set[str]:
            return set()

        def node_states(self, hosts: Sequence[str]) -> dict[str, dict[str, Any]]:
            return {}

        def update_node_states(self, rows: Sequence[dict[str, Any]]) -> None:
            self.insert("node_states", rows)

        def after_commit(self, events: Sequence[Any]) -> None:
            pass

    sink: Sink = Recorder()
    items = [(r, raw) for batch in batches() for r, raw in batch]
    write_runs(sink, items, WINDOW)
    run_tables = {"runs", "nodes", "probe_results", "raw_outputs", "findings", "finding_nodes", "recommendations"}
    for table in Base.metadata.sorted_tables:
        if table.name in run_tables | {"busbw_curves", "busbw_curve_nodes", "node_states", "node_transitions"}:
            generated = {c.name for c in table.primary_key.columns if c.autoincrement is True or c.name == "id"}
            assert written[table.name] == {c.name for c in table.columns} - generated, table.name
    assert set(JSON_COLUMNS) <= set(written)


def test_the_prolog_save_leaves_other_databases_to_the_store(tmp_path: Path) -> None:
    """``direct.save`` writes only into an existing SQLite file at the newest schema; for a new file, an
    old schema or another URL it changes nothing and says so (None), and save_or_spool then goes through the
    Store, which migrates."""
    report, raw = preflight_run("pf-1", T0), preflight_raw()
    new = tmp_path / "new.db"
    assert direct.save(f"sqlite:///{new}", report, raw, WINDOW) is None and not new.exists()
    assert direct.save("sqlite:///:memory:", report, raw, WINDOW) is None
    assert direct.save(f"sqlite:///{new}?timeout=3", report, raw, WINDOW) is None
    assert direct.save("postgresql://127.0.0.1:1/x", report, raw, WINDOW) is None
    old = tmp_path / "old.db"
    sqlite3.connect(old).executescript(
        "CREATE TABLE alembic_version (version_num VARCHAR(32)); INSERT INTO alembic_version VALUES ('0001');"
    )
    assert direct.save(f"sqlite:///{old}", report, raw, WINDOW) is None
    outcome = save_or_spool(f"sqlite:///{new}", report, raw, spool_dir=tmp_path / "spool")
    assert outcome.stored and outcome.database == f"sqlite:///{new}"
    # the file exists at the newest schema now: the second save is the direct one, and a duplicate
    assert direct.save(f"sqlite:///{new}", report, raw, WINDOW) is False
    second = preflight_run("pf-2", T0 + 60)
    assert direct.save(f"sqlite:///{new}", second, raw, WINDOW) is True
    with Store.open(f"sqlite:///{new}") as store:
        assert store.get_run("pf-2") == second and store.get_raw("pf-2", "h100-vm-idle") == raw["h100-vm-idle"]


def test_a_prolog_save_that_quarantines_sends_the_event_after_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retest's CRITICAL pre-flight saved by ``direct.save`` quarantines the node (retest fail) and sends one
    node.quarantined event, after the commit; a save that fails sends nothing and stores nothing."""
    from fleetdx.orchestrator import notify as notify_mod
    from fleetdx.orchestrator.diagnosis.node_states import DrainEvent, RetestEvent
    from fleetdx.orchestrator.store import states

    url = migrated(f"sqlite:///{tmp_path / 'q.db'}")
    sent: list[Any] = []
    monkeypatch.setattr(notify_mod, "notify", sent.append)
    with Store.open(url) as store:
        assert store.save_report(critical_run("c-1", T0, "gpu07")) is True  # suspect
        states.record(store, "gpu07", DrainEvent(at=T0 + 10, reason="drained by fleetdx", run_id="c-1"))
        states.record(store, "gpu07", RetestEvent(at=T0 + 20))
    sent.clear()  # the drain's event (through the Store's sink)
    broken = critical_run("c-2", T0 + 30, "gpu07").model_copy(update={"exit_code": None})  # NOT NULL refuses it
    assert direct.save(url, broken, None, WINDOW) is None and sent == []
    assert direct.save(url, critical_run("c-3", T0 + 40, "gpu07"), None, WINDOW) is True
    assert [(e.kind.value, e.hosts, e.run_id, e.details["from_state"]) for e in sent] == [
        ("node.quarantined", ["gpu07"], "c-3", "retesting")
    ]
    with Store.open(url) as store:
        assert states.get(store, "gpu07").state.value == "quarantined"  # type: ignore[union-attr]
        assert [r.run_id for r in store.list_runs()] == ["c-3", "c-1"]
