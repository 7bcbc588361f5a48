"""Reaching Ray has a deadline and a clear error: a cluster that is gone fails in seconds, naming the
address (before: `fleetdx bandwidth` printed "Failed to connect to GCS" for over 10 minutes)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdx.orchestrator.cluster import connect as connect_mod
from fleetdx.orchestrator.cluster.connect import RayUnavailable, connect, gcs_of, resolve


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP port that accepts connections and never answers (a wedged GCS)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    conns: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join(2)
    for c in conns:
        c.close()
    srv.close()


def test_resolve_prefers_the_option_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve(None) == ("local", "default") and resolve(None, "auto") == ("auto", "default")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert resolve(None) == ("10.0.0.1:6379", "RAY_ADDRESS")
    assert resolve("h:1") == ("h:1", "--ray-address")


def test_auto_with_no_cluster_recorded_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect_mod, "RAY_CURRENT_CLUSTER", tmp_path / "none")
    with pytest.raises(RayUnavailable, match="no Ray cluster on this machine"):
        gcs_of("auto")


def test_a_stale_cluster_file_fails_in_seconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "ray_current_cluster"
    stale.write_text(f"127.0.0.1:{_closed_port()}")
    monkeypatch.setattr(connect_mod, "RAY_CURRENT_CLUSTER", stale)
    t0 = time.monotonic()
    with pytest.raises(RayUnavailable, match="does not answer"):
        connect("auto")
    assert time.monotonic() - t0 < 10


@pytest.mark.ray
@pytest.mark.timeout(120)
def test_a_gcs_that_never_answers_fails_at_the_deadline(silent_server: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(RayUnavailable, match="within 5 s"):
        connect(silent_server, timeout_s=5)
    assert time.monotonic() - t0 < 30


@pytest.mark.timeout(120)
def test_cli_bandwidth_with_a_dead_address_is_one_line_and_exit_3() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "fleetdx", "bandwidth", "--ray-address", f"127.0.0.1:{_closed_port()}"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert res.returncode == 3, res.stderr
    assert "does not answer" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_preflight_of_this_machine_on_a_private_local_ray(tmp_path: Path) -> None:
    # `--ray-address local`: a local Ray started for the run (the README's first command takes the local path,
    # tests/test_local_preflight.py). Started on a watchdog thread, its GCS died with that thread and the
    # command ended after 60 s in Ray's "Failed to connect to GCS"
    import json
    import os

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["FLEETDX_DB_URL"] = f"sqlite:///{tmp_path}/f.db"
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "fleetdx", "preflight", "--json", "--ray-address", "local"],
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
        cwd=tmp_path,
    )
    doc = json.loads(res.stdout)
    assert res.returncode == doc["exit_code"] and doc["kind"] == "preflight" and not doc["simulated"], res.stderr
    assert len(doc["nodes"]) == 1 and "Failed to connect to GCS" not in res.stderr
    assert time.monotonic() - t0 < 60
