"""A run saved into an SQLite file through the standard library's ``sqlite3``: the save of a Slurm prolog's
pre-flight (``fleetdx preflight --db sqlite:///FILE``, and the default database), without importing SQLAlchemy
and the ORM (about 0.3 s of CPU of a 0.4 s pre-flight).

It writes the same rows as :meth:`~fleetdx.orchestrator.store.Store.save_report` (the one writer,
:func:`fleetdx.orchestrator.store.rows.write_runs`, through a ``sqlite3`` sink), with the same connection
settings (:func:`~fleetdx.orchestrator.store.schema.sqlite_pragmas`) and write transaction (``BEGIN
IMMEDIATE``), and only where nothing else is needed: a plain ``sqlite:///PATH`` URL, a file that exists, a
schema at this fleetdx's newest revision. Anything else (a new file, an old schema to migrate, a database
error) is left to the Store, which migrates, retries and says what failed: :func:`save` returns ``None``
and has changed nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fleetdx.orchestrator.store.rows import JSON_COLUMNS, Row, write_runs
from fleetdx.orchestrator.store.schema import HEAD, sqlite_pragmas

if TYPE_CHECKING:
    from fleetdx.orchestrator.notify import Event as NotifyEvent
    from fleetdx.orchestrator.report import RunReport

PREFIX = "sqlite:///"


def sqlite_file(url: str) -> Path | None:
    """The file of a plain ``sqlite:///PATH`` URL (``sqlite:////abs/path`` or a path relative to the working
    directory, as SQLAlchemy reads it); ``None`` for any other URL: another database, a driver name, query
    parameters, %-escapes, an in-memory or ``file:`` URI database."""
    if not url.startswith(PREFIX):
        return None
    rest = url[len(PREFIX) :]
    if not rest or rest == ":memory:" or rest.startswith("file:") or any(c in rest for c in "?#%"):
        return None
    return Path(rest)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _Sqlite3Sink:
    """:class:`~fleetdx.orchestrator.store.rows.Sink` on a ``sqlite3`` connection inside ``BEGIN IMMEDIATE``:
    JSON columns encoded as SQLAlchemy's ``JSON`` type encodes them on SQLite (``json.dumps``, ``None`` as
    ``null``), a bool as 0/1, bytes as a BLOB (``sqlite3``'s own adaptation)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.events: list[NotifyEvent] = []

    @staticmethod
    def _sql(table: str, row: Row) -> str:
        return (
            f"INSERT INTO {_quote(table)} ({', '.join(_quote(c) for c in row)}) "
            f"VALUES ({', '.join(':' + c for c in row)})"
        )

    @staticmethod
    def _encode(table: str, row: Row) -> Row:
        json_columns = JSON_COLUMNS.get(table)
        if not json_columns:
            return row
        return {c: json.dumps(v) if c in json_columns else v for c, v in row.items()}

    def insert(self, table: str, rows: Sequence[Row]) -> None:
        self.conn.executemany(self._sql(table, rows[0]), [self._encode(table, r) for r in rows])

    def insert_ids(self, table: str, rows: Sequence[Row]) -> list[int]:
        sql = self._sql(table, rows[0])
        ids = []
        for row in rows:
            rowid = self.conn.execute(sql, self._encode(table, row)).lastrowid
            assert rowid is not None, f"no rowid for an insert into {table}"
            ids.append(rowid)
        return ids

    def stored_run_ids(self, run_ids: Sequence[str]) -> set[str]:
        marks = ", ".join("?" for _ in run_ids)
        return {r for (r,) in self.conn.execute(f"SELECT run_id FROM runs WHERE run_id IN ({marks})", list(run_ids))}

    def node_states(self, hosts: Sequence[str]) -> dict[str, Row]:
        marks = ", ".join("?" for _ in hosts)
        cur = self.conn.execute(f"SELECT * FROM node_states WHERE host IN ({marks}) ORDER BY host", list(hosts))
        columns = [d[0] for d in cur.description]
        return {row[0]: dict(zip(columns, row, strict=True)) for row in cur}

    def update_node_states(self, rows: Sequence[Row]) -> None:
        sets = ", ".join(f"{_quote(c)} = :{c}" for c in rows[0] if c != "host")
        self.conn.executemany(f"UPDATE node_states SET {sets} WHERE host = :host", list(rows))

    def after_commit(self, events: Sequence[NotifyEvent]) -> None:
        self.events.extend(events)


def save(url: str, report: RunReport, raw: Mapping[str, Mapping[str, str]] | None, flap_window_s: float) -> bool | None:
    """Save ``report`` and its raw outputs into the SQLite file of ``url`` in one transaction: True when
    stored, False when a run with its ``run_id`` is stored already; ``None`` when this path does not apply
    or the database raised (nothing stored; the caller saves through the Store). A node newly quarantined
    sends its webhook event after the commit."""
    path = sqlite_file(url)
    hosts = [n.host for n in report.nodes]
    try:
        if path is None or not path.is_file() or len(set(hosts)) != len(hosts):
            return None
    except OSError:  # the Store says what is wrong with the path
        return None
    try:
        # mode=rw: never create a file here (a new database needs its schema: the Store migrates it)
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=rw", uri=True, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        for pragma in sqlite_pragmas(file=True):
            conn.execute(pragma)
        sink = _Sqlite3Sink(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            # read under the write lock: no migration can run between this check and the commit
            if conn.execute("SELECT version_num FROM alembic_version").fetchall() != [(HEAD,)]:
                conn.execute("ROLLBACK")
                return None
            stored = write_runs(sink, [(report, raw)], flap_window_s)[0]
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    _send(sink.events)
    return stored


def _send(events: Sequence[Any]) -> None:
    if events:
        from fleetdx.orchestrator.notify import notify

        for e in events:
            notify(e)
