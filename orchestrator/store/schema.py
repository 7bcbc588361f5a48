"""What the store's SQLite connections and schema revision are, known without importing SQLAlchemy or Alembic:
the connection settings both :mod:`~fleetdx.orchestrator.store.engine` (SQLAlchemy) and
:mod:`~fleetdx.orchestrator.store.direct` (the standard library's ``sqlite3``) apply, and the newest packaged
revision.

SQLite (one file, many processes): WAL journal (readers never block the writer), ``busy_timeout`` so a writer
waits for the lock instead of failing at once, foreign keys enforced; write transactions open with ``BEGIN
IMMEDIATE`` (sqlite.org/lang_transaction.html, sqlite.org/wal.html).
"""

from __future__ import annotations

from pathlib import Path

#: how long a SQLite writer waits for the lock (ms) before "database is locked"
SQLITE_BUSY_TIMEOUT_MS = 30_000

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
#: the newest packaged revision, known without importing Alembic (about 0.15 s of a pre-flight's start), so
#: that a database already at it needs no Alembic at all: revisions are numbered, their files named
#: ``NNNN_what.py`` after them, each revising the one before (tests/test_migrations.py checks all three
#: against Alembic's own reading of the scripts)
HEAD = max(p.name.split("_", 1)[0] for p in (MIGRATIONS_DIR / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))


def sqlite_pragmas(file: bool, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS) -> list[str]:
    """The statements every SQLite connection of fleetdx runs first (``file``: an SQLite file, not an
    in-memory database, which has no WAL; ``busy_timeout_ms``: how long a writer waits for the lock)."""
    pragmas = [f"PRAGMA busy_timeout = {int(busy_timeout_ms)}"]
    if file:
        # durable at each checkpoint; safe with WAL
        pragmas += ["PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL"]
    return [*pragmas, "PRAGMA foreign_keys = ON"]
