"""The API's bearer-token auth matrix, on SQLite and PostgreSQL: no token / read token / write token / revoked
token / a malformed one, on each endpoint, with reads open and with reads protected (``auth_reads``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.tokens import TokenScope, create_token, revoke_token
from tests.store_samples import NODE_A, bandwidth_raw, bandwidth_run, preflight_run

pytest_plugins = ["tests.pgfixtures"]

T0 = 1_763_800_000.0


@dataclass
class Tokens:
    read: str
    write: str
    revoked: str  #: a write token, revoked
    malformed: str = "fdx_not-a-token"
    unknown: str = "fdx_0123456789ab_" + "A" * 43  #: well-formed, never issued


@pytest.fixture
def served(store: Store) -> Iterator[tuple[Store, Tokens]]:
    store.save_report(bandwidth_run("bw-1", T0, degraded=True), bandwidth_raw(True))
    read = create_token(store, "dashboard", TokenScope.READ).token
    write = create_token(store, "prolog", TokenScope.WRITE).token
    gone = create_token(store, "old prolog", TokenScope.WRITE)
    revoke_token(store, gone.info.token_id)
    yield store, Tokens(read=read, write=write, revoked=gone.token)


#: (method, path); a POST carries a fresh report each time it is sent
READS = [
    ("GET", "/runs"),
    ("GET", "/runs/bw-1"),
    ("GET", f"/nodes/{NODE_A}/history"),
    ("GET", "/findings"),
    ("GET", "/metrics"),
    ("GET", f"/placement?nodes=1&gpus_per_node=1&hostlist={NODE_A}"),
    ("POST", "/placement"),
]
WRITES = [("POST", "/reports")]
CREDENTIALS = ["none", "read", "write", "revoked", "malformed", "unknown"]

_sent = 0


def call(client: TestClient, method: str, path: str, token: str | None) -> int:
    global _sent
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    if method == "POST" and path == "/placement":  # a query: a read, though a POST
        return client.post(path, json={"nodes": 1, "gpus_per_node": 1, "hostlist": NODE_A}, headers=headers).status_code
    if method == "POST":
        _sent += 1
        report = preflight_run(f"pf-auth-{_sent}", T0 + _sent)
        return client.post(path, json={"report": report.model_dump(mode="json")}, headers=headers).status_code
    return client.get(path, headers=headers).status_code


def token_of(tokens: Tokens, credential: str) -> str | None:
    return None if credential == "none" else str(getattr(tokens, credential))


def expected(method: str, path: str, credential: str, auth_reads: bool) -> set[int]:
    if credential in ("revoked", "malformed", "unknown"):
        return {401}
    if (method, path) in WRITES:
        return {"none": {401}, "read": {403}, "write": {201}}[credential]
    if credential == "none":
        return {401} if auth_reads else {200}
    return {200}


@pytest.mark.parametrize("auth_reads", [False, True], ids=["reads-open", "reads-need-token"])
@pytest.mark.parametrize("method,path", READS + WRITES)
def test_auth_matrix(served: tuple[Store, Tokens], auth_reads: bool, method: str, path: str) -> None:
    store, tokens = served
    client = TestClient(create_app(store, auth_reads=auth_reads))
    got = {c: call(client, method, path, token_of(tokens, c)) for c in CREDENTIALS}
    want = {c: expected(method, path, c, auth_reads) for c in CREDENTIALS}
    assert {c: got[c] in want[c] for c in CREDENTIALS} == dict.fromkeys(CREDENTIALS, True), (got, want)


def test_healthz_never_needs_a_token(served: tuple[Store, Tokens]) -> None:
    store, _ = served
    assert TestClient(create_app(store, auth_reads=True)).get("/healthz").status_code == 200


def test_refusals_say_why_and_challenge_per_rfc6750(served: tuple[Store, Tokens]) -> None:
    store, tokens = served
    client = TestClient(create_app(store))
    body = {"report": preflight_run("pf-x", T0).model_dump(mode="json")}
    missing = client.post("/reports", json=body)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == 'Bearer realm="fleetdx"'
    assert "scope write" in missing.json()["detail"]
    revoked = client.post("/reports", json=body, headers={"Authorization": f"Bearer {tokens.revoked}"})
    assert revoked.status_code == 401 and 'error="invalid_token"' in revoked.headers["www-authenticate"]
    assert "revoked" in revoked.json()["detail"]
    read = client.post("/reports", json=body, headers={"Authorization": f"Bearer {tokens.read}"})
    assert read.status_code == 403 and 'error="insufficient_scope"' in read.headers["www-authenticate"]
    assert "has scope read; this needs write" in read.json()["detail"]
    basic = client.post("/reports", json=body, headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert basic.status_code == 401
    # nothing refused was stored
    assert [r.run_id for r in store.list_runs()] == ["bw-1"]


def test_revocation_holds_at_once_in_another_worker(served: tuple[Store, Tokens], migrated_url: str) -> None:
    """Two apps over one database (two workers): a token revoked through one is refused by the other at the
    next request; no worker caches a token."""
    store, _ = served
    fresh = create_token(store, "ci", TokenScope.READ)
    with Store.open(migrated_url) as other_store:
        a = TestClient(create_app(store, auth_reads=True))
        b = TestClient(create_app(other_store, auth_reads=True))
        auth = {"Authorization": f"Bearer {fresh.token}"}
        assert a.get("/runs", headers=auth).status_code == 200 and b.get("/runs", headers=auth).status_code == 200
        revoke_token(store, fresh.info.token_id)
        assert b.get("/runs", headers=auth).status_code == 401
