"""Database fixtures for the store tests: a fresh SQLite file or a fresh PostgreSQL database per test.

PostgreSQL comes from ``FLEETDX_TEST_PG_URL`` (``.ci/start-postgres.sh`` starts a throwaway server and prints
it); tests that need it are marked ``postgres`` and skip, saying why, when it is not set. Each test gets its
own database, created from that server and dropped afterwards, so tests never see each other's rows.
Import the fixtures into a test module (``from tests.pgfixtures import db_url, pg_url  # noqa: F401``) or
list this module in ``pytest_plugins``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_URL_ENV = "FLEETDX_TEST_PG_URL"
#: a TCP port where nothing listens (port 1, tcpmux, is never served here): "the database is down"
DOWN_PG_URL = "postgresql+psycopg://fleetdx@127.0.0.1:1/fleetdx?connect_timeout=3"

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def server_url() -> str:
    """The PostgreSQL URL from the environment, or skip the test saying how to get one."""
    url = os.environ.get(PG_URL_ENV, "").strip()
    if not url:
        pytest.skip(f"{PG_URL_ENV} is not set; start a server with `eval \"$(bash .ci/start-postgres.sh)\"`")
    return url


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database on the test server, dropped after the test."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    base = make_url(server_url())
    name = f"fleetdx_t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of an SQLite file (not yet created) in the test's temporary directory."""
    return f"sqlite:///{tmp_path / 'db' / 'fleetdx.db'}"


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database URL, once on SQLite and once on PostgreSQL (the latter marked ``postgres``)."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))
