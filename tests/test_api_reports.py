"""``POST /reports`` on SQLite and PostgreSQL: a pushed report is the stored report, ingestion is idempotent by
run id, and every client mistake is a 4xx with a reason (never a 5xx), whose body never names the database."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.service.ingest import MAX_UPLOAD_BYTES
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.engine import make_engine, parse_url
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from tests.store_samples import (
    DOWN_PG_URL,
    bandwidth_raw,
    bandwidth_run,
    preflight_raw,
    preflight_run,
)

pytest_plugins = ["tests.pgfixtures"]

T0 = 1_763_800_000.0


@pytest.fixture
def client(store: Store) -> TestClient:
    token = create_token(store, "prolog", TokenScope.WRITE).token
    return TestClient(create_app(store), headers={"Authorization": f"Bearer {token}"})


def upload(report_id: str = "pf-1") -> dict[str, Any]:
    return {"report": preflight_run(report_id, T0).model_dump(mode="json"), "raw": preflight_raw()}


def test_pushed_report_is_the_stored_report(client: TestClient, store: Store) -> None:
    r = client.post("/reports", json=upload())
    assert r.status_code == 201 and r.json() == {"run_id": "pf-1", "inserted": True}
    assert store.get_run("pf-1") == preflight_run("pf-1", T0)
    assert store.get_raw("pf-1", "h100-vm-idle") == preflight_raw()["h100-vm-idle"]
    assert client.get("/runs/pf-1").json() == preflight_run("pf-1", T0).model_dump(mode="json")


def test_ingestion_is_idempotent_by_run_id(client: TestClient, store: Store) -> None:
    assert client.post("/reports", json=upload()).status_code == 201
    again = client.post("/reports", json=upload())
    assert again.status_code == 200 and again.json() == {"run_id": "pf-1", "inserted": False}
    assert [r.run_id for r in store.list_runs()] == ["pf-1"]


def test_gzip_body_and_a_bare_run_report(client: TestClient, store: Store) -> None:
    body = gzip.compress(json.dumps({"report": bandwidth_run("bw-1", T0, True).model_dump(mode="json")}).encode())
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    assert client.post("/reports", content=body, headers=headers).status_code == 201
    # `fleetdx preflight --json` prints a bare RunReport: it is accepted as is
    bare = client.post("/reports", json=bandwidth_run("bw-2", T0 + 1, False).model_dump(mode="json"))
    assert bare.status_code == 201
    assert store.get_run("bw-1") == bandwidth_run("bw-1", T0, True)
    assert store.get_raw("bw-1", "nid005471") == {}  # no raw outputs were sent
    assert bandwidth_raw(True)  # (the sample has raw outputs; this upload left them out)


def _report(mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    doc = copy.deepcopy(upload("pf-bad"))
    mutate(doc)
    return doc


def _set(path: str | tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    """Replace the value at ``path`` ("a.0.b", or a tuple of keys and indexes when keys hold dots)."""
    keys: tuple[str | int, ...] = tuple(path.split(".")) if isinstance(path, str) else path

    def mutate(doc: dict[str, Any]) -> None:
        node: Any = doc
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


BAD_REPORTS = {
    "run id over 64 characters": (_set("report.run_id", "r" * 65), 422, "run_id must be 1-64"),
    "empty run id": (_set("report.run_id", ""), 422, "run_id"),
    "host over 255 characters": (_set("report.nodes.0.host", "h" * 256), 422, "over 255 characters"),
    "NUL in a host": (_set("report.nodes.0.host", "gpu\x0001"), 422, "NUL"),
    "NUL in a message": (_set("report.findings.0.message", "bad\x00"), 422, "NUL"),
    "subject over 255": (_set("report.findings.0.subject", "s" * 300), 422, "finding subject"),
    "unknown finding code": (_set("report.findings.0.code", "NO_SUCH_CODE"), 422, "findings.0.code"),
    "unknown kind": (_set("report.kind", "banana"), 422, "report.kind"),
    "exit code not the verdict's": (_set("report.exit_code", 7), 422, "exit_code 7"),
    "huge exit code": (_set("report.exit_code", 2**40), 422, "exit_code"),
    "started_at a string": (_set("report.started_at", "yesterday"), 422, "started_at"),
    "missing nodes": (lambda d: d["report"].pop("nodes"), 422, "report.nodes"),
    "raw file name over 255": (_set("raw.h100-vm-idle", {"f" * 256: "x"}), 422, "raw file name"),
    "raw text not text": (_set("raw.h100-vm-idle", {"a.txt": 5}), 422, "raw"),
    "a host twice": (
        lambda d: d["report"]["nodes"].append(copy.deepcopy(d["report"]["nodes"][0])),
        422,
        "appears twice",
    ),
    "extra field": (_set("report.surprise", 1), 422, "surprise"),
    "an empty object": (lambda d: d.clear(), 422, "report"),
}


@pytest.mark.parametrize("case", list(BAD_REPORTS))
def test_client_mistakes_are_4xx_with_a_reason(client: TestClient, store: Store, case: str) -> None:
    mutate, status, reason = BAD_REPORTS[case]
    r = client.post("/reports", json=_report(mutate))
    assert r.status_code == status, (case, r.status_code, r.text)
    assert reason in r.json()["detail"], r.json()
    assert store.list_runs() == []


def _leaf_paths(value: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if isinstance(value, dict) and value:
        return [p for k, v in value.items() for p in _leaf_paths(v, (*prefix, k))]
    if isinstance(value, list) and value:
        return [p for i, v in enumerate(value) for p in _leaf_paths(v, (*prefix, i))]
    return [prefix]


LEAVES = _leaf_paths(upload("pf-fuzz"))
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=300),
    st.text(alphabet=st.sampled_from("\x00\x01\n\x7fab\u00e9\U0001f600"), max_size=40),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=300), st.text(max_size=5), max_size=2),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(LEAVES), ODD_VALUES), min_size=1, max_size=3))
def test_no_mutation_of_a_report_is_a_server_error(
    client: TestClient, changes: list[tuple[tuple[str | int, ...], Any]]
) -> None:
    """Any leaf of a valid upload replaced by an odd value (NUL, control characters, huge numbers, NaN, long
    text, wrong types): the answer is 2xx or 4xx, never 5xx, on SQLite and on PostgreSQL."""
    doc = copy.deepcopy(upload("pf-fuzz"))
    for path, value in changes:
        _set(path, value)(doc)
    r = client.post("/reports", content=json.dumps(doc, allow_nan=True), headers={"Content-Type": "application/json"})
    assert r.status_code < 500, (changes, r.status_code, r.text)


def test_bodies_that_are_not_json_reports(client: TestClient) -> None:
    cases = [
        (b"{not json", {"Content-Type": "application/json"}, 400, "not UTF-8 JSON"),
        (b"\xff\xfe\x00", {"Content-Type": "application/json"}, 400, "not UTF-8 JSON"),
        (b"[1, 2]", {"Content-Type": "application/json"}, 422, "not a fleetdx report"),
        (b'{"report": 1}', {"Content-Type": "text/plain"}, 415, "application/json"),
        (b"{}", {"Content-Type": "application/json", "Content-Encoding": "br"}, 415, "gzip or identity"),
        (b"not gzip", {"Content-Type": "application/json", "Content-Encoding": "gzip"}, 400, "does not decompress"),
    ]
    gz = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    cases.append((gzip.compress(b'{"report": 1}')[:-8], gz, 400, "truncated"))
    for body, headers, status, reason in cases:
        r = client.post("/reports", content=body, headers=headers)
        assert r.status_code == status and reason in r.json()["detail"], (body[:20], r.status_code, r.text)


def test_a_gzip_bomb_stops_at_the_cap(client: TestClient) -> None:
    bomb = gzip.compress(b" " * (MAX_UPLOAD_BYTES + 1024))  # about 64 KiB that would inflate past the cap
    r = client.post("/reports", content=bomb, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code == 413 and str(MAX_UPLOAD_BYTES) in r.json()["detail"]


def test_an_unreachable_database_is_503_without_the_url() -> None:
    store = Store(make_engine(parse_url(DOWN_PG_URL)))
    client = TestClient(create_app(store))
    auth = {"Authorization": "Bearer fdx_0123456789ab_" + "A" * 43}
    for r in (
        client.post("/reports", json=upload(), headers=auth),
        client.get("/metrics"),
        client.get("/runs", headers=auth),
    ):
        assert r.status_code == 503, r.text
        assert "postgresql" not in r.text and "fleetdx@" not in r.text and "127.0.0.1:1" not in r.text, r.text
    store.close()
