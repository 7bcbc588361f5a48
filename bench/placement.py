"""Placement query speed: ``place()`` over a fleet of 1,000 nodes x 8 GPUs with 30 days of history.

Run from the repository root: ``python bench/placement.py [--nodes 1000] [--queries 50] [--db URL]``.

The fleet is synthetic (named so in every host and run id): 1,000 nodes ``sim-nNNNN`` under 32-node leaves, 4
leaves per spine, one core; every node has the real ``topo -m`` of an HGX A100 (tests/fixtures/topo/03_...)
stored with each of its pre-flights. History: pre-flights of 16 nodes each, about 10 per node over 30 days,
one node in 20 CRITICAL once (a foreign process on GPU3), and bandwidth runs naming a straggler now and then;
the last pre-flight of some nodes is CRITICAL, so they must be excluded. Prints the store build time, then
p50/p99 of ``place()`` (16 nodes x 8 GPUs from a 1,000-node hostlist) and of its store queries alone; then
distinct queries (1-16 nodes x 1-8 GPUs, each excluding another node), each answered from the store as a
query without a snapshot is, and from one kept :class:`HealthSnapshot` (as ``fleetdx serve`` keeps one per
worker): p50/p99 wall and CPU time per query, the snapshot's first (filling) query apart, the answers
compared (they must be equal).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fleetdx.orchestrator.judgement import Finding, FindingCode  # noqa: E402
from fleetdx.orchestrator.placement.contracts import PlacementRequest  # noqa: E402
from fleetdx.orchestrator.placement.job import place  # noqa: E402
from fleetdx.orchestrator.placement.snapshot import HealthSnapshot  # noqa: E402
from fleetdx.orchestrator.report import RunKind, assemble_report  # noqa: E402
from fleetdx.orchestrator.store import Store  # noqa: E402
from fleetdx.orchestrator.store.node_health import node_health  # noqa: E402
from fleetdx.probes.catalog import TOPO_FILE  # noqa: E402
from fleetdx.probes.contracts import Level, Severity  # noqa: E402
from fleetdx.topology.cluster import ClusterIndex, from_switch_map  # noqa: E402

A100 = ROOT / "tests" / "fixtures" / "topo" / "03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt"
DAY = 86_400.0


def host(i: int) -> str:
    return f"sim-n{i:04d}"


def build(store: Store, n: int, now: float, rng: random.Random) -> None:
    topo = A100.read_text(encoding="utf-8")
    hosts = [host(i) for i in range(n)]
    runs = n * 10 // 16
    for r in range(runs):
        started = now - 30 * DAY + r * (30 * DAY / runs)
        members = rng.sample(hosts, 16)
        findings = []
        if rng.random() < 0.8:
            bad = members[0]
            findings.append(
                Finding(
                    code=FindingCode.GPU_FOREIGN_PROCESS,
                    severity=Severity.CRITICAL,
                    nodes=[bad],
                    subject="GPU3",
                    message="pid 4242 (python3) holds GPU3 with 20000 MiB (synthetic bench finding)",
                )
            )
        report = assemble_report(
            RunKind.PREFLIGHT, members, findings, started_at=started, level=Level.QUICK, run_id=f"sim-bench-{r:05d}"
        )
        store.save_report(report, raw={h: {TOPO_FILE: topo} for h in members})
        if r % 10 == 0:
            pair = rng.sample(hosts, 4)
            strag = Finding(
                code=FindingCode.STRAGGLER_NODE,
                severity=Severity.WARNING,
                nodes=[pair[0]],
                subject=pair[0],
                message="synthetic straggler (bench)",
            )
            bw = assemble_report(RunKind.BANDWIDTH, pair, [strag], started_at=started + 1, run_id=f"sim-bw-{r:05d}")
            store.save_report(bw)


def cluster(n: int) -> ClusterIndex:
    leaves = [
        {"name": f"leaf{j}", "nodes": [host(i) for i in range(j * 32, min(n, (j + 1) * 32))]}
        for j in range((n + 31) // 32)
    ]
    spines = [
        {"name": f"spine{k}", "switches": [f"leaf{j}" for j in range(k * 4, min(len(leaves), (k + 1) * 4))]}
        for k in range((len(leaves) + 3) // 4)
    ]
    core = [{"name": "core", "switches": [s["name"] for s in spines]}]
    return ClusterIndex(from_switch_map({"switches": leaves + spines + core}))


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def distinct(store: Store, idx: ClusterIndex, nodes: int, n: int, now: float) -> None:
    """Distinct queries answered from the store per query, then from one kept snapshot (see the module doc)."""
    reqs = [
        PlacementRequest(
            nodes=1 + i % 16,
            gpus_per_node=1 << (i // 16) % 4,
            hostlist=f"sim-n[0000-{nodes - 1:04d}]",
            exclude=[host((i * 7) % nodes)],
        )
        for i in range(n)
    ]
    per_query: list[tuple[float, float]] = []
    answers = []
    for r in reqs:
        t, c = time.perf_counter(), time.process_time()
        answers.append(place(r, store=store, cluster=idx, now=now))
        per_query.append(((time.perf_counter() - t) * 1e3, (time.process_time() - c) * 1e3))
    snap = HealthSnapshot(store, now=now)
    kept: list[tuple[float, float]] = []
    for r, want in zip(reqs, answers, strict=True):
        t, c = time.perf_counter(), time.process_time()
        got = place(r, store=store, cluster=idx, snapshot=snap)
        kept.append(((time.perf_counter() - t) * 1e3, (time.process_time() - c) * 1e3))
        assert got == want, r
    for label, xs in (("from the store per query", per_query), ("from a kept snapshot, after its first", kept[1:])):
        wall, cpu = [x[0] for x in xs], [x[1] for x in xs]
        print(
            f"distinct queries (1-16 nodes x 1-8 GPUs, one node excluded each), {label}: wall p50 "
            f"{statistics.median(wall):.2f} ms, p99 {pct(wall, 0.99):.2f} ms; CPU p50 {statistics.median(cpu):.2f} ms, "
            f"p99 {pct(cpu, 0.99):.2f} ms ({len(xs)} queries)"
        )
    print(
        f"  the snapshot's first query (reads {nodes} hosts' health): {kept[0][0]:.1f} ms wall, "
        f"{kept[0][1]:.1f} ms CPU; ratio of CPU p50 per query, store / snapshot: "
        f"{statistics.median(x[1] for x in per_query) / statistics.median(x[1] for x in kept[1:]):.0f}x; "
        f"answers equal: {len(reqs)} of {len(reqs)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--db", default=None, help="database URL (default: a fresh SQLite file)")
    a = ap.parse_args()
    rng = random.Random(14)
    now = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        url = a.db or f"sqlite:///{tmp}/bench.db"
        with Store.open(url) as store:
            t0 = time.perf_counter()
            build(store, a.nodes, now, rng)
            print(f"store: {a.nodes} nodes, history built in {time.perf_counter() - t0:.1f} s ({store.url})")
            idx = cluster(a.nodes)
            hostlist = f"sim-n[0000-{a.nodes - 1:04d}]"
            req = PlacementRequest(nodes=16, gpus_per_node=8, hostlist=hostlist)
            hosts = [host(i) for i in range(a.nodes)]
            place(req, store=store, cluster=idx, now=now)  # warm-up
            full, query, cpu = [], [], []
            for _ in range(a.queries):
                t, c = time.perf_counter(), time.process_time()
                ans = place(req, store=store, cluster=idx, now=now)
                full.append((time.perf_counter() - t) * 1e3)
                cpu.append((time.process_time() - c) * 1e3)
                t = time.perf_counter()
                node_health(store, hosts, open_since=now - 7 * DAY, history_since=now - 30 * DAY)
                query.append((time.perf_counter() - t) * 1e3)
            assert ans.placed, ans.reasons
            print(f"answer: {ans.slurm.nodelist if ans.slurm else '-'}; {len(ans.excluded)} nodes excluded")
            print(
                f"place() 16 nodes x 8 GPUs of {a.nodes}: p50 {statistics.median(full):.1f} ms, "
                f"p99 {pct(full, 0.99):.1f} ms ({a.queries} queries, sequential)"
            )
            print(
                f"  CPU time of this process per place(): p50 {statistics.median(cpu):.1f} ms "
                "(less sensitive to the machine's load than wall time; SQLite runs in-process, "
                "PostgreSQL's work is not in it)"
            )
            print(
                f"  node_health() alone for {a.nodes} hosts: p50 {statistics.median(query):.1f} ms, "
                f"p99 {pct(query, 0.99):.1f} ms"
            )
            distinct(store, idx, a.nodes, a.queries, now)
            with open("/proc/loadavg", encoding="ascii") as f:
                print(f"load average during the run: {' '.join(f.read().split()[:3])} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
