"""A pair finding of a bandwidth run (a hung pair: one finding about two hosts) saved to the store is in the
history of BOTH hosts: through `fleetdx history HOST` (the real command line) and through the HTTP API, on
SQLite and on PostgreSQL (``postgres`` marker)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import RunKind, RunReport, Schedule, assemble_report
from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import NodeHistory, Store
from fleetdx.probes.contracts import Severity, Verdict

pytest_plugins = ["tests.pgfixtures"]

T0 = 1_763_800_000.0


def hung_pair_report() -> RunReport:
    """``fleetdx bandwidth`` over a, b, c (schedule localise) where the pair a,b hung."""
    hang = Finding(
        code=FindingCode.NCCL_TEST_HANG,
        severity=Severity.CRITICAL,
        nodes=["a", "b"],
        subject="a,b",
        message="a,b: all_reduce did not finish (no result after 120 s)",
        details={"round": 0, "collective": "all_reduce", "nodes": ["a", "b"], "error": "timeout"},
    )
    return assemble_report(
        RunKind.BANDWIDTH, ["a", "b", "c"], [hang], started_at=T0, schedule=Schedule.LOCALISE, run_id="bw-hang"
    )


def fleetdx(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "fleetdx", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def saved(store: Store) -> Store:
    report = hung_pair_report()
    assert report.nodes[0].verdict is Verdict.CRITICAL and report.exclude == ""  # a pair is not condemned
    assert store.save_report(report) is True
    assert store.get_run("bw-hang") == report
    return store


def test_fleetdx_history_of_each_host_of_the_pair_shows_the_hang(saved: Store, migrated_url: str) -> None:
    for host in ("a", "b"):
        result = fleetdx("history", host, "--db", migrated_url, "--json")
        assert result.returncode == 0, result.stderr
        history = NodeHistory.model_validate_json(result.stdout)
        assert history.host == host
        (entry,) = history.entries
        assert (entry.run_id, entry.verdict, entry.schedule, entry.level) == (
            "bw-hang",
            Verdict.CRITICAL,
            Schedule.LOCALISE,
            None,
        )
        assert [(f.code, f.nodes, f.subject) for f in entry.findings] == [
            (FindingCode.NCCL_TEST_HANG, ["a", "b"], "a,b")
        ]
        table = fleetdx("history", host, "--db", migrated_url)
        assert table.returncode == 0, table.stderr
        assert "critical NCCL_TEST_HANG a,b: a,b: all_reduce did not finish" in table.stdout
        assert "bandwidth (localise)" in table.stdout
    other = NodeHistory.model_validate_json(fleetdx("history", "c", "--db", migrated_url, "--json").stdout)
    assert [(e.run_id, e.verdict, e.findings) for e in other.entries] == [("bw-hang", Verdict.OK, [])]


def test_http_api_shows_the_hang_for_each_host_of_the_pair(saved: Store) -> None:
    client = TestClient(create_app(saved))
    for host in ("a", "b"):
        r = client.get(f"/nodes/{host}/history")
        assert r.status_code == 200
        (entry,) = r.json()["entries"]
        assert entry["schedule"] == "localise" and entry["level"] is None and entry["verdict"] == "CRITICAL"
        assert [(f["code"], f["nodes"]) for f in entry["findings"]] == [("NCCL_TEST_HANG", ["a", "b"])]
        found = client.get("/findings", params={"host": host}).json()
        assert [(x["run_id"], x["finding"]["code"], x["finding"]["nodes"]) for x in found] == [
            ("bw-hang", "NCCL_TEST_HANG", ["a", "b"])
        ]
    assert client.get("/findings", params={"host": "c"}).json() == []
    run = client.get("/runs/bw-hang").json()
    assert run == hung_pair_report().model_dump(mode="json") | {"finished_at": run["finished_at"]}
    assert run["findings"][0]["nodes"] == ["a", "b"] and "node" not in run["findings"][0]
