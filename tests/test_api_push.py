"""Pushing reports to a live ``fleetdx serve`` (uvicorn on 127.0.0.1): stored when the service takes it, spooled
locally when it is down or refuses (a refused report is not lost either), and ``fleetdx preflight --report-to
URL --token-file F`` end to end."""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import preflight_cmd
from fleetdx.orchestrator.service.client import push_or_spool
from fleetdx.orchestrator.store import Store, read_spool
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from tests.store_samples import migrated, preflight_raw, preflight_run

T0 = 1_763_800_000.0
BUNDLES = Path(__file__).parent / "fixtures" / "bundles"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Service:
    def __init__(self, url: str, db: str, write: str, read: str) -> None:
        self.url, self.db, self.write, self.read = url, db, write, read


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`fleetdx serve` as a real process on a free loopback port, over an SQLite file with two tokens."""
    db = f"sqlite:///{tmp_path_factory.mktemp('svc') / 'central.db'}"
    with Store.open(migrated(db)) as store:
        write = create_token(store, "prolog", TokenScope.WRITE).token
        read = create_token(store, "dashboard", TokenScope.READ).token
    port = free_port()
    cmd = [sys.executable, "-m", "fleetdx", "serve", "--port", str(port), "--db", db]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):  # up to 40 s for the interpreter and uvicorn to start on a busy machine
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.2)
        yield Service(url, db, write, read)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_push_stores_the_report_and_a_retry_is_not_a_duplicate(service: Service, tmp_path: Path) -> None:
    report = preflight_run("push-1", T0)
    first = push_or_spool(service.url, service.write, report, preflight_raw(), spool_dir=tmp_path)
    assert first.saved and first.message == f"report saved to {service.url}/reports"
    again = push_or_spool(service.url + "/", service.write, report, preflight_raw(), spool_dir=tmp_path)
    assert again.saved and list(tmp_path.iterdir()) == []
    with Store.open(service.db) as store:
        assert store.get_run("push-1") == report
        assert store.get_raw("push-1", "h100-vm-idle") == preflight_raw()["h100-vm-idle"]
        assert [r.run_id for r in store.list_runs()].count("push-1") == 1


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_refused_push_is_spooled_with_the_reason(service: Service, tmp_path: Path) -> None:
    report = preflight_run("push-refused", T0)
    out = push_or_spool(service.url, service.read, report, preflight_raw(), spool_dir=tmp_path)
    assert not out.saved and out.spool_path is not None and out.stored
    assert "answered 403" in (out.error or "") and "this needs write" in (out.error or "")
    spooled = read_spool(out.spool_path)
    assert spooled.report == report and spooled.raw == preflight_raw()


def test_service_down_spools_locally(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    report = preflight_run("push-down", T0)
    out = push_or_spool(url, "fdx_0123456789ab_" + "A" * 43, report, preflight_raw(), spool_dir=tmp_path)
    assert not out.saved and out.spool_path is not None
    assert f"cannot reach {url}/reports" in (out.error or "")
    assert f"fleetdx db import {out.spool_path}" in out.message
    assert read_spool(out.spool_path).report == report


def cli() -> typer.Typer:
    app = typer.Typer()
    preflight_cmd.register(app)
    return app


@pytest.mark.parametrize(
    "args,message",
    [
        (["--report-to", "http://x"], "--report-to needs --token-file"),
        (["--token-file", "t"], "--token-file goes with --report-to"),
        (["--report-to", "ftp://x", "--token-file", "t"], "not an http:// or https:// URL"),
        (["--report-to", "http://x", "--token-file", "t", "--db", "sqlite://"], "excludes --db and --no-save"),
        (["--report-to", "http://x", "--token-file", "/nonexistent/token"], "/nonexistent/token: no such file"),
    ],
)
def test_report_to_usage_errors_come_before_the_run(args: list[str], message: str) -> None:
    res = CliRunner().invoke(cli(), ["preflight", "--nodes", "gpu01", *args])
    assert res.exit_code == 3 and message in res.stderr, res.output


def test_an_empty_token_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "token"
    empty.write_text("\n")
    res = CliRunner().invoke(cli(), ["preflight", "--report-to", "http://x", "--token-file", str(empty)])
    assert res.exit_code == 3 and "empty" in res.stderr


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_preflight_report_to_pushes_to_the_live_service(service: Service, tmp_path: Path) -> None:
    """A simulated pre-flight (the idle H100 bundle) pushed with --report-to lands in the central database."""
    bundle = tmp_path / "idle01"
    shutil.copytree(BUNDLES / "h100-idle", bundle)
    token_file = tmp_path / "token"
    token_file.write_text(service.write + "\n")
    env = {**os.environ, "FLEETDX_SPOOL_DIR": str(tmp_path / "spool")}
    args = ["preflight", "--simulate", str(bundle), "--json", "--report-to", service.url, "--token-file"]
    res = subprocess.run(
        [sys.executable, "-m", "fleetdx", *args, str(token_file)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    run_id = json.loads(res.stdout)["run_id"]
    assert f"report saved to {service.url}/reports" in res.stderr
    assert not (tmp_path / "spool").exists()
    with Store.open(service.db) as store:
        stored = store.get_run(run_id)
        assert stored.simulated and [n.host for n in stored.nodes] == ["idle01"]
        assert store.get_raw(run_id, "idle01")  # the bundle's raw outputs went along


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_two_workers_share_the_database_and_sum_their_latency_histograms(tmp_path: Path) -> None:
    """`fleetdx serve --workers 2`: both workers answer from one database, and /metrics (answered by either
    worker) counts every request of both, through prometheus-client's multiprocess mode."""
    db = f"sqlite:///{tmp_path / 'two.db'}"
    with Store.open(migrated(db)) as store:
        store.save_report(preflight_run("pf-1", T0), preflight_raw())
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    cmd = [sys.executable, "-m", "fleetdx", "serve", "--port", str(port), "--db", db, "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(f"{url}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.2)
        for _ in range(30):  # new connections: the kernel spreads them over both workers
            assert [r["run_id"] for r in httpx.get(f"{url}/runs", timeout=10).json()] == ["pf-1"]
        from prometheus_client.parser import text_string_to_metric_families

        for _ in range(4):
            text = httpx.get(f"{url}/metrics", timeout=10).text
            fams = {f.name: f for f in text_string_to_metric_families(text)}
            count = [
                s.value
                for s in fams["fleetdx_http_request_duration_seconds"].samples
                if s.name.endswith("_count") and s.labels["route"] == "/runs"
            ]
            assert count == [30.0]
            assert {s.labels["node"] for s in fams["fleetdx_node_verdict"].samples} == {"h100-vm-idle"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_tls_with_uvicorn_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleetdx serve --ssl-certfile/--ssl-keyfile` serves HTTPS: a push verified against the certificate
    (SSL_CERT_FILE) is stored; without it the certificate is refused and the report is spooled, not lost."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    db = f"sqlite:///{tmp_path / 'tls.db'}"
    with Store.open(migrated(db)) as store:
        token = create_token(store, "prolog", TokenScope.WRITE).token
    port = free_port()
    cmd = [sys.executable, "-m", "fleetdx", "serve", "--port", str(port), "--db", db]
    proc = subprocess.Popen(
        [*cmd, "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"https://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(f"{url}/healthz", timeout=2, verify=ssl.create_default_context(cafile=str(cert)))
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.2)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        refused = push_or_spool(url, token, preflight_run("tls-1", T0), spool_dir=tmp_path / "spool")
        assert not refused.saved and refused.spool_path is not None
        assert "CERTIFICATE_VERIFY_FAILED" in (refused.error or ""), refused.error
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        stored = push_or_spool(url, token, preflight_run("tls-2", T0), spool_dir=tmp_path / "spool")
        assert stored.saved, stored.error
        with Store.open(db) as store:
            assert [r.run_id for r in store.list_runs()] == ["tls-2"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
