"""Alembic migrations: they create exactly the ORM schema, go down and up again, ship inside the package,
and `fleetdx db upgrade` / `db current` drive them (SQLite and PostgreSQL)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import typer
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import db_cmd
from fleetdx.orchestrator.store import SchemaOutdated, Store
from fleetdx.orchestrator.store.migrate import HEAD, MIGRATIONS_DIR, downgrade, head_revision, known_revisions
from fleetdx.orchestrator.store.models import Base

pytest_plugins = ["tests.pgfixtures"]

TABLES = {
    "runs",
    "nodes",
    "probe_results",
    "raw_outputs",
    "findings",
    "finding_nodes",
    "recommendations",
    "busbw_curves",
    "busbw_curve_nodes",
    "api_tokens",
    "postmortems",
    "postmortem_hosts",
    "node_states",
    "node_transitions",
    "step_analyses",
    "live_jobs",
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest) -> str:
    """An empty database (no schema) on SQLite or PostgreSQL."""
    return str(request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url"))


def cli() -> typer.Typer:
    app = typer.Typer()
    db_cmd.register(app)
    return app


def test_migrations_ship_inside_the_package() -> None:
    assert MIGRATIONS_DIR == Path(importlib.import_module("fleetdx.orchestrator.store").__file__).parent / "migrations"
    assert (MIGRATIONS_DIR / "env.py").is_file() and (MIGRATIONS_DIR / "script.py.mako").is_file()
    shipped = {p.name.split("_", 1)[0] for p in (MIGRATIONS_DIR / "versions").glob("0*_*.py")}
    assert {"0001", "0002", "0003"} <= shipped and known_revisions() == shipped
    assert head_revision() == max(shipped) == HEAD  # HEAD: the head known without importing Alembic


def test_upgrade_creates_exactly_the_orm_schema(empty_url: str) -> None:
    with Store.open(empty_url, check_schema=False) as store:
        assert store.revision() is None
        assert store.upgrade() == (None, head_revision())
        engine = store.engine
        assert set(inspect(engine).get_table_names()) == TABLES | {"alembic_version"}
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
        assert diff == []


def test_downgrade_to_base_and_up_again(empty_url: str) -> None:
    with Store.open(empty_url, check_schema=False) as store:
        store.upgrade()
        downgrade(store.engine, "base")
        assert set(inspect(store.engine).get_table_names()) == {"alembic_version"}
        assert store.revision() is None
        store.upgrade()
        assert store.revision() == head_revision()


def test_cli_upgrade_then_current(empty_url: str) -> None:
    runner = CliRunner()
    first = runner.invoke(cli(), ["db", "upgrade", "--db", empty_url])
    assert first.exit_code == 0, first.output
    assert f"schema empty -> {head_revision()}" in first.output
    second = runner.invoke(cli(), ["db", "upgrade", "--db", empty_url])
    assert second.exit_code == 0 and f"already at schema revision {head_revision()}" in second.output
    current = runner.invoke(cli(), ["db", "current", "--db", empty_url])
    assert current.exit_code == 0 and "up to date" in current.output


def test_schema_newer_than_this_fleetdx_is_refused(empty_url: str) -> None:
    with Store.open(empty_url, check_schema=False) as store:
        store.upgrade()
    engine = create_engine(empty_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(SchemaOutdated, match="newer than this fleetdx knows"):
        Store.open(empty_url)
    with Store.open(empty_url, check_schema=False) as store, pytest.raises(SchemaOutdated, match="newer"):
        store.upgrade()


def test_a_first_use_waits_for_a_migration_that_holds_the_file_past_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's migration of a new file may hold its write lock longer than one busy_timeout (a
    loaded machine): the first use waits, retries and finds the schema to migrate, it does not fail."""
    import sqlite3
    import threading
    import time

    from fleetdx.orchestrator.store import engine as engine_mod

    monkeypatch.setattr(engine_mod, "SQLITE_BUSY_TIMEOUT_MS", 100)
    db = tmp_path / "locked.db"
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.6, holder.execute, args=("COMMIT",))
    released.start()
    started = time.monotonic()
    try:
        with Store.open(f"sqlite:///{db}") as store:
            assert store.revision() == head_revision()
    finally:
        released.join()
        holder.close()
    assert time.monotonic() - started >= 0.5  # it did wait for the holder


def test_concurrent_first_use_of_one_sqlite_file_migrates_once(sqlite_url: str) -> None:
    import threading

    errors: list[BaseException] = []

    def first_use() -> None:
        try:
            Store.open(sqlite_url).close()
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=first_use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    with Store.open(sqlite_url) as store:
        assert store.revision() == head_revision()
