"""Fleet consistency: one node's matrix against the majority matrix of its peers.

Peers are comparable when they have the same GPU rows and the same NIC names (the same GPU count and device
naming: the caller groups by GPU model beforehand, e.g. from nvidia-smi's product name). For each cell the
majority value must be held by more than half of the comparable peers, and at least two peers are needed: with
one peer there is no telling which node is the odd one.

Comparing every node of a fleet with all its peers through :func:`compare_to_peers` costs O(nodes²) cells; a
fleet-wide caller groups the matrices by :func:`layout_key` and counts each group's cells once
(:class:`CellCounts`), then each node's peer majority is the group's counts less the node's own matrix, in
O(cells) per node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import combinations

from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.topology.contracts import CellDiff, PeerComparison

MIN_PEERS = 2

CellKey = tuple[str, str]
LayoutKey = tuple[tuple[str, ...], frozenset[str]]


@lru_cache(maxsize=1 << 14)
def _key(a: str, b: str) -> CellKey:
    """A cell's key independent of column order: GPUs before NICs, then by name. Cached: a fleet's matrices
    name the same few devices."""
    x, y = sorted((a, b), key=lambda n: (not n.startswith("GPU"), len(n), n))
    return x, y


def layout_key(topo: TopoMatrix) -> LayoutKey:
    """What makes two matrices comparable: the GPU rows (in order) and the set of NIC names."""
    return tuple(topo.gpu_names), frozenset(topo.nic_names)


def _cells(topo: TopoMatrix) -> Iterator[tuple[CellKey, str]]:
    """(cell key, link class) of every cell of ``topo`` (each device pair once)."""
    for a, b in combinations(topo.gpu_names + topo.nic_names, 2):
        cell = topo.links.get(a, {}).get(b)
        if cell is not None:
            yield _key(a, b), cell


def comparable_peers(topo: TopoMatrix, peers: Sequence[TopoMatrix]) -> list[TopoMatrix]:
    """Peers with the same GPU rows and the same set of NIC names as ``topo``."""
    sig = layout_key(topo)
    return [p for p in peers if layout_key(p) == sig]


class CellCounts:
    """How many of a group of matrices hold each link class in each cell, counted once; the majority matrix
    of the group, or of the group less a few of its members (a node's peers: the group less the node), is
    then read in O(cells) instead of O(members x cells)."""

    def __init__(self, topos: Iterable[TopoMatrix] = ()) -> None:
        self.size = 0
        self.cells: dict[CellKey, Counter[str]] = {}
        for topo in topos:
            self.add(topo)

    def add(self, topo: TopoMatrix) -> None:
        self.size += 1
        cells = self.cells
        for key, cell in _cells(topo):
            counts = cells.get(key)
            if counts is None:
                counts = cells[key] = Counter()
            counts[cell] += 1

    @classmethod
    def union(cls, parts: Iterable[CellCounts]) -> CellCounts:
        """The counts of all the matrices counted in ``parts``."""
        out = cls()
        for part in parts:
            out.size += part.size
            for key, counts in part.cells.items():
                out.cells.setdefault(key, Counter()).update(counts)
        return out

    def majority(self, leave_out: Sequence[TopoMatrix] = ()) -> dict[CellKey, tuple[str, int]]:
        """:func:`majority_matrix` of the counted matrices less ``leave_out`` (which must have been counted)."""
        size = self.size - len(leave_out)
        less: dict[tuple[CellKey, str], int] = {}  # (cell, link class) -> how many of leave_out hold it
        for topo in leave_out:
            for key_cell in _cells(topo):
                less[key_cell] = less.get(key_cell, 0) + 1
        out: dict[CellKey, tuple[str, int]] = {}
        for key, counts in self.cells.items():
            for value, n in counts.items():
                if less:
                    n -= less.get((key, value), 0)
                if 2 * n > size:  # at most one value holds more than half
                    out[key] = (value, n)
                    break
        return out


def majority_matrix(peers: Sequence[TopoMatrix]) -> dict[CellKey, tuple[str, int]]:
    """``(a, b) -> (majority class, count)`` for every cell held by more than half of ``peers``."""
    return CellCounts(peers).majority()


def compare_to_majority(
    topo: TopoMatrix, majority: dict[CellKey, tuple[str, int]], peers: int
) -> PeerComparison:
    """Cells where ``topo`` differs from ``majority``, the majority matrix of its ``peers`` comparable peers
    (none with under :data:`MIN_PEERS` peers)."""
    if peers < MIN_PEERS:
        return PeerComparison(peers=peers, diffs=[])
    order = {name: i for i, name in enumerate(topo.gpu_names + topo.nic_names)}
    diffs: list[CellDiff] = []
    for (a, b), (value, n) in majority.items():
        here = topo.links.get(a, {}).get(b)
        if here != value:
            diffs.append(CellDiff(a=a, b=b, here=here, majority=value, majority_count=n, peers=peers))
    diffs.sort(key=lambda d: (order.get(d.a, 1 << 30), order.get(d.b, 1 << 30)))
    return PeerComparison(peers=peers, diffs=diffs)


def compare_to_peers(topo: TopoMatrix, peers: Sequence[TopoMatrix]) -> PeerComparison:
    """Cells where ``topo`` differs from the majority of its comparable peers (none with under 2 peers)."""
    same = comparable_peers(topo, peers)
    if len(same) < MIN_PEERS:
        return PeerComparison(peers=len(same), diffs=[])
    return compare_to_majority(topo, majority_matrix(same), len(same))
