"""Fleet consistency: one node's matrix against the majority matrix of its peers.

Peers are comparable when they have the same GPU rows and the same NIC names (the same GPU count and device
naming: the caller groups by GPU model beforehand, e.g. from nvidia-smi's product name). For each cell the
majority value must be held by more than half of the comparable peers, and at least two peers are needed: with
one peer there is no telling which node is the odd one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import combinations

from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.topology.contracts import CellDiff, PeerComparison

MIN_PEERS = 2


def _key(a: str, b: str) -> tuple[str, str]:
    """A cell's key independent of column order: GPUs before NICs, then by name."""
    x, y = sorted((a, b), key=lambda n: (not n.startswith("GPU"), len(n), n))
    return x, y


def _signature(topo: TopoMatrix) -> tuple[tuple[str, ...], frozenset[str]]:
    return tuple(topo.gpu_names), frozenset(topo.nic_names)


def comparable_peers(topo: TopoMatrix, peers: Sequence[TopoMatrix]) -> list[TopoMatrix]:
    """Peers with the same GPU rows and the same set of NIC names as ``topo``."""
    sig = _signature(topo)
    return [p for p in peers if _signature(p) == sig]


def majority_matrix(peers: Sequence[TopoMatrix]) -> dict[tuple[str, str], tuple[str, int]]:
    """``(a, b) -> (majority class, count)`` for every cell held by more than half of ``peers``."""
    counts: dict[tuple[str, str], Counter[str]] = {}
    for p in peers:
        for a, b in combinations(p.gpu_names + p.nic_names, 2):
            cell = p.links.get(a, {}).get(b)
            if cell is not None:
                counts.setdefault(_key(a, b), Counter())[cell] += 1
    out: dict[tuple[str, str], tuple[str, int]] = {}
    for key, c in counts.items():
        value, n = c.most_common(1)[0]
        if 2 * n > len(peers):
            out[key] = (value, n)
    return out


def compare_to_peers(topo: TopoMatrix, peers: Sequence[TopoMatrix]) -> PeerComparison:
    """Cells where ``topo`` differs from the majority of its comparable peers (none with under 2 peers)."""
    same = comparable_peers(topo, peers)
    if len(same) < MIN_PEERS:
        return PeerComparison(peers=len(same), diffs=[])
    majority = majority_matrix(same)
    order = {name: i for i, name in enumerate(topo.gpu_names + topo.nic_names)}
    diffs: list[CellDiff] = []
    for (a, b), (value, n) in majority.items():
        here = topo.links.get(a, {}).get(b)
        if here != value:
            diffs.append(CellDiff(a=a, b=b, here=here, majority=value, majority_count=n, peers=len(same)))
    diffs.sort(key=lambda d: (order.get(d.a, 1 << 30), order.get(d.b, 1 << 30)))
    return PeerComparison(peers=len(same), diffs=diffs)
