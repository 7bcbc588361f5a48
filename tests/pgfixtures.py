"""Database fixtures for the store tests: SQLite files and PostgreSQL databases, fresh for every test.

PostgreSQL comes from ``FLEETDX_TEST_PG_URL`` (``.ci/start-postgres.sh`` starts a throwaway server and prints
it); tests that need it are marked ``postgres`` and skip, saying why, when it is not set.

- ``sqlite_url`` / ``pg_url``: an empty database (no schema), for migration and schema tests.
- ``migrated_url``: a migrated, empty database, once on SQLite and once on PostgreSQL. On PostgreSQL it is
  one database per test session, truncated before each test (creating and migrating a database per test
  costs about 0.6 s here).
- ``store``: an open :class:`~fleetdx.orchestrator.store.Store` on ``migrated_url``.

Test modules list this module in ``pytest_plugins``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.store_samples import migrated

if TYPE_CHECKING:
    from fleetdx.orchestrator.store import Store

PG_URL_ENV = "FLEETDX_TEST_PG_URL"

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def pg_server_url() -> str:
    """The PostgreSQL URL from the environment, or skip the test saying how to get one."""
    url = os.environ.get(PG_URL_ENV, "").strip()
    if not url:
        pytest.skip(f'{PG_URL_ENV} is not set; start a server with `eval "$(bash .ci/start-postgres.sh)"`')
    return url


def _create_database() -> tuple[str, str]:
    """Create an empty database on the test server; returns (its name, its URL)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    base = make_url(pg_server_url())
    name = f"fleetdx_t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return name, base.set(database=name).render_as_string(hide_password=False)


def _drop_database(name: str) -> None:
    from sqlalchemy import create_engine, text

    admin = create_engine(pg_server_url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database on the test server, dropped after the test."""
    name, url = _create_database()
    yield url
    _drop_database(name)


@pytest.fixture(scope="session")
def _pg_session_db() -> Iterator[str]:
    name, url = _create_database()
    yield migrated(url)
    _drop_database(name)


def _truncate(url: str) -> None:
    from sqlalchemy import create_engine, text

    from fleetdx.orchestrator.store.models import Base

    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    finally:
        engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of an SQLite file (not yet created) in the test's temporary directory."""
    return f"sqlite:///{tmp_path / 'db' / 'fleetdx.db'}"


@pytest.fixture(params=BACKENDS)
def migrated_url(request: pytest.FixtureRequest) -> str:
    """A migrated database without rows, once on SQLite and once on PostgreSQL (marked ``postgres``)."""
    if request.param == "sqlite":
        return migrated(request.getfixturevalue("sqlite_url"))
    url = str(request.getfixturevalue("_pg_session_db"))
    _truncate(url)
    return url


@pytest.fixture
def store(migrated_url: str) -> Iterator[Store]:
    """An open store on a migrated database without rows (SQLite and PostgreSQL); closed after the test."""
    from fleetdx.orchestrator.store import Store

    s = Store.open(migrated_url)
    yield s
    s.close()


@pytest.fixture(scope="session")
def process_pool_context() -> object:
    """A multiprocessing context whose workers start fast and safely: a forkserver that imported the store
    once (fork from a pytest process that may hold Ray or torch threads is unsafe; spawn re-imports all)."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tests.store_samples", "fleetdx.orchestrator.store"])
    return ctx
