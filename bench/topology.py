"""Benchmark of topology/: graph building, cluster placement queries and node advice at fleet scale.

Synthetic cluster: 1,000 nodes x 8 GPUs (HGX H100-like: NV18 all-to-all, one PXB NIC per GPU, two NUMA nodes),
a 3-level switch tree (leaves of 20 nodes, spines of 10 leaves, one core). Prints:

- time to build the cluster topology (parse of a generated topology.conf), its placement index and graph,
  and the 1,000 node graphs;
- one ``cluster`` placement query: p50/p99 over 1,000 random requests (1..128 nodes) with random exclusions
  (0-10 % of the nodes); target p99 < 10 ms on a 2-core machine;
- one node ``advise`` (random k in 1..8): p50/p99 over 1,000 calls.

Run: ``.venv/bin/python bench/topology.py [--seed N]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

from fleetdx.probes.parsers.topo import TopoGpu, TopoMatrix, TopoNic
from fleetdx.topology.binding import advise
from fleetdx.topology.cluster import ClusterIndex, cluster_graph, parse_topology_conf
from fleetdx.topology.node_graph import build_node_graph

T = TypeVar("T")
NODES, GPUS, LEAF, SPINE = 1000, 8, 20, 10
TARGET_P99_MS = 10.0


def synthetic_conf(nodes: int = NODES) -> str:
    """A 3-level topology.conf: node[0001-1000] in leaves of LEAF, spines of SPINE leaves, one core."""
    lines = []
    leaves = (nodes + LEAF - 1) // LEAF
    for i in range(leaves):
        lo, hi = i * LEAF + 1, min((i + 1) * LEAF, nodes)
        lines.append(f"SwitchName=leaf{i:03d} Nodes=node[{lo:04d}-{hi:04d}]")
    spines = (leaves + SPINE - 1) // SPINE
    for s in range(spines):
        lo, hi = s * SPINE, min((s + 1) * SPINE, leaves) - 1
        lines.append(f"SwitchName=spine{s:02d} Switches=leaf[{lo:03d}-{hi:03d}]")
    lines.append(f"SwitchName=core Switches=spine[00-{spines - 1:02d}]")
    return "\n".join(lines) + "\n"


def synthetic_node() -> TopoMatrix:
    """An 8-GPU NV18 node with mlx5_0..7, GPU i at PXB to mlx5_i, NODE within its socket, SYS across."""
    gpus = [f"GPU{i}" for i in range(GPUS)]
    nics = [f"mlx5_{i}" for i in range(GPUS)]
    links: dict[str, dict[str, str]] = {d: {} for d in gpus + nics}
    for i, a in enumerate(gpus):
        for j, b in enumerate(gpus):
            if i != j:
                links[a][b] = "NV18"
        for j, n in enumerate(nics):
            cell = "PXB" if i == j else ("NODE" if i // 4 == j // 4 else "SYS")
            links[a][n] = links[n][a] = cell
    for i, x in enumerate(nics):
        for j, y in enumerate(nics):
            if i != j:
                links[x][y] = "NODE" if i // 4 == j // 4 else "SYS"
    cpus = [list(range(0, 48)) + list(range(96, 144)), list(range(48, 96)) + list(range(144, 192))]
    return TopoMatrix(
        gpus=[TopoGpu(name=g, cpu_affinity=cpus[i // 4], numa_affinity=[i // 4]) for i, g in enumerate(gpus)],
        nics=[TopoNic(name=n) for n in nics],
        links=links,
    )


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def percentiles_ms(samples: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return q[49] * 1e3, q[98] * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=int, default=1000)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    conf = synthetic_conf()
    topo, t_parse = timed(lambda: parse_topology_conf(conf))
    index, t_index = timed(lambda: ClusterIndex(topo))
    graph, t_graph = timed(lambda: cluster_graph(topo))
    node = synthetic_node()
    _, t_nodes = timed(
        lambda: [build_node_graph(node, gpu_model="NVIDIA H100 80GB HBM3") for _ in range(NODES)]
    )
    print(
        f"cluster: {len(topo.nodes)} nodes, {len(topo.switches)} switches, "
        f"graph {graph.number_of_nodes()} vertices"
    )
    print(
        f"build: topology.conf parse {t_parse * 1e3:.1f} ms, placement index {t_index * 1e3:.1f} ms, "
        f"cluster graph {t_graph * 1e3:.1f} ms, {NODES} node graphs {t_nodes * 1e3:.0f} ms"
    )

    all_nodes = topo.nodes
    samples: list[float] = []
    for _ in range(args.queries):
        n = rng.randint(1, 128)
        exclude = rng.sample(all_nodes, rng.randint(0, len(all_nodes) // 10))
        t0 = time.perf_counter()
        p = index.place(n, exclude)
        samples.append(time.perf_counter() - t0)
        assert len(p.nodes) == n and not set(p.nodes) & set(exclude)
    p50, p99 = percentiles_ms(samples)
    verdict = "OK" if p99 < TARGET_P99_MS else "OVER TARGET"
    print(
        f"cluster placement: p50 {p50:.3f} ms, p99 {p99:.3f} ms over {args.queries} queries "
        f"(target p99 < {TARGET_P99_MS} ms: {verdict})"
    )

    adv_samples: list[float] = []
    for _ in range(args.queries):
        k = rng.randint(1, GPUS)
        _, dt = timed(lambda k=k: advise(node, k))  # type: ignore[misc]
        adv_samples.append(dt)
    a50, a99 = percentiles_ms(adv_samples)
    print(f"node advise (8 GPUs, 8 NICs, random k): p50 {a50:.3f} ms, p99 {a99:.3f} ms")


if __name__ == "__main__":
    main()
