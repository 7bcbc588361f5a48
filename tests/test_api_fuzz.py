"""Any text in any path or query parameter of any endpoint is answered 2xx or 4xx, never 5xx, on SQLite and
PostgreSQL (PostgreSQL refuses NUL in text: a client's NUL must be a 422, not a database error)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from tests.store_samples import preflight_raw, preflight_run

pytest_plugins = ["tests.pgfixtures"]

#: (method, path template, query parameter names)
ENDPOINTS = [
    ("GET", "/runs/{}", ["limit"]),
    ("GET", "/nodes/{}/history", ["limit"]),
    ("GET", "/findings", ["code", "severity", "host", "limit"]),
    ("GET", "/runs", ["limit"]),
    ("GET", "/metrics", []),
    ("GET", "/placement", ["nodes", "gpus_per_node", "partition", "hostlist", "exclude", "ib_port"]),
]
TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from("\x00\x01\n\x7f[]-,0123456789gpu\u00e9%"), max_size=30),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["", "nan", "inf", "-1", "0", "1e400", "gpu[01-", "gpu[1-100000000]", "x" * 300]),
)


@pytest.fixture
def client(store: Store) -> TestClient:
    store.save_report(preflight_run("pf-1", 1_763_800_000.0), preflight_raw())
    token = create_token(store, "reader", TokenScope.READ).token
    return TestClient(create_app(store, auth_reads=True), headers={"Authorization": f"Bearer {token}"})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    endpoint=st.sampled_from(ENDPOINTS),
    segment=TEXT,
    values=st.dictionaries(st.sampled_from(["limit", "code", "severity", "host", "nodes", "gpus_per_node",
                                            "partition", "hostlist", "exclude", "ib_port"]), TEXT, max_size=4),
)  # fmt: skip
def test_no_parameter_is_a_server_error(
    client: TestClient, endpoint: tuple[str, str, list[str]], segment: str, values: dict[str, str]
) -> None:
    _, template, names = endpoint
    path = template.format(quote(segment, safe="")) if "{}" in template else template
    params = {k: v for k, v in values.items() if k in names}
    if template == "/placement":
        params.setdefault("nodes", "1")
        params.setdefault("gpus_per_node", "1")
    r = client.get(path, params=params)
    assert r.status_code < 500, (path, params, r.status_code, r.text[:300])
