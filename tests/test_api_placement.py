"""``GET``/``POST /placement`` on SQLite and PostgreSQL: the service answers with ``place()`` over the reports
nodes pushed to it (``POST /reports``), the real Slurm captures of tests/fixtures/placement (gpu01 idle, gpu02
drained, gpu03 draining, gpu04 mixed, gpu05 allocated, gpu06 down; leaf1 = gpu[01-03], leaf2 = gpu[04-06]),
and the findings fleetdx's own rules find in the real h100-busy bundle (GPU0 held by another process),
re-addressed to gpu01 as tests/test_place.py does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import RunKind, assemble_report
from fleetdx.orchestrator.scheduler.slurm_nodes import SchedulerUnavailable
from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from fleetdx.probes.catalog import TOPO_FILE
from fleetdx.probes.contracts import Level, Severity
from fleetdx.probes.parsers.slurm_nodes import SlurmNode, parse_scontrol_nodes
from fleetdx.topology.cluster import ClusterIndex, parse_topology_conf
from tests.test_place import busy_findings

pytest_plugins = ["tests.pgfixtures"]

FIX = Path(__file__).parent / "fixtures"
PLACE = FIX / "placement"
IDLE_TOPO = (FIX / "bundles" / "h100-idle" / TOPO_FILE).read_text(encoding="utf-8")
NODES = parse_scontrol_nodes((PLACE / "scontrol_show_node.txt").read_text(encoding="utf-8"))
TREE = ClusterIndex(parse_topology_conf((PLACE / "scontrol_show_topology.txt").read_text(encoding="utf-8")))


def slurm() -> list[SlurmNode]:
    return NODES


def upload(started: float, findings: list[Finding], hosts: list[str]) -> dict[str, Any]:
    report = assemble_report(RunKind.PREFLIGHT, hosts, findings, started_at=started, level=Level.QUICK)
    return {"report": report.model_dump(mode="json"), "raw": {h: {TOPO_FILE: IDLE_TOPO} for h in hosts}}


@pytest.fixture
def client(store: Store) -> TestClient:
    token = create_token(store, "prolog", TokenScope.WRITE).token
    app = create_app(store, cluster=TREE, scheduler_nodes=slurm)
    return TestClient(app, headers={"Authorization": f"Bearer {token}"})


def placed(answer: dict[str, Any]) -> list[str]:
    return [n["host"] for n in answer["nodes"]]


def test_a_critical_node_pushed_to_the_service_is_never_placed_until_a_clean_preflight(client: TestClient) -> None:
    now = time.time()
    assert (
        client.post("/reports", json=upload(now - 600, busy_findings("gpu01"), ["gpu01", "gpu04"])).status_code == 201
    )
    one = client.get("/placement", params={"nodes": 1, "gpus_per_node": 1})
    assert one.status_code == 200 and one.json()["placed"] and placed(one.json()) == ["gpu04"]
    why = {x["host"]: x for x in one.json()["excluded"]}
    assert why["gpu01"]["stage"] == "health" and "GPU_FOREIGN_PROCESS" in why["gpu01"]["codes"]
    assert why["gpu02"]["stage"] == "scheduler" and why["gpu06"]["stage"] == "scheduler"  # drained, down
    two = client.get("/placement", params={"nodes": 2, "gpus_per_node": 1})
    assert two.status_code == 200 and not two.json()["placed"] and two.json()["exit_code"] == 2

    assert client.post("/reports", json=upload(now - 60, [], ["gpu01", "gpu04"])).status_code == 201
    again = client.get("/placement", params={"nodes": 2, "gpus_per_node": 1})
    assert again.json()["placed"] and placed(again.json()) == ["gpu01", "gpu04"]
    assert again.json()["slurm"]["argv"][:2] == ["--nodes=2", "--nodelist=gpu[01,04]"]
    body = client.post("/placement", json={"nodes": 2, "gpus_per_node": 1})
    assert body.status_code == 200 and placed(body.json()) == ["gpu01", "gpu04"]


def test_request_filters_through_the_query(client: TestClient) -> None:
    a = client.get("/placement", params=[("nodes", 1), ("gpus_per_node", 1), ("exclude", "gpu01")])
    assert placed(a.json()) == ["gpu04"]
    assert {x["host"]: x["stage"] for x in a.json()["excluded"]}["gpu01"] == "request"
    c = client.get("/placement", params={"nodes": 1, "gpus_per_node": 1, "exclude": "gpu[01,04]"})
    assert not c.json()["placed"] and {x["host"] for x in c.json()["excluded"] if x["stage"] == "request"} == {
        "gpu01",
        "gpu04",
    }
    b = client.get("/placement", params={"nodes": 1, "gpus_per_node": 1, "hostlist": "gpu[02,04]"})
    assert placed(b.json()) == ["gpu04"]


@pytest.mark.parametrize(
    "params,reason",
    [
        ({"nodes": 1, "gpus_per_node": 1, "hostlist": "gpu[01-"}, "bad hostlist"),
        ({"nodes": 0, "gpus_per_node": 1}, "nodes"),
        ({"gpus_per_node": 1}, "nodes"),
        ({"nodes": 1, "gpus_per_node": 1, "exclude": "a\x00b"}, "not a host name"),
        ({"nodes": 1, "gpus_per_node": 1, "exclude": "gpu[01-"}, "exclude: bad hostlist"),
        ({"nodes": 1, "gpus_per_node": 1, "partition": "p\x00"}, "partition"),
    ],
)
def test_bad_placement_requests_are_422_with_a_reason(client: TestClient, params: dict[str, Any], reason: str) -> None:
    r = client.get("/placement", params=params)
    assert r.status_code == 422 and reason in r.text, r.text


def test_post_body_is_checked_too(client: TestClient) -> None:
    assert client.post("/placement", json={"nodes": 1, "gpus_per_node": 1, "extra": 1}).status_code == 422
    assert client.post("/placement", content=b"{", headers={"Content-Type": "application/json"}).status_code == 422


def test_without_a_scheduler_the_hostlist_is_needed(store: Store) -> None:
    client = TestClient(create_app(store))
    r = client.get("/placement", params={"nodes": 1, "gpus_per_node": 1})
    assert r.status_code == 422 and "no candidates" in r.json()["detail"]
    ok = client.get("/placement", params={"nodes": 1, "gpus_per_node": 1, "hostlist": "gpu01"})
    assert ok.status_code == 200 and ok.json()["source"] == "hostlist"


def test_slurm_not_answering_is_503_with_the_reason(store: Store) -> None:
    def down() -> list[SlurmNode]:
        raise SchedulerUnavailable("scontrol show node --oneliner: failed: slurm_load_node: Unable to contact")

    r = TestClient(create_app(store, scheduler_nodes=down)).get("/placement", params={"nodes": 1, "gpus_per_node": 1})
    assert r.status_code == 503 and "Unable to contact" in r.json()["detail"]


def test_an_unchanged_answer_is_reused_and_a_new_report_is_seen(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """orchestrator/service/placement_cache.py: the same query twice computes once; a pushed report (a new run)
    makes the next query compute again; a cache of 0 s computes every time."""
    from fleetdx.orchestrator.service import api

    calls: list[int] = []
    real = api.place

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "place", counting)
    token = create_token(store, "prolog", TokenScope.WRITE).token
    client = TestClient(create_app(store, cluster=TREE, scheduler_nodes=slurm),
                        headers={"Authorization": f"Bearer {token}"})
    q = {"nodes": 1, "gpus_per_node": 1}
    first, second = client.get("/placement", params=q).json(), client.get("/placement", params=q).json()
    assert first == second and len(calls) == 1
    assert client.post("/reports", json=upload(time.time() - 60, [], ["gpu01"])).status_code == 201
    client.get("/placement", params=q)
    assert len(calls) == 2
    uncached = TestClient(create_app(store, cluster=TREE, scheduler_nodes=slurm, placement_cache_s=0),
                          headers={"Authorization": f"Bearer {token}"})
    uncached.get("/placement", params=q)
    uncached.get("/placement", params=q)
    assert len(calls) == 4


def test_distinct_queries_share_one_snapshot_and_answer_as_without_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """orchestrator/service/placement_cache.py SnapshotKeeper: distinct queries (other node counts, exclude
    lists) read the store's health once per store state, answer exactly as a service without caching does,
    and a pushed report (a new run) is seen by the next query."""
    from fleetdx.orchestrator.placement import snapshot

    reads: list[int] = []
    real = snapshot.node_health

    def counting(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshot, "node_health", counting)
    token = create_token(store, "prolog", TokenScope.WRITE).token
    auth = {"Authorization": f"Bearer {token}"}
    client = TestClient(create_app(store, cluster=TREE, scheduler_nodes=slurm), headers=auth)
    plain = TestClient(create_app(store, cluster=TREE, scheduler_nodes=slurm, placement_cache_s=0), headers=auth)
    now = time.time()
    pushed = client.post("/reports", json=upload(now - 600, busy_findings("gpu01"), ["gpu01", "gpu04"]))
    assert pushed.status_code == 201
    queries = [
        [("nodes", 1), ("gpus_per_node", 1)],
        [("nodes", 1), ("gpus_per_node", 1), ("exclude", "gpu04")],
        [("nodes", 2), ("gpus_per_node", 1)],
        [("nodes", 1), ("gpus_per_node", 2), ("exclude", "gpu01")],
    ]
    answers = [client.get("/placement", params=q).json() for q in queries]
    assert len(reads) == 1  # four distinct questions, one read of the store's health
    assert placed(answers[0]) == ["gpu04"] and not answers[1]["placed"]
    calls_before = len(reads)
    assert answers == [plain.get("/placement", params=q).json() for q in queries]
    assert len(reads) == calls_before  # the uncached service reads through place() itself, not a snapshot
    # gpu04 turns CRITICAL (a pushed report): the next distinct question knows it
    bad = Finding(
        code=FindingCode.NODE_UNREACHABLE,
        severity=Severity.CRITICAL,
        nodes=["gpu04"],
        subject="gpu04",
        message="no answer (test finding)",
    )
    assert client.post("/reports", json=upload(now - 60, [bad], ["gpu04"])).status_code == 201
    after = client.get("/placement", params=[("nodes", 1), ("gpus_per_node", 1), ("exclude", "gpu03")]).json()
    assert not after["placed"] and {x["host"]: x["stage"] for x in after["excluded"]}["gpu04"] == "health"
    assert len(reads) == 2


def test_snapshot_keeper_advances_on_new_runs_and_renews_by_age_off_the_request_path(store: Store) -> None:
    """SnapshotKeeper: the same snapshot while young; a new run advances it (only the hosts the new runs name
    are read again); past ``ttl_s`` the kept one answers while a renewal (here run at once, in place of the
    daemon thread) judges the same hosts at a later instant; past ``2 * ttl_s`` a new one; a failed renewal
    drops the snapshot so the next query reads the store itself."""
    from fleetdx.orchestrator.placement.policy import judge
    from fleetdx.orchestrator.service.placement_cache import SnapshotKeeper
    from fleetdx.orchestrator.store.node_health import node_health

    now = time.time()
    busy = busy_findings("gpu01")
    report = assemble_report(RunKind.PREFLIGHT, ["gpu01", "gpu04"], busy, started_at=now - 60, level=Level.QUICK)
    assert store.save_report(report, raw={"gpu01": {TOPO_FILE: IDLE_TOPO}})
    clock = [100.0]
    spawned: list[int] = []

    def spawn(work: Any) -> None:
        spawned.append(1)
        work()

    keeper = SnapshotKeeper(5.0, clock=lambda: clock[0], spawn=spawn)
    gen = store.newest_run_pk()
    first = keeper.get(store, gen)
    assert first is not None and keeper.get(store, gen) is first
    assert not first.judgements(["gpu01", "gpu04"])["gpu01"].fit
    assert TOPO_FILE in first.raw(["gpu01"], [TOPO_FILE])["gpu01"]

    # a clean pre-flight of gpu01 is pushed: the next query's snapshot re-reads gpu01 only, and sees it clean
    clean = assemble_report(RunKind.PREFLIGHT, ["gpu01"], [], started_at=now - 30, level=Level.QUICK)
    assert store.save_report(clean)
    gen = store.newest_run_pk()
    moved = keeper.get(store, gen)
    assert moved is not None and moved is not first and keeper.advanced == 1 and keeper.made == 1
    assert moved.now == first.now and moved._judged.keys() == {"gpu04"} and moved._raw_files.keys() == set()
    t = moved.now
    fresh = node_health(store, ["gpu01", "gpu04"], open_since=t - 7 * 86400.0, history_since=t - 30 * 86400.0)
    got = moved.judgements(["gpu01", "gpu04"])
    assert got["gpu01"].fit and got == {h: judge(fresh[h], h) for h in ("gpu01", "gpu04")}
    assert moved.raw(["gpu01"], [TOPO_FILE]) == {"gpu01": {TOPO_FILE: IDLE_TOPO}}  # read again: still the first run's
    assert keeper.get(store, gen) is moved and keeper.get(store, (gen or 0) - 1) is moved  # newer than asked: kept

    clock[0] += 6.0  # past ttl_s: this query still gets the kept one, the renewal replaces it
    assert keeper.get(store, gen) is moved and spawned == [1] and keeper.renewed == 1
    second = keeper.get(store, gen)
    assert second is not None and second is not moved and second.now >= moved.now and second.generation == gen
    assert second._judged.keys() == {"gpu01", "gpu04"} and second._raw_files.keys() == {"gpu01"}  # read ahead
    assert second.judgements(["gpu01", "gpu04"]) == moved.judgements(["gpu01", "gpu04"])
    clock[0] += 11.0  # past 2 * ttl_s: a new one on the request path, no renewal
    third = keeper.get(store, gen)
    assert third is not second and spawned == [1] and keeper.made == 2

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("database went away")

    third.renewed = fail  # type: ignore[method-assign,union-attr]
    clock[0] += 6.0  # a renewal that fails drops the snapshot: the next query reads on its own path
    assert keeper.get(store, gen) is third and len(spawned) == 2
    after = keeper.get(store, gen)
    assert after is not third and keeper.made == 3
    assert SnapshotKeeper(0).get(store, gen) is None  # --placement-cache 0: no snapshot


def test_an_answer_carries_its_etag_and_a_client_holding_it_gets_304(client: TestClient) -> None:
    """Issue 22 item 6: an answer is sent as the bytes encoded once (the cached answer is not serialised again)
    with a strong ETag; ``If-None-Match`` naming it (or ``*``, or a weak form of it in a list) is a 304 without
    a body, for GET and POST alike; a pushed report that changes the answer changes the tag."""
    q = {"nodes": 1, "gpus_per_node": 1}
    first = client.get("/placement", params=q)
    tag = first.headers["etag"]
    assert first.status_code == 200 and first.headers["content-type"] == "application/json"
    assert tag.startswith('"') and tag.endswith('"') and first.headers["cache-control"] == "no-cache"
    again = client.get("/placement", params=q, headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == tag
    assert client.get("/placement", params=q, headers={"If-None-Match": '"other"'}).json() == first.json()
    assert client.get("/placement", params=q, headers={"If-None-Match": "*"}).status_code == 304
    body = client.post("/placement", json=q, headers={"If-None-Match": f'"other", W/{tag}'})
    assert body.status_code == 304 and body.headers["etag"] == tag
    assert client.post("/reports", json=upload(time.time() - 60, busy_findings("gpu01"), ["gpu01"])).status_code == 201
    changed = client.get("/placement", params=q, headers={"If-None-Match": tag})
    assert changed.status_code == 200 and changed.json() != first.json() and changed.headers["etag"] != tag


def test_concurrent_generation_reads_are_shared_and_never_older_than_the_request() -> None:
    """placement_cache.Coalesced: the store generation read while queries wait is shared by them (11 callers,
    2 reads), and a caller that arrived after a read began waits for the next one (a run stored meanwhile is
    seen: it never gets the older value)."""
    import asyncio
    import threading

    from fleetdx.orchestrator.service.placement_cache import Coalesced

    stored = [0]
    reads: list[int] = []
    gate = threading.Event()

    def read() -> int:
        value = stored[0]  # what the database holds when the query starts
        reads.append(value)
        gate.wait(30)
        return value

    shared = Coalesced(read)

    async def main() -> tuple[int, list[int]]:
        first = asyncio.ensure_future(shared.get())
        for _ in range(3000):  # until the first read has begun (in the thread pool)
            if reads:
                break
            await asyncio.sleep(0.01)
        stored[0] = 1  # a run stored after the first read began
        later = [asyncio.ensure_future(shared.get()) for _ in range(10)]
        await asyncio.sleep(0)
        gate.set()
        return await first, list(await asyncio.gather(*later))

    first, later = asyncio.run(main())
    assert first == 0 and later == [1] * 10
    assert reads == [0, 1] and shared.reads == 2
