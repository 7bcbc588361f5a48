"""Build TopoMatrix objects for topology tests (the real parser has its own tests on real outputs)."""

from __future__ import annotations

import random
from itertools import combinations

from fleetdx.probes.parsers.topo import TopoGpu, TopoMatrix, TopoNic
from fleetdx.topology.links import link_rank, parse_link
from fleetdx.topology.subset import best_subset

CLASSES = ["SYS", "NODE", "PHB", "PXB", "PIX"] + [f"NV{i}" for i in (1, 2, 4, 12, 17, 18)]


def make_topo(
    gpu_rows: list[str],
    nic_cols: list[str] | None = None,
    nic_names: list[str] | None = None,
    cpus: list[list[int]] | None = None,
    numa: list[list[int] | None] | None = None,
    cpu_raw: list[str | None] | None = None,
) -> TopoMatrix:
    """``gpu_rows[i]`` is row i of the GPU block, cells split on spaces (``X`` on the diagonal);
    ``nic_cols[i]`` the GPU i -> NIC cells. NIC-NIC cells are SYS."""
    grid = [r.split() for r in gpu_rows]
    n = len(grid)
    names = [f"GPU{i}" for i in range(n)]
    nics = nic_names or []
    ncells = [r.split() for r in (nic_cols or [])]
    links: dict[str, dict[str, str]] = {g: {} for g in names + nics}
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i != j:
                links[a][b] = grid[i][j]
        for j, nic in enumerate(nics):
            links[a][nic] = ncells[i][j]
            links[nic][a] = ncells[i][j]
    for x in nics:
        for y in nics:
            if x != y:
                links[x][y] = "SYS"
    gpus = [
        TopoGpu(
            name=g,
            cpu_affinity=(cpus[i] if cpus else []),
            cpu_affinity_raw=(cpu_raw[i] if cpu_raw else None),
            numa_affinity=(numa[i] if numa else None),
        )
        for i, g in enumerate(names)
    ]
    return TopoMatrix(gpus=gpus, nics=[TopoNic(name=x) for x in nics], links=links)


def uniform(n: int, cell: str) -> list[str]:
    """An all-to-all matrix: every GPU pair is ``cell``."""
    return [" ".join("X" if i == j else cell for j in range(n)) for i in range(n)]


def random_topo(rng: random.Random, n: int, n_nics: int) -> TopoMatrix:
    """A symmetric random matrix of n GPUs and n_nics NICs (classes drawn from a few ranks, so ties occur)."""
    pool = rng.sample(CLASSES, rng.randint(1, 4))
    grid = [["X"] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            grid[i][j] = grid[j][i] = rng.choice(pool)
    nic_pool = ["SYS", "NODE", "PHB", "PXB", "PIX"]
    nic_cols = [" ".join(rng.choice(nic_pool) for _ in range(n_nics)) for _ in range(n)]
    return make_topo(
        [" ".join(r) for r in grid],
        nic_cols=nic_cols if n_nics else None,
        nic_names=[f"mlx5_{i}" for i in range(n_nics)],
    )


def brute_force(topo: TopoMatrix, k: int) -> tuple[list[str], str | None, int]:
    """Reference: score every combination; the first of the best in combinations order wins."""
    gpus = topo.gpu_names
    rank = {(a, b): link_rank(parse_link(topo.links[a][b])) for a, b in combinations(gpus, 2)}
    nic = {g: max((link_rank(parse_link(topo.links[g][n])) for n in topo.nic_names), default=0) for g in gpus}

    def key(s: tuple[str, ...]) -> tuple[int, int, int]:
        weakest = min((rank[p] for p in combinations(s, 2)), default=10**6)
        return (weakest, min(nic[g] for g in s), sum(nic[g] for g in s))

    scored = [(key(s), s) for s in combinations(gpus, k)]
    best = max(k_ for k_, _ in scored)
    winners = [s for k_, s in scored if k_ == best]
    weakest = (
        None
        if k == 1
        else min(
            topo.links[a][b]
            for a, b in combinations(winners[0], 2)
            if link_rank(parse_link(topo.links[a][b])) == best[0]
        )
    )
    return list(winners[0]), weakest, len(winners) - 1


def check_against_brute_force(topo: TopoMatrix) -> None:
    """best_subset equals brute force for every k in 1..n."""
    for k in range(1, len(topo.gpus) + 1):
        got = best_subset(topo, k)
        want_gpus, want_link, want_ties = brute_force(topo, k)
        assert (got.gpus, got.ties) == (want_gpus, want_ties), k
        if want_link is not None:
            assert link_rank(parse_link(got.min_link or "")) == link_rank(parse_link(want_link))
        else:
            assert got.min_link is None
