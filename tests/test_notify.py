"""Webhook notifications against real local HTTP servers: one that fails twice then takes the event, one that
never answers, one that refuses; the service sends a CRITICAL pushed pre-flight without waiting for them, and
no log line holds a webhook's secret."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.judgement.findings import Finding
from fleetdx.orchestrator.notify import (
    Event,
    EventKind,
    Notifier,
    Retry,
    Webhook,
    WebhookFormat,
    body,
    parse_webhooks,
    redact,
)
from fleetdx.orchestrator.report import NodeReport, RunKind, RunReport
from fleetdx.orchestrator.service.alerts import preflight_critical
from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from fleetdx.probes.contracts import Severity, Verdict
from tests.store_samples import migrated, preflight_run

#: quick retries for tests: the waits are 10-20 ms
FAST = Retry(attempts=5, backoff_s=0.01, max_backoff_s=0.05, timeout_s=5.0)
#: the secrets a webhook URL may carry: user info, a path token (Slack's), a query token
SECRET_URL_PARTS = ("hunter2", "T0SECRET/B0SECRET/XyZsecretPath", "sig=querysecret")


@dataclass
class Hook:
    """A local webhook receiver: answers ``statuses`` in turn (then 200), records each body."""

    statuses: list[int]
    bodies: list[Any] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook(statuses=[])
    h.release.set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802  (http.server's name)
            data = self.rfile.read(int(self.headers["Content-Length"]))
            h.release.wait(60)
            h.bodies.append(json.loads(data))
            status = h.statuses.pop(0) if h.statuses else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    h.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=h.server.serve_forever, daemon=True)
    thread.start()
    yield h
    h.release.set()
    h.server.shutdown()
    h.server.server_close()


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A TCP port that takes connections (the kernel's backlog) and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/never"
    sock.close()


def critical_report(run_id: str = "pf-crit-1", host: str = "gpu07") -> RunReport:
    return RunReport(
        run_id=run_id,
        kind=RunKind.PREFLIGHT,
        started_at=1_795_752_731.0,
        finished_at=1_795_752_733.0,
        level="quick",
        verdict=Verdict.CRITICAL,
        exit_code=2,
        nodes=[NodeReport(host=host, verdict=Verdict.CRITICAL), NodeReport(host="gpu08", verdict=Verdict.OK)],
        findings=[
            Finding(
                code=FindingCode.GPU_COUNT_MISMATCH,
                severity=Severity.CRITICAL,
                nodes=[host],
                message="7 GPUs visible, 8 expected",
            )
        ],
    )


def event() -> Event:
    e = preflight_critical(critical_report())
    assert e is not None
    return e


def test_retried_with_backoff_until_the_webhook_takes_it(hook: Hook) -> None:
    hook.statuses = [500, 503]
    waits: list[float] = []
    n = Notifier([Webhook(hook.url)], retry=FAST, sleep=waits.append)
    assert n.notify(event()) is True
    assert n.close(timeout_s=60) is True
    assert len(hook.bodies) == 3 and n.sent == 1 and n.failed == 0
    assert len(waits) == 2 and waits[1] > waits[0]  # doubling, jitter at most +-20%
    sent = hook.bodies[-1]
    assert Event.model_validate(sent).model_dump(exclude={"time"}) == event().model_dump(exclude={"time"})
    assert (
        sent["kind"] == "preflight.critical" and sent["hosts"] == ["gpu07"] and sent["codes"] == ["GPU_COUNT_MISMATCH"]
    )
    assert "GPU_COUNT_MISMATCH on gpu07 (7 GPUs visible, 8 expected)" in sent["summary"]


def test_slack_body_is_text_only(hook: Hook) -> None:
    n = Notifier([Webhook(hook.url, WebhookFormat.SLACK)], retry=FAST)
    n.notify(
        Event(kind=EventKind.NODE_QUARANTINED, summary="gpu07 drained: <XID 79> & fell off the bus", hosts=["gpu07"])
    )
    assert n.close(timeout_s=60)
    assert list(hook.bodies[0]) == ["text"]
    text = hook.bodies[0]["text"]
    assert "node.quarantined" in text and "&lt;XID 79&gt; &amp; fell" in text and "nodes: gpu07" in text


def test_a_webhook_that_never_answers_costs_bounded_time(silent_url: str) -> None:
    """Each try ends at its timeout; after the last one the event is given up and close() returns."""
    n = Notifier([Webhook(silent_url)], retry=Retry(attempts=2, backoff_s=0.01, timeout_s=0.5))
    assert n.notify(event()) is True  # returns at once: the caller never waits for the webhook
    assert n.close(timeout_s=60) is True
    assert n.sent == 0 and n.failed == 1


def test_a_refusing_webhook_is_not_retried(hook: Hook) -> None:
    hook.statuses = [404]
    n = Notifier([Webhook(hook.url)], retry=FAST)
    n.notify(event())
    assert n.close(timeout_s=60)
    assert len(hook.bodies) == 1 and n.failed == 1


def test_a_full_queue_drops_instead_of_blocking(hook: Hook) -> None:
    hook.release.clear()  # the receiver holds the first event; the rest wait in the queue
    n = Notifier([Webhook(hook.url)], retry=FAST, max_queue=2)
    results = [n.notify(event()) for _ in range(6)]
    assert results[:2] == [True, True] and False in results and n.dropped == results.count(False)
    hook.release.set()
    assert n.close(timeout_s=60)


def test_no_secret_in_any_log_line(caplog: pytest.LogCaptureFixture, silent_url: str, hook: Hook) -> None:
    port = silent_url.split(":")[2].split("/")[0]
    secret_silent = f"http://user:hunter2@127.0.0.1:{port}/services/T0SECRET/B0SECRET/XyZsecretPath?sig=querysecret"
    hook.statuses = [500]
    secret_hook = (
        hook.url.replace("127.0.0.1", "user:hunter2@127.0.0.1") + "/T0SECRET/B0SECRET/XyZsecretPath?sig=querysecret"
    )
    with caplog.at_level(logging.DEBUG):
        n = Notifier(
            [Webhook(secret_silent), Webhook(secret_hook)], retry=Retry(attempts=2, backoff_s=0.01, timeout_s=0.3)
        )
        n.notify(event())
        assert n.close(timeout_s=60)
        with pytest.raises(ValueError) as bad:
            parse_webhooks("ftp://user:hunter2@host/T0SECRET/B0SECRET/XyZsecretPath?sig=querysecret")
    logged = caplog.text + str(bad.value)
    assert "given up after 2 tries" in logged and "try 1 of 2 failed (HTTP 500)" in logged
    assert f"http://127.0.0.1:{port}/…#" in logged
    for secret in SECRET_URL_PARTS:
        assert secret not in logged
    assert redact(secret_silent) == redact(secret_silent) != redact(secret_hook)


def test_generic_body_is_the_event() -> None:
    e = event()
    assert body(e, WebhookFormat.GENERIC) == json.loads(e.model_dump_json())
    assert preflight_critical(preflight_run("pf-warn", 1.0)) is None  # a WARNING pre-flight raises nothing


def test_the_service_sends_a_critical_push_without_waiting(tmp_path: Path, hook: Hook) -> None:
    """The push is answered while the webhook still holds the event; a retried push and a WARNING run send
    nothing."""
    hook.release.clear()
    n = Notifier([Webhook(hook.url)], retry=FAST)
    with Store.open(migrated(f"sqlite:///{tmp_path}/n.db")) as store:
        token = create_token(store, "prolog", TokenScope.WRITE).token
        client = TestClient(create_app(store, notifier=n))
        auth = {"Authorization": f"Bearer {token}"}
        report = json.loads(critical_report().model_dump_json())
        r = client.post("/reports", json={"report": report}, headers=auth)
        assert r.status_code == 201 and hook.bodies == []  # answered before the webhook was
        assert client.post("/reports", json={"report": report}, headers=auth).status_code == 200
        warning = json.loads(preflight_run("pf-warn", 1_795_752_800.0).model_dump_json())
        assert client.post("/reports", json={"report": warning}, headers=auth).status_code == 201
        hook.release.set()
        assert n.close(timeout_s=60)
    assert [b["run_id"] for b in hook.bodies] == ["pf-crit-1"]
    assert hook.bodies[0]["details"]["path"] == "/runs/pf-crit-1"


def test_the_service_is_not_failed_by_a_dead_webhook(tmp_path: Path, silent_url: str) -> None:
    n = Notifier([Webhook(silent_url)], retry=Retry(attempts=1, timeout_s=0.5))
    with Store.open(migrated(f"sqlite:///{tmp_path}/n.db")) as store:
        token = create_token(store, "prolog", TokenScope.WRITE).token
        client = TestClient(create_app(store, notifier=n))
        report = json.loads(critical_report().model_dump_json())
        r = client.post("/reports", json={"report": report}, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 201
        assert client.get("/runs/pf-crit-1").json()["verdict"] == "CRITICAL"
    assert n.close(timeout_s=60) and n.failed == 1


def test_parse_webhooks() -> None:
    hooks = parse_webhooks("https://a.example/x, http://b.example:8080/y\nhttps://c.example/z", "slack")
    assert [h.url for h in hooks] == ["https://a.example/x", "http://b.example:8080/y", "https://c.example/z"]
    assert {h.format for h in hooks} == {WebhookFormat.SLACK}
    assert parse_webhooks(None) == [] and parse_webhooks("  ") == []
    with pytest.raises(ValueError, match="generic, slack"):
        parse_webhooks("https://a.example/x", "teams")


def test_a_quarantine_is_sent_once_its_transaction_commits(tmp_path: Path, hook: Hook) -> None:
    """A drain recorded in the store (the node's state machine moving it to quarantined) sends one
    node.quarantined event through the process's notifier, after the commit; a second drain changes nothing
    and sends nothing."""
    from fleetdx.orchestrator import notify as notify_mod
    from fleetdx.orchestrator.diagnosis.node_states import DrainEvent
    from fleetdx.orchestrator.store import states

    n = notify_mod.configure([Webhook(hook.url)], retry=FAST)
    try:
        with Store.open(migrated(f"sqlite:///{tmp_path}/q.db")) as store:
            store.save_report(critical_report("pf-q"))  # gpu07 becomes suspect: no event
            reason = "fleetdx preflight: GPU_COUNT_MISMATCH (7 GPUs visible, 8 expected)"
            first = states.record(store, "gpu07", DrainEvent(at=1_795_752_800.0, reason=reason, run_id="pf-q"))
            again = states.record(store, "gpu07", DrainEvent(at=1_795_752_900.0, reason=reason))
        assert first.transition is not None and again.transition is None
        assert n.close(timeout_s=60)
    finally:
        notify_mod.configure([])
    assert [b["kind"] for b in hook.bodies] == ["node.quarantined"]
    sent = hook.bodies[0]
    assert sent["hosts"] == ["gpu07"] and sent["codes"] == ["GPU_COUNT_MISMATCH"] and sent["run_id"] == "pf-q"
    assert sent["summary"] == f"gpu07 quarantined by fleetdx: {reason}"
    assert sent["details"]["from_state"] == "suspect"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--webhook", "ftp://user:hunter2@hooks.example/T0SECRET/B0SECRET/XyZsecretPath"], "not an http"),
        (["--webhook", "https://hooks.example/x", "--webhook-format", "teams"], "generic, slack"),
    ],
)
def test_serve_refuses_a_bad_webhook_in_one_line_without_its_secret(args: list[str], said: str) -> None:
    from typer.testing import CliRunner

    from fleetdx.orchestrator.cli import serve_cmd
    from tests.cliapp import cli_app

    r = CliRunner().invoke(cli_app(serve_cmd), ["serve", *args])
    assert r.exit_code == 3 and said in r.output, r.output
    for secret in SECRET_URL_PARTS:
        assert secret not in r.output


def test_a_live_hang_sends_job_hang(hook: Hook) -> None:
    """`fleetdx watch` sends a job.hang event for its STEP_HANG finding through the process's notifier, and
    nothing for a straggler."""
    from fleetdx.orchestrator import notify as notify_mod
    from fleetdx.orchestrator.cli.watch_cmd import notify_hang

    hang = Finding(
        code=FindingCode.STEP_HANG,
        severity=Severity.CRITICAL,
        nodes=["gpu07", "gpu08"],
        subject="ranks 2, 3",
        message="no rank completed a step for 41 s (20 x the median step 2.05 s); ranks 2, 3 stopped first",
    )
    straggler = Finding(
        code=FindingCode.STEP_STRAGGLER_RANK, severity=Severity.WARNING, nodes=["gpu07"], message="rank 2 slow"
    )
    n = notify_mod.configure([Webhook(hook.url, WebhookFormat.SLACK)], retry=FAST)
    try:
        assert notify_hang(straggler) is False
        assert notify_hang(hang) is True
        assert n.close(timeout_s=60)
    finally:
        notify_mod.configure([])
    (sent,) = hook.bodies
    assert sent["text"].startswith("*fleetdx job.hang*: ranks 2, 3: no rank completed a step for 41 s")
    assert "nodes: gpu07, gpu08" in sent["text"] and "codes: STEP_HANG" in sent["text"]
