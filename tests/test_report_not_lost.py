"""A report is never silently lost, and simulated runs stay out of node history unless asked for.

Before: ``FLEETDX_SPOOL_DIR=/proc/nospool fleetdx preflight ... --db sqlite:////proc/x.db`` printed "report
neither saved nor spooled" and exited 0; simulated runs went into the default database and ``fleetdx history``
did not mark them.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fleetdx.orchestrator.cli.common import EXIT_NOT_STORED, exit_code_after_save

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"


@pytest.mark.parametrize(
    ("verdict", "stored", "expected"),
    [
        (0, True, 0),
        (1, True, 1),
        (0, False, EXIT_NOT_STORED),
        (1, False, EXIT_NOT_STORED),
        (2, False, 2),
        (3, False, 3),
    ],
)
def test_exit_code_after_save(verdict: int, stored: bool, expected: int) -> None:
    assert exit_code_after_save(verdict, stored) == expected


def _fleetdx(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetdx", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **env},
    )


@pytest.fixture(scope="module")
def idle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("b") / "idle01"
    shutil.copytree(BUNDLES / "h100-idle", d)
    return d


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_ok_run_whose_report_cannot_be_kept_exits_4_and_prints_it(idle: Path) -> None:
    res = _fleetdx(
        "preflight",
        "--simulate",
        str(idle),
        "--json",
        "--db",
        "sqlite:////proc/fleetdx-nope/x.db",
        env={"FLEETDX_SPOOL_DIR": "/proc/fleetdx-nospool"},
    )
    assert res.returncode == EXIT_NOT_STORED, res.stderr
    assert json.loads(res.stdout)["verdict"] == "OK"  # the report itself, on stdout
    assert "neither saved nor spooled" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_simulated_runs_are_stored_only_when_a_database_is_named_and_history_marks_them(
    idle: Path, tmp_path: Path
) -> None:
    default_db = tmp_path / "default.db"
    env = {"FLEETDX_DB_URL": f"sqlite:///{default_db}", "FLEETDX_SPOOL_DIR": str(tmp_path / "spool")}
    res = _fleetdx("preflight", "--simulate", str(idle), "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert not default_db.exists() and not (tmp_path / "spool").exists()
    named = tmp_path / "named.db"
    res = _fleetdx("preflight", "--simulate", str(idle), "--json", "--db", f"sqlite:///{named}", env=env)
    assert res.returncode == 0 and f"report saved to sqlite:///{named}" in res.stderr, res.stderr
    with sqlite3.connect(named) as db:
        assert db.execute("select count(*) from runs where simulated").fetchone() == (1,)
    hist = _fleetdx("history", "idle01", "--db", f"sqlite:///{named}", env={"COLUMNS": "200"})
    assert hist.returncode == 0 and "SIMULATED" in hist.stdout, hist.stdout
    js = json.loads(_fleetdx("history", "idle01", "--db", f"sqlite:///{named}", "--json", env={}).stdout)
    assert js["entries"][0]["simulated"] is True
