"""Where the store lives when nobody says: the database URL and the spool directory.

Resolution order for the database: an explicit URL (``--db``), then ``FLEETDX_DB_URL``, then an SQLite file
``fleetdx.db`` under ``platformdirs.user_data_dir("fleetdx")`` (e.g. ``~/.local/share/fleetdx`` on Linux).
Spool files go to ``FLEETDX_SPOOL_DIR``, else ``<user data dir>/spool``. Only these functions read the
environment; everything else receives the resolved values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs

DB_URL_ENV = "FLEETDX_DB_URL"
SPOOL_DIR_ENV = "FLEETDX_SPOOL_DIR"
APP_NAME = "fleetdx"


def user_data_dir() -> Path:
    """The per-user data directory of fleetdx (not created here)."""
    return Path(platformdirs.user_data_dir(APP_NAME))


def resolve_db_url(url: str | None, env: Mapping[str, str] | None = None) -> str:
    """``url`` if given, else ``$FLEETDX_DB_URL``, else ``sqlite:///<user data dir>/fleetdx.db``."""
    if url:
        return url
    env = os.environ if env is None else env
    from_env = env.get(DB_URL_ENV, "").strip()
    if from_env:
        return from_env
    return f"sqlite:///{user_data_dir() / 'fleetdx.db'}"


def resolve_spool_dir(spool_dir: Path | str | None, env: Mapping[str, str] | None = None) -> Path:
    """``spool_dir`` if given, else ``$FLEETDX_SPOOL_DIR``, else ``<user data dir>/spool`` (not created)."""
    if spool_dir is not None:
        return Path(spool_dir)
    env = os.environ if env is None else env
    from_env = env.get(SPOOL_DIR_ENV, "").strip()
    if from_env:
        return Path(from_env)
    return user_data_dir() / "spool"
