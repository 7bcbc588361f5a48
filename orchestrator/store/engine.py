"""Engines for SQLite and PostgreSQL, tuned so that many writers at once lose nothing.

SQLite (one file, many processes): WAL journal (readers never block the writer), ``busy_timeout`` so a
writer waits for the lock instead of failing at once, and write transactions opened with ``BEGIN
IMMEDIATE`` so two writers never both hold a read snapshot and deadlock on the upgrade to a write lock
(SQLite returns SQLITE_BUSY at once in that case, without calling the busy handler:
sqlite.org/lang_transaction.html, sqlite.org/wal.html).
PostgreSQL: ``pool_pre_ping`` and a connect timeout, so an unreachable server fails in seconds instead of
hanging the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

from fleetdx.orchestrator.store.schema import SQLITE_BUSY_TIMEOUT_MS, sqlite_pragmas

__all__ = ["SQLITE_BUSY_TIMEOUT_MS", "WRITE_OPTION", "display_url", "is_sqlite", "make_engine", "parse_url"]
#: libpq connect_timeout (s) for PostgreSQL
PG_CONNECT_TIMEOUT_S = 5
#: execution option that marks a write transaction (BEGIN IMMEDIATE on SQLite)
WRITE_OPTION = "fleetdx_write"


def parse_url(url: str) -> URL:
    """The SQLAlchemy URL of ``url``; a bare ``postgresql://`` selects psycopg 3."""
    u = make_url(url)
    if u.drivername == "postgresql":
        u = u.set(drivername="postgresql+psycopg")
    return u


def display_url(url: URL) -> str:
    """``url`` with its password masked, for messages."""
    return url.render_as_string(hide_password=True)


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def sqlite_path(url: URL) -> Path | None:
    """The file of an SQLite URL, ``None`` for an in-memory database."""
    db = url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


def make_engine(url: URL) -> Engine:
    """An engine for ``url`` (SQLite file: parent directory created; PostgreSQL: psycopg 3)."""
    if is_sqlite(url):
        return _sqlite_engine(url)
    connect_args: dict[str, Any] = {}
    if url.get_backend_name() == "postgresql" and "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


def _sqlite_engine(url: URL) -> Engine:
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # take transaction control away from the sqlite3 module so that BEGIN is ours
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        for pragma in sqlite_pragmas(file=path is not None, busy_timeout_ms=SQLITE_BUSY_TIMEOUT_MS):
            cur.execute(pragma)
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine
