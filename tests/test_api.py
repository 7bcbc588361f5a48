"""The read-only HTTP API over a store filled with runs read off the fixture files."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.engine import make_engine, parse_url
from fleetdx.orchestrator.store.migrate import head_revision
from tests.store_samples import (
    DOWN_PG_URL,
    NODE_A,
    bandwidth_raw,
    bandwidth_run,
    migrated,
    preflight_raw,
    preflight_run,
)

T0 = 1_763_800_000.0


@pytest.fixture
def client(sqlite_url: str) -> Iterator[TestClient]:
    with Store.open(migrated(sqlite_url)) as store:
        store.save_report(bandwidth_run("bw-healthy", T0, degraded=False), bandwidth_raw(False))
        store.save_report(preflight_run("pf-1", T0 + 60), preflight_raw())
        store.save_report(bandwidth_run("bw-degraded", T0 + 3600, degraded=True), bandwidth_raw(True))
        yield TestClient(create_app(store))


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    return f"sqlite:///{tmp_path}/api.db"


def test_healthz(client: TestClient) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok", "revision": head_revision(), "error": None}


def test_runs_newest_first(client: TestClient) -> None:
    r = client.get("/runs", params={"limit": 2})
    assert r.status_code == 200
    assert [(x["run_id"], x["verdict"], x["finding_count"]) for x in r.json()] == [
        ("bw-degraded", "CRITICAL", 2),
        ("pf-1", "WARNING", 1),
    ]


def test_one_run_is_the_stored_report(client: TestClient) -> None:
    r = client.get("/runs/bw-degraded")
    assert r.status_code == 200
    assert r.json() == bandwidth_run("bw-degraded", T0 + 3600, degraded=True).model_dump(mode="json")
    assert r.json()["curves"][0]["points"][0] == {
        "size": 16777216,
        "time_us": 5036.9,
        "algbw_gbps": 3.33,
        "busbw_gbps": 5.83,
    }


def test_unknown_run_is_404(client: TestClient) -> None:
    r = client.get("/runs/nope")
    assert r.status_code == 404 and "nope" in r.json()["detail"]


def test_node_history(client: TestClient) -> None:
    r = client.get(f"/nodes/{NODE_A}/history")
    assert r.status_code == 200
    body = r.json()
    assert body["host"] == NODE_A
    assert [(e["run_id"], e["verdict"]) for e in body["entries"]] == [
        ("bw-degraded", "CRITICAL"),
        ("bw-healthy", "OK"),
    ]
    assert [f["code"] for f in body["entries"][0]["findings"]] == ["NCCL_BUSBW_LOW"]


def test_findings_filters(client: TestClient) -> None:
    low = client.get("/findings", params={"code": "NCCL_BUSBW_LOW"}).json()
    assert len(low) == 2 and {x["run_id"] for x in low} == {"bw-degraded"}
    warn = client.get("/findings", params={"severity": "warning"}).json()
    assert [(x["run_id"], x["finding"]["subject"]) for x in warn] == [("pf-1", "GPU0")]
    assert client.get("/findings", params={"code": "NO_SUCH_CODE"}).status_code == 422
    assert client.get("/runs", params={"limit": 0}).status_code == 422


def test_unreachable_database_is_503_with_the_reason() -> None:
    store = Store(make_engine(parse_url(DOWN_PG_URL)))  # opened without the reachability check
    client = TestClient(create_app(store))
    health = client.get("/healthz")
    assert health.status_code == 503 and health.json()["status"] == "error"
    assert "Connection refused" in health.json()["error"]
    runs = client.get("/runs")
    assert runs.status_code == 503 and "cannot reach database" in runs.json()["detail"]
    store.close()


def test_api_is_read_only(client: TestClient) -> None:
    assert client.post("/runs", json={}).status_code == 405
    assert client.delete("/runs/pf-1").status_code == 405


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_fleetdx_serve_answers_over_http(sqlite_url: str) -> None:
    """`fleetdx serve` as a real process on a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Store.open(migrated(sqlite_url)) as store:
        store.save_report(preflight_run("pf-1", T0), preflight_raw())
    cmd = [sys.executable, "-m", "fleetdx.orchestrator.cli.main", "serve", "--port", str(port), "--db", sqlite_url]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        body = None
        for _ in range(200):  # up to 40 s for the interpreter and uvicorn to start on a busy machine
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/runs", timeout=2).json()
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.2)
        assert body is not None and [r["run_id"] for r in body] == ["pf-1"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.parametrize(
    "path",
    [
        "/runs/%00",
        "/runs/a%00b",
        "/nodes/%00/history",
        "/nodes/h%0A1/history",
        "/findings?host=%00",
        "/runs/" + "x" * 300,
    ],
)
def test_malformed_path_or_query_is_a_client_error(client: TestClient, path: str) -> None:
    # PostgreSQL rejects NUL in text: this was a 503 (a server error) for a client's mistake
    r = client.get(path)
    assert r.status_code == 422, (path, r.status_code, r.text)


def test_error_bodies_never_carry_the_database_url(client: TestClient, tmp_path: object) -> None:
    r = client.get("/runs/nope")
    assert r.status_code == 404 and "sqlite" not in r.text and "api.db" not in r.text
    store = Store(make_engine(parse_url(DOWN_PG_URL)))
    down = TestClient(create_app(store))
    for path in ("/healthz", "/runs", "/nodes/n1/history"):
        body = down.get(path).text
        assert "postgresql" not in body and "fleetdx@" not in body, body
    store.close()


def test_runs_and_history_filter_by_job(sqlite_url: str) -> None:
    from fleetdx.orchestrator.scheduler.job import job_from_env

    job = job_from_env({"SLURM_JOB_ID": "4711", "SLURM_JOB_NODELIST": "h100-vm-idle"})
    with Store.open(migrated(sqlite_url)) as store:
        store.save_report(preflight_run("pf-job", T0).model_copy(update={"job": job}), preflight_raw())
        store.save_report(preflight_run("pf-other", T0 + 60), preflight_raw())
        client = TestClient(create_app(store))
        runs = client.get("/runs", params={"job": "4711"}).json()
        assert [(r["run_id"], r["job_id"]) for r in runs] == [("pf-job", "4711")]
        assert client.get("/runs/pf-job").json()["job"]["nodes"] == ["h100-vm-idle"]
        hist = client.get("/nodes/h100-vm-idle/history", params={"job": "4711"}).json()
        assert [e["run_id"] for e in hist["entries"]] == ["pf-job"]
        assert client.get("/runs", params={"job": "47\x0011"}).status_code == 422


def test_routes_are_plain_functions_a_test_can_call(sqlite_url: str) -> None:
    """Issue 19, item 6: a route is a module-level function with its dependencies as parameters, callable
    without HTTP (the app only wires them: ``app.state.service``, ``app.state.auth``)."""
    from fastapi import HTTPException

    from fleetdx.orchestrator.service import api
    from fleetdx.orchestrator.service.metrics import RequestMetrics

    with Store.open(migrated(sqlite_url)) as store:
        svc = api.Service(store, cluster=None, scheduler_nodes=None, placement_cache_s=0, requests=RequestMetrics())
        health = api.healthz(svc)
        assert isinstance(health, api.Health) and health.status == "ok"
        assert api.list_runs(svc, limit=5, job=None) == []
        with pytest.raises(HTTPException) as e:
            api.get_run(svc, run_id="no-such-run")
        assert e.value.status_code == 404
        app = create_app(store)
        assert app.state.service.store is store
