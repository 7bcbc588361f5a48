"""Where the store lives when nobody says: the database URL and the spool directory.

Resolution order for the database: an explicit URL (``--db``), then ``FLEETDX_DB_URL``, then an SQLite file
``fleetdx.db`` under ``platformdirs.user_data_dir("fleetdx")`` (e.g. ``~/.local/share/fleetdx`` on Linux).
Spool files go to ``FLEETDX_SPOOL_DIR``, else ``<user data dir>/spool``. The flap window of node states is
``FLEETDX_FLAP_WINDOW_S`` (seconds), else 24 h. Only these functions read the
environment; everything else receives the resolved values.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import platformdirs

DB_URL_ENV = "FLEETDX_DB_URL"
SPOOL_DIR_ENV = "FLEETDX_SPOOL_DIR"
#: the flap window of node states, seconds (:mod:`fleetdx.orchestrator.diagnosis.node_states`)
FLAP_WINDOW_ENV = "FLEETDX_FLAP_WINDOW_S"
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


def sqlite_file(url: str) -> Path | None:
    """The file an SQLite URL names (``sqlite:///relative.db``, ``sqlite:////abs/path.db``, any
    ``sqlite+DRIVER``), read without SQLAlchemy so that a caller can tell a store that was never made before
    paying for the ORM's import; ``None`` for another database or an in-memory or ``file:`` URI one."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0] != "sqlite" or not rest.startswith("/"):
        return None
    db = rest[1:].partition("?")[0]
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


def resolve_spool_dir(spool_dir: Path | str | None, env: Mapping[str, str] | None = None) -> Path:
    """``spool_dir`` if given, else ``$FLEETDX_SPOOL_DIR``, else ``<user data dir>/spool`` (not created)."""
    if spool_dir is not None:
        return Path(spool_dir)
    env = os.environ if env is None else env
    from_env = env.get(SPOOL_DIR_ENV, "").strip()
    if from_env:
        return Path(from_env)
    return user_data_dir() / "spool"


def resolve_flap_window_s(value: float | None, env: Mapping[str, str] | None = None) -> float:
    """``value`` if given, else ``$FLEETDX_FLAP_WINDOW_S`` (seconds, a finite number >= 0), else 24 h
    (:data:`~fleetdx.orchestrator.diagnosis.node_states.DEFAULT_FLAP_WINDOW_S`).

    Raises:
        ValueError: the variable is not a finite number >= 0 (its text is named).
    """
    from fleetdx.orchestrator.diagnosis.node_states import DEFAULT_FLAP_WINDOW_S

    if value is not None:
        return value
    env = os.environ if env is None else env
    text = env.get(FLAP_WINDOW_ENV, "").strip()
    if not text:
        return DEFAULT_FLAP_WINDOW_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{FLAP_WINDOW_ENV}={text!r}: not a number of seconds >= 0")
    return seconds
