"""``GET /metrics`` on SQLite and PostgreSQL: the exposition parses with prometheus_client's own text parser,
names follow the Prometheus conventions, values are the stored runs' (read off the sample reports), and two
apps over one database (two workers) give the same fleet series."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from fleetdx.orchestrator.diagnosis.node_states import DrainEvent, RetestEvent
from fleetdx.orchestrator.report import NodeReport, RunKind, RunReport
from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store, states
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from fleetdx.probes.contracts import Verdict
from tests.store_samples import NODE_A, NODE_B, bandwidth_raw, bandwidth_run, preflight_raw, preflight_run

pytest_plugins = ["tests.pgfixtures"]

T0 = 1_763_800_000.0
VM = "h100-vm-idle"


def samples(text: str) -> dict[str, list[Sample]]:
    """Family name -> its samples, through prometheus_client's parser (it raises on a malformed exposition)."""
    return {f.name: list(f.samples) for f in text_string_to_metric_families(text)}


def value(fams: dict[str, list[Sample]], family: str, name: str, **labels: str) -> float | None:
    hits = [s.value for s in fams.get(family, []) if s.name == name and s.labels == labels]
    assert len(hits) <= 1, hits
    return hits[0] if hits else None


@pytest.fixture
def filled(store: Store) -> Store:
    """Two GH200 nodes healthy then degraded (bandwidth runs), the H100 VM with a pre-flight (WARNING), and a
    simulated run that must not count."""
    store.save_report(bandwidth_run("bw-healthy", T0, degraded=False), bandwidth_raw(False))
    store.save_report(preflight_run("pf-1", T0 + 60), preflight_raw())
    store.save_report(bandwidth_run("bw-degraded", T0 + 3600, degraded=True), bandwidth_raw(True))
    sim = RunReport(
        run_id="sim-1",
        kind=RunKind.PREFLIGHT,
        started_at=T0 + 7200,
        finished_at=T0 + 7201,
        verdict=Verdict.OK,
        exit_code=0,
        simulated=True,
        nodes=[NodeReport(host=NODE_A, verdict=Verdict.OK), NodeReport(host="sim-only", verdict=Verdict.OK)],
        findings=[],
    )
    store.save_report(sim)
    return store


def test_metrics_parse_and_hold_the_stored_state(filled: Store) -> None:
    client = TestClient(create_app(filled))
    assert client.get("/runs").status_code == 200  # one request, for the latency histogram
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    fams = samples(r.text)

    # the latest verdict per node: the GH200 pair CRITICAL (bw-degraded), the VM WARNING (pf-1); the
    # simulated run changes nothing and its host is absent
    verdicts = {s.labels["node"]: s.value for s in fams["fleetdx_node_verdict"]}
    assert verdicts == {NODE_A: 2.0, NODE_B: 2.0, VM: 1.0}

    # open findings of each node's latest run: NCCL_BUSBW_LOW critical on each GH200 node, the VM's warning
    assert value(fams, "fleetdx_node_open_findings", "fleetdx_node_open_findings", node=NODE_A,
                 code="NCCL_BUSBW_LOW", severity="critical") == 1.0  # fmt: skip
    assert value(fams, "fleetdx_node_open_findings", "fleetdx_node_open_findings", node=VM,
                 code="TOPO_AFFINITY_MISSING", severity="warning") == 1.0  # fmt: skip
    assert len(fams["fleetdx_node_open_findings"]) == 3

    # last pre-flight: only the VM ran one (pf-1 finished at T0 + 60 + 3.25); the simulated one does not count
    last = {s.labels["node"]: s.value for s in fams["fleetdx_node_last_preflight_timestamp_seconds"]}
    assert last == {VM: T0 + 63.25}

    # all stored findings by code and severity, a counter
    total = "fleetdx_findings_total"
    assert value(fams, "fleetdx_findings", total, code="NCCL_BUSBW_LOW", severity="critical") == 2
    assert value(fams, "fleetdx_findings", total, code="TOPO_AFFINITY_MISSING", severity="warning") == 1

    # request latency, labelled by the route template
    lat = "fleetdx_http_request_duration_seconds"
    count = value(fams, lat, f"{lat}_count", method="GET", route="/runs", status="200")
    assert count == 1.0


def test_names_follow_prometheus_conventions(filled: Store) -> None:
    client = TestClient(create_app(filled))
    client.get("/runs/bw-healthy")
    text = client.get("/metrics").text
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M))
    assert types == {
        "fleetdx_node_verdict": "gauge",
        "fleetdx_node_open_findings": "gauge",
        "fleetdx_node_last_preflight_timestamp_seconds": "gauge",
        "fleetdx_findings_total": "counter",
        "fleetdx_node_state": "gauge",
        "fleetdx_node_state_since_timestamp_seconds": "gauge",
        "fleetdx_retests_total": "counter",
        "fleetdx_http_request_duration_seconds": "histogram",
    }
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
            assert name and name.group(0).startswith("fleetdx_"), line
    client.request("BREW", "/runs")  # a made-up method is counted as "other"
    text = client.get("/metrics").text
    assert 'method="other",route="/runs"' in text and "BREW" not in text
    # the route label is the template, not the path (bounded cardinality)
    assert 'route="/runs/{run_id}"' in text and "bw-healthy" not in text.split("fleetdx_http_request")[1]


def test_metrics_come_from_the_database_not_the_worker(filled: Store, migrated_url: str) -> None:
    """Two apps over one database (two stateless workers): a report pushed through one shows in the other's
    fleet series at once."""
    token = create_token(filled, "prolog", TokenScope.WRITE).token
    with Store.open(migrated_url) as other:
        a = TestClient(create_app(filled), headers={"Authorization": f"Bearer {token}"})
        b = TestClient(create_app(other))
        fleet = ("fleetdx_node_verdict", "fleetdx_node_open_findings", "fleetdx_findings")

        def fleet_series(c: TestClient) -> dict[str, list[Sample]]:
            return {k: v for k, v in samples(c.get("/metrics").text).items() if k in fleet}

        assert fleet_series(a) == fleet_series(b)
        healthy_again = bandwidth_run("bw-healthy-2", T0 + 9000, degraded=False)
        assert a.post("/reports", json={"report": healthy_again.model_dump(mode="json")}).status_code == 201
        after = fleet_series(b)
        assert {s.labels["node"]: s.value for s in after["fleetdx_node_verdict"]} == {NODE_A: 0, NODE_B: 0, VM: 1}
        assert after == fleet_series(a)


def test_an_empty_database_has_empty_families(store: Store) -> None:
    fams = samples(TestClient(create_app(store)).get("/metrics").text)
    assert fams["fleetdx_node_verdict"] == [] and fams["fleetdx_findings"] == []
    assert fams["fleetdx_node_state"] == [] and fams["fleetdx_node_state_since_timestamp_seconds"] == []
    assert {s.labels["result"]: s.value for s in fams["fleetdx_retests"]} == {"pass": 0, "fail": 0}


def test_node_states_and_retests(filled: Store) -> None:
    """One sample per node with its current state; the time of its last transition; retests by result. The
    VM's WARNING pre-flight made it ok; gpu07 was found critical, drained, failed a retest, then passed one;
    gpu08 is quarantined. The GH200 pair ran bandwidth runs only: no state."""
    bad = preflight_run("pf-bad", T0 + 100, host="gpu07").model_copy(
        update={"nodes": [NodeReport(host="gpu07", verdict=Verdict.CRITICAL)], "verdict": Verdict.CRITICAL}
    )
    filled.save_report(bad)
    states.record(filled, "gpu07", DrainEvent(at=T0 + 200, reason="fleetdx: TEST"))
    states.record(filled, "gpu07", RetestEvent(at=T0 + 300))
    filled.save_report(bad.model_copy(update={"run_id": "pf-retest-1", "finished_at": T0 + 301}))  # fail
    states.record(filled, "gpu07", RetestEvent(at=T0 + 400))
    good = preflight_run("pf-retest-2", T0 + 400, host="gpu07")  # WARNING: clean
    filled.save_report(good)
    states.record(filled, "gpu08", DrainEvent(at=T0 + 500, reason="fleetdx: TEST"))
    fams = samples(TestClient(create_app(filled)).get("/metrics").text)
    state = {(s.labels["node"], s.labels["state"]): s.value for s in fams["fleetdx_node_state"]}
    assert state == {(VM, "ok"): 1.0, ("gpu07", "returned"): 1.0, ("gpu08", "quarantined"): 1.0}
    since = {s.labels["node"]: s.value for s in fams["fleetdx_node_state_since_timestamp_seconds"]}
    assert since == {VM: T0 + 63.25, "gpu07": good.finished_at, "gpu08": T0 + 500}
    retests = {s.labels["result"]: s.value for s in fams["fleetdx_retests"] if s.name == "fleetdx_retests_total"}
    assert retests == {"pass": 1.0, "fail": 1.0}
