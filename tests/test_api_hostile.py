"""Issue 21, item 5: hostile HTTP bodies are 4xx with a one-line ``detail``, never a 5xx or a connection reset,
on SQLite and PostgreSQL (PostgreSQL refuses NUL in text: the 422 must come before the database).

Each case was a 500 (or a 201, or a reset) before: a lone surrogate in a report (UnicodeEncodeError), JSON
nested 100,000 deep (RecursionError), a 10,000-deep list inside a finding's details, ``1e309`` on POST
/placement (infinity in FastAPI's error body), a NUL in raw outputs (stored with 201), a body over the limit
with ``Connection: close`` (reset while the client was still sending)."""

from __future__ import annotations

import copy
import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from fleetdx.orchestrator.service.api import create_app, one_line
from fleetdx.orchestrator.service.ingest import MAX_UPLOAD_BYTES
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from tests.store_samples import migrated, preflight_raw, preflight_run

pytest_plugins = ["tests.pgfixtures"]

T0 = 1_763_800_000.0
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def client(store: Store) -> TestClient:
    token = create_token(store, "prolog", TokenScope.WRITE).token
    return TestClient(
        create_app(store), headers={"Authorization": f"Bearer {token}"}, raise_server_exceptions=False
    )


def upload(run_id: str = "pf-h") -> dict[str, Any]:
    return {"report": preflight_run(run_id, T0).model_dump(mode="json"), "raw": preflight_raw()}


def _with(doc: dict[str, Any], marker: str, raw_json: str) -> bytes:
    """``doc`` as JSON with the string ``marker`` replaced by ``raw_json`` (text json.dumps would not write)."""
    return json.dumps(doc).replace(json.dumps(marker), raw_json).encode()


def _assert_one_line_4xx(r: httpx.Response, status: int, reason: str) -> None:
    assert r.status_code == status, (r.status_code, r.text[:300])
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and reason in detail, detail


def _report_cases() -> dict[str, tuple[bytes, int, str]]:
    surrogate_id = copy.deepcopy(upload())
    surrogate_id["report"]["run_id"] = "SURROGATE"
    surrogate_msg = copy.deepcopy(upload())
    surrogate_msg["report"]["findings"][0]["message"] = "SURROGATE"
    deep_details = copy.deepcopy(upload())
    deep_details["report"]["findings"][0]["details"] = {"x": "DEEP"}
    nul_raw = copy.deepcopy(upload())
    host = next(iter(nul_raw["raw"]))
    name = next(iter(nul_raw["raw"][host]))
    nul_raw["raw"][host][name] = "line one\n\x00line two"
    surrogate_raw = copy.deepcopy(upload())
    surrogate_raw["raw"][host][name] = "SURROGATE"
    surrogate_key = copy.deepcopy(upload())
    surrogate_key["raw"][host] = {"SURROGATE": "text"}
    return {
        "lone surrogate in run_id": (_with(surrogate_id, "SURROGATE", '"\\ud800"'), 422, "lone surrogate"),
        "lone low surrogate in a message": (_with(surrogate_msg, "SURROGATE", '"ok \\udc00"'), 422, "lone surrogate"),
        "JSON 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, 400, "nested too deeply"),
        "10,000-deep list in a finding's details": (
            _with(deep_details, "DEEP", "[" * 10_000 + "]" * 10_000),
            400,
            "nested too deeply",
        ),
        "900-deep list in a finding's details": (
            _with(deep_details, "DEEP", "[" * 900 + "]" * 900),
            422,
            "details",
        ),
        "NUL in raw outputs": (json.dumps(nul_raw).encode(), 422, "holds a NUL character"),
        "lone surrogate in raw outputs": (_with(surrogate_raw, "SURROGATE", '"a\\ud83d"'), 422, "lone surrogate"),
        "lone surrogate in a raw file name": (_with(surrogate_key, "SURROGATE", '"\\udfff"'), 422, "lone surrogate"),
    }


REPORT_CASES = _report_cases()


@pytest.mark.parametrize("case", list(REPORT_CASES))
def test_hostile_report_bodies_are_4xx_before_the_database(client: TestClient, store: Store, case: str) -> None:
    body, status, reason = REPORT_CASES[case]
    _assert_one_line_4xx(client.post("/reports", content=body, headers=JSON), status, reason)
    assert store.list_runs() == []


@pytest.mark.parametrize(
    "body,status,reason",
    [
        (b'{"nodes": 1e309, "gpus_per_node": 8, "hostlist": "gpu[1-4]"}', 422, "body.nodes: Input should be a finite"),
        (b'{"nodes": 1, "gpus_per_node": -1e309, "hostlist": "gpu[1-4]"}', 422, "body.gpus_per_node"),
        (b'{"nodes": 1, "gpus_per_node": 1, "hostlist": "\\ud800"}', 422, "hostlist"),
        (b'{"nodes": 1, "gpus_per_node": 1, "hostlist": "gpu[1-2]", "partition": "a\\udc00"}', 422, "partition"),
        (b'{"nodes": 1, "gpus_per_node": 1, "hostlist": "gpu[1-2]", "partition": "\\u0000"}', 422, "partition"),
        (b'{"nodes": 1, "gpus_per_node": 1, "hostlist": "gpu\\u0000[1-2]"}', 422, "hostlist"),
        (b'{"nodes": 1, "gpus_per_node": 1, "hostlist": "gpu[1-2]", "exclude": ["\\ud800"]}', 422, "exclude"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "parsing the body"),
        (b'{"nodes": "\\ud800", "gpus_per_node": 1}', 422, "body.nodes"),
    ],
)
def test_hostile_placement_bodies_are_4xx(client: TestClient, body: bytes, status: int, reason: str) -> None:
    _assert_one_line_4xx(client.post("/placement", content=body, headers=JSON), status, reason)


def test_validation_errors_are_one_line(client: TestClient) -> None:
    """FastAPI's own 422 (a list of errors, the input echoed) is one line without the input."""
    r = client.get("/placement", params={"nodes": "many", "gpus_per_node": "x"})
    _assert_one_line_4xx(r, 422, "query.nodes: Input should be a valid integer")
    assert "(2 errors)" in r.json()["detail"] and "many" not in r.text


def test_one_line_encodes_whatever_it_is_given() -> None:
    assert one_line("a\nb\r\n  c\ud800") == "a b c\\ud800"
    assert one_line("x" * 500, most=10) == "xxxxxxx..."
    one_line("\udfff" * 10).encode("utf-8")  # no UnicodeEncodeError


def test_a_body_over_the_limit_is_413_on_every_route(store: Store) -> None:
    token = create_token(store, "prolog", TokenScope.WRITE).token
    client = TestClient(create_app(store, max_body_bytes=4096), headers={"Authorization": f"Bearer {token}"})
    big = b" " * 5000
    for path in ("/reports", "/placement"):
        _assert_one_line_4xx(client.post(path, content=big, headers=JSON), 413, "over the limit of 4096")

    def chunks() -> Any:  # no Content-Length: counted as read
        for _ in range(5):
            yield b" " * 1000

    for path in ("/reports", "/placement"):
        _assert_one_line_4xx(client.post(path, content=chunks(), headers=JSON), 413, "over the limit of 4096")
    assert client.post("/reports", json=upload()).status_code == 413  # a real report is over 4 KiB
    assert create_app(store).state.service.max_body_bytes == MAX_UPLOAD_BYTES
    with pytest.raises(ValueError, match="at least 1"):
        create_app(store, max_body_bytes=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post_raw(port: int, path: str, body: bytes | Iterator[bytes], headers: dict[str, str]) -> tuple[int, str]:
    """POST with http.client: it sends the whole body before it reads the answer (as most clients do)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_fleetdx_serve_answers_413_a_client_can_read(tmp_path: object) -> None:
    """A real ``fleetdx serve --max-body-mib 1``: a 24 MiB body with ``Connection: close`` (the server closes
    after answering) reads a 413, where it was a connection reset while the client was still sending."""
    db = migrated(f"sqlite:///{tmp_path}/serve.db")
    with Store.open(db) as store:
        token = create_token(store, "prolog", TokenScope.WRITE).token
    port = _free_port()
    cmd = [sys.executable, "-m", "fleetdx", "serve", "--port", str(port), "--db", db, "--max-body-mib", "1"]
    cmd.append("--no-access-log")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(200):  # up to 40 s for the interpreter and uvicorn to start on a busy machine
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.2)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Connection": "close"}
        big = b" " * (24 << 20)
        for path in ("/reports", "/placement"):
            status, text = _post_raw(port, path, big, headers)
            assert status == 413 and "over the limit of 1048576" in text, (path, status, text)
        for path in ("/reports", "/placement"):  # no Content-Length (http.client sends an iterable chunked):
            chunked = (big[i : i + (1 << 20)] for i in range(0, len(big), 1 << 20))  # the limit is met as read
            status, text = _post_raw(port, path, chunked, headers)
            assert status == 413 and "over the limit" in text, (path, status, text)
        ok = httpx.post(f"http://127.0.0.1:{port}/reports", json=upload("pf-small"), headers=headers, timeout=30)
        assert ok.status_code == 201, ok.text  # a report under the limit is stored
    finally:
        proc.terminate()
        proc.wait(timeout=20)
