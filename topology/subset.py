"""Best ``k``-GPU subset of one node for a ``k``-GPU job: exact, by link-rank thresholds and branch-and-bound.

Objective, compared lexicographically (higher is better):

1. the weakest pairwise GPU link of the subset (:func:`fleetdx.topology.links.link_rank`: NV18 > NV12 > PIX > ... >
   SYS);
2. NIC locality: the worst nearest-NIC class over the subset's GPUs, then the sum of nearest-NIC ranks
   (a node without NICs scores every subset equal here);
3. among equal subsets, the first in ``itertools.combinations`` order of the GPU rows (deterministic).

Method: for each distinct link rank ``t``, strongest first, the subsets whose weakest link is ``>= t`` are the
``k``-cliques of the graph with edges ``rank >= t``; the first ``t`` with a ``k``-clique is the optimal
weakest link (every ``k``-clique there has weakest link exactly ``t``). Within that graph a depth-first clique
search in index order maximises the NIC score with the bound (min of weights, sum of the best remaining
weights); visiting in combinations order and replacing only on strict improvement yields the first optimal
subset. Tests check it against brute force over ``itertools.combinations``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from fleetdx.probes.errors import FleetdxError
from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.topology.analyses import link_between, nearest_nics
from fleetdx.topology.contracts import SubsetChoice
from fleetdx.topology.links import link_from_rank, parse_link

#: rank given to a GPU pair whose cell the matrix lacks: below SYS, never mistaken for a usable link
UNKNOWN_RANK = -1

Score = tuple[int, int]  # (worst nearest-NIC rank, sum of nearest-NIC ranks)


class SubsetError(FleetdxError):
    """``k`` is not between 1 and the node's GPU count."""


class NotEnoughGpus(SubsetError):
    """Fewer than ``k`` GPUs are left once the unhealthy ones are excluded: a node that cannot host the job,
    not a usage error. ``healthy`` lists the GPUs left, ``total`` is the node's GPU count."""

    def __init__(self, k: int, healthy: list[str], total: int) -> None:
        self.k, self.healthy, self.total = k, healthy, total
        super().__init__(f"only {len(healthy)} of {total} GPUs are healthy, {k} needed")


def rank_matrix(topo: TopoMatrix) -> list[list[int]]:
    """``R[i][j]``: link rank between GPU rows ``i`` and ``j`` (the weaker cell if the two disagree)."""
    names = topo.gpu_names
    n = len(names)
    r = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            ab, ba = link_between(topo, names[i], names[j]), link_between(topo, names[j], names[i])
            ranks = [lk.rank for lk in (ab, ba) if lk is not None]
            r[i][j] = r[j][i] = min(ranks) if ranks else UNKNOWN_RANK
    return r


def nic_weights(topo: TopoMatrix) -> list[int]:
    """Per GPU row, the rank of its nearest NIC's link class; ``0`` for every GPU of a node without NICs."""
    nearest = nearest_nics(topo)
    return [parse_link(c.link).rank if (c := nearest.get(g)) and c.link else 0 for g in topo.gpu_names]


class _Search:
    """Best NIC score over the ``k``-cliques of one threshold graph (adjacency as bitmasks)."""

    def __init__(self, adj: list[int], weights: Sequence[int], k: int) -> None:
        self.adj, self.w, self.k = adj, weights, k
        self.best: Score | None = None
        self.best_set: list[int] = []
        self.ties = 0

    def run(self, count_ties: bool) -> None:
        self.count_ties = count_ties
        self._dfs([], (1 << len(self.adj)) - 1, 10**6, 0)

    def _bound(self, cand: int, need: int, cur_min: int, cur_sum: int) -> Score:
        ws = sorted((self.w[i] for i in range(len(self.adj)) if cand >> i & 1), reverse=True)[:need]
        return (min(cur_min, ws[0]), cur_sum + sum(ws))

    def _dfs(self, chosen: list[int], cand: int, cur_min: int, cur_sum: int) -> None:
        need = self.k - len(chosen)
        if need == 0:
            score = (cur_min, cur_sum)
            if self.best is None or score > self.best:
                self.best, self.best_set, self.ties = score, list(chosen), 0
            elif score == self.best:
                self.ties += 1
            return
        if cand.bit_count() < need:
            return
        if self.best is not None:
            bound = self._bound(cand, need, cur_min, cur_sum)
            if bound < self.best or (bound == self.best and not self.count_ties):
                return
        while cand:
            low = cand & -cand
            v = low.bit_length() - 1
            cand ^= low
            if cand.bit_count() + 1 < need:
                return
            chosen.append(v)
            self._dfs(chosen, cand & self.adj[v], min(cur_min, self.w[v]), cur_sum + self.w[v])
            chosen.pop()


def best_subset_indices(
    ranks: Sequence[Sequence[int]], weights: Sequence[int], k: int, count_ties: bool = True
) -> tuple[list[int], int | None, int]:
    """Core search on plain integers: (chosen row indices ascending, weakest link rank or None for k=1, ties).

    ``ties`` counts the other subsets with the same objective (only when ``count_ties``).

    Raises:
        SubsetError: ``k`` outside ``1..len(weights)``.
    """
    n = len(weights)
    if not 1 <= k <= n:
        raise SubsetError(f"cannot choose {k} GPUs on a node with {n}")
    thresholds = (
        sorted({ranks[i][j] for i in range(n) for j in range(i + 1, n)}, reverse=True) if k > 1 else [None]
    )
    for t in thresholds:
        adj = [sum(1 << j for j in range(n) if j != i and (t is None or ranks[i][j] >= t)) for i in range(n)]
        search = _Search(adj, weights, k)
        search.run(count_ties)
        if search.best is not None:
            return search.best_set, t, search.ties
    raise AssertionError("unreachable: the lowest threshold admits every subset")


def best_subset(topo: TopoMatrix, k: int, exclude: Collection[str] = ()) -> SubsetChoice:
    """The best ``k`` GPUs of ``topo`` that are not in ``exclude`` (see the module docstring for the
    objective). The search is the same exact one, run over the remaining GPU rows only, so the result is the
    best subset of the remaining GPUs (ties broken in ``combinations`` order of the remaining rows).

    Raises:
        SubsetError: ``k`` outside ``1..number of GPUs``.
        NotEnoughGpus: ``k`` is at most the GPU count but more than the GPUs left after ``exclude``.
    """
    all_names = topo.gpu_names
    if not 1 <= k <= len(all_names):
        raise SubsetError(f"cannot choose {k} GPUs on a node with {len(all_names)}")
    keep = [i for i, g in enumerate(all_names) if g not in exclude]
    if len(keep) < k:
        raise NotEnoughGpus(k, [all_names[i] for i in keep], len(all_names))
    full = rank_matrix(topo)
    all_weights = nic_weights(topo)
    ranks = [[full[i][j] for j in keep] for i in keep]
    weights = [all_weights[i] for i in keep]
    idx, t, ties = best_subset_indices(ranks, weights, k)
    nearest = nearest_nics(topo)
    names = [all_names[i] for i in keep]
    return SubsetChoice(
        gpus=[names[i] for i in idx],
        min_link=None if t is None or t == UNKNOWN_RANK else str(link_from_rank(t)),
        nic_links=[c.link if (c := nearest.get(names[i])) else None for i in idx],
        ties=ties,
    )
