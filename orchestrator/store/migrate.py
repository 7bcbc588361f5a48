"""Alembic, driven from code: the migration scripts ship inside the package (``migrations/``), so
``fleetdx db upgrade`` works from an installed wheel without an alembic.ini.

On SQLite a migration runs with foreign keys off and checks them before it commits, as SQLite's own
procedure for schema changes says (sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema
Changes"): Alembic's batch mode copies a table, drops the original and renames the copy, and with foreign
keys on, dropping the original would first delete every row that references it (``ON DELETE CASCADE``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text

from fleetdx.orchestrator.store.errors import StoreError
from fleetdx.orchestrator.store.schema import HEAD, MIGRATIONS_DIR

__all__ = ["HEAD", "MIGRATIONS_DIR", "current_revision", "downgrade", "head_revision", "known_revisions", "upgrade"]

if TYPE_CHECKING:
    from alembic.config import Config


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic ``Config`` whose ``script_location`` is the packaged ``migrations/`` directory."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The newest revision this fleetdx knows (e.g. ``"0001"``), as Alembic reads the packaged scripts."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the packaged migrations have no head revision"
    return head


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def current_revision(engine: Engine) -> str | None:
    """The revision stamped in the database, ``None`` for a database fleetdx never migrated. Read from
    Alembic's ``alembic_version`` table directly (one row, ``version_num``, for an unbranched history)."""
    with engine.connect() as conn:
        return _revision(conn)


def _revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(rows) > 1:
        raise StoreError(f"the database is stamped with several schema revisions {sorted(rows)}; fleetdx has one")
    return str(rows[0]) if rows else None


#: the PostgreSQL advisory lock key that serialises fleetdx's migrations of one database (any fixed 64-bit
#: number no other application uses: the ASCII of "fleetdx" here)
MIGRATION_LOCK_KEY = int.from_bytes(b"fleetdx", "big")


def upgrade(engine: Engine, revision: str = "head") -> str | None:
    """Migrate the database up to ``revision`` in one transaction (PostgreSQL DDL is transactional); returns
    the revision it found, read once no other migration runs.

    On PostgreSQL the transaction first takes a transaction-level advisory lock (``pg_advisory_xact_lock``,
    PostgreSQL's "Advisory Locks"), so upgrades started at once (two pods' initContainers, two hosts' service
    units) run one after the other: the later one finds the schema current and does nothing, where both
    would otherwise create the same tables and one fail on a duplicate key."""
    from alembic import command

    with _migrating(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        found = _revision(conn)
        command.upgrade(alembic_config(conn), revision)
    return found


def downgrade(engine: Engine, revision: str) -> None:
    """Migrate the database down to ``revision`` (``"base"`` drops every fleetdx table)."""
    from alembic import command

    with _migrating(engine) as conn:
        command.downgrade(alembic_config(conn), revision)


@contextmanager
def _migrating(engine: Engine) -> Iterator[Connection]:
    """A connection inside one transaction, committed when the block ends without error. On SQLite, foreign
    keys are off for the block and ``PRAGMA foreign_key_check`` must find nothing before the commit
    (:class:`StoreError` otherwise, and nothing is committed)."""
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            _sqlite_foreign_keys(conn, on=False)  # outside any transaction: SQLite ignores it inside one
        try:
            with conn.begin():
                yield conn
                if sqlite:
                    broken = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
                    if broken:
                        raise StoreError(f"migration left rows whose foreign key points nowhere: {broken[:5]}")
        finally:
            if sqlite:
                _sqlite_foreign_keys(conn, on=True)


def _sqlite_foreign_keys(conn: Connection, on: bool) -> None:
    """Set ``PRAGMA foreign_keys`` on the DBAPI connection itself (autocommit mode, see ``engine.py``), so
    that SQLAlchemy does not open a transaction first."""
    dbapi = conn.connection.driver_connection
    assert dbapi is not None
    dbapi.execute(f"PRAGMA foreign_keys = {'ON' if on else 'OFF'}")
