"""Running jobs' live state (issue 24 item 3): ``POST /live`` keeps a job's newest state, the fleet and job pages
show it, a job first seen hung fires the webhooks; and ``fleetdx watch --report-to`` end to end against a real
``fleetdx serve`` process, the StepTimer logs written by the real StepTimer (the steps are empty: no training)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from fleetdx.orchestrator.notify import Event
from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.records import LiveJobRecord
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from tests.store_samples import migrated

pytest_plugins = ["tests.pgfixtures"]

HANG = {
    "code": "STEP_HANG",
    "severity": "critical",
    "scope": "job",
    "subject": "job",
    "message": "no rank completed a step for 61 s; ranks 3 stopped first",
    "nodes": ["gpu-03"],
}


class Captured:
    """A notifier that keeps what it is given (the service's webhooks are tested in tests/test_notify.py)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def notify(self, event: Event) -> bool:
        self.events.append(event)
        return True


def _state(job: str, at: float, state: str = "running", **more: Any) -> dict[str, Any]:
    return {
        "job_id": job,
        "watcher_host": "login-01",
        "started_at": at - 60,
        "updated_at": at,
        "state": state,
        "ranks": 4,
        "last_step": 120,
        "step_median_ms": 101.5,
        "verdict": "OK",
        "findings": [],
        **more,
    }


@pytest.fixture
def served(store: Store) -> Iterator[tuple[TestClient, dict[str, str], dict[str, str], Captured]]:
    write = create_token(store, "watcher", TokenScope.WRITE).token
    read = create_token(store, "dashboard", TokenScope.READ).token
    captured = Captured()
    client = TestClient(create_app(store, notifier=captured))  # type: ignore[arg-type]
    yield client, {"Authorization": f"Bearer {write}"}, {"Authorization": f"Bearer {read}"}, captured


def test_a_pushed_state_is_on_the_fleet_and_job_pages(served, store: Store) -> None:  # type: ignore[no-untyped-def]
    c, write, read, captured = served
    now = time.time()
    assert c.post("/live", json=_state("4242", now), headers=write).json() == {"job_id": "4242"}
    assert c.post("/live", json=_state("4242", now - 30, last_step=7), headers=write).status_code == 200  # older
    (kept,) = store.list_live_jobs(since=now - 10)
    assert kept.last_step == 120  # an older push changes nothing
    listed = c.get("/live", headers=read).json()
    assert [j["job_id"] for j in listed] == ["4242"]
    page = c.get("/").text
    assert 'id="live"' in page and "jobs/4242" in page and "101.5" in page
    job = c.get("/jobs/4242").text
    assert "running" in job and "4 ranks, step 120" in job
    assert captured.events == []


def test_a_hung_job_fires_the_webhooks_once(served) -> None:  # type: ignore[no-untyped-def]
    c, write, _, captured = served
    now = time.time()
    hung = _state("77", now, "hung", verdict="CRITICAL", findings=[HANG])
    assert c.post("/live", json=hung, headers=write).status_code == 200
    assert c.post("/live", json={**hung, "updated_at": now + 10}, headers=write).status_code == 200
    (event,) = captured.events
    assert event.kind.value == "job.hang" and event.job_id == "77" and event.hosts == ["gpu-03"]
    assert "ranks 3 stopped first" in event.summary


def test_bad_pushes_are_refused(served) -> None:  # type: ignore[no-untyped-def]
    c, write, read, _ = served
    assert c.post("/live", json=_state("1", time.time()), headers=read).status_code == 403
    assert c.post("/live", json=_state("1", time.time())).status_code == 401
    bad = c.post("/live", json=_state("1", time.time(), state="sleeping"), headers=write)
    assert bad.status_code == 422 and "not a live job state: state" in bad.json()["detail"]
    assert c.post("/live", content=b"{", headers={**write, "Content-Type": "application/json"}).status_code == 422


def test_old_live_states_are_pruned(store: Store) -> None:
    from fleetdx.orchestrator.store.retention import prune_store

    store.save_live_job(LiveJobRecord.model_validate(_state("old", 1000.0)))
    store.save_live_job(LiveJobRecord.model_validate(_state("new", time.time())))
    result = prune_store(store, cutoff=time.time() - 3600)
    assert result.rows["live_jobs"] == 1
    assert [j.job_id for j in store.list_live_jobs()] == ["new"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_watch_report_to_pushes_the_state_to_a_real_service(tmp_path: Path) -> None:
    from fleetdx.steps import StepTimer

    db = migrated(f"sqlite:///{tmp_path / 'central.db'}")
    with Store.open(db) as s:
        token = create_token(s, "watcher", TokenScope.WRITE).token
    (tmp_path / "token").write_text(token + "\n")
    steps = tmp_path / "steps"
    for r in range(2):
        with StepTimer(steps, rank=r, world_size=2, host=f"gpu-0{r}", sync="none", dump_on_request=False) as t:
            for n in range(30):
                with t.step(n), t.stage("forward"):
                    pass
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "fleetdx", "serve", "--port", str(port), "--db", db],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(200):  # up to 40 s for uvicorn to start on a busy machine
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        watch = [sys.executable, "-m", "fleetdx", "watch", str(steps), "--json", "--max-s", "3"]
        watch += ["--report-to", url, "--token-file", str(tmp_path / "token"), "--job", "991"]
        done = subprocess.run(watch, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        (live,) = httpx.get(f"{url}/live", timeout=10).json()
        assert live["job_id"] == "991" and live["ranks"] == 2 and live["last_step"] == 29
        assert live["state"] == "ended"  # both StepTimers were closed
        bad = subprocess.run([*watch[:-4], "--report-to", url], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 3 and "--token-file" in bad.stderr
    finally:
        server.terminate()
        server.wait(30)
