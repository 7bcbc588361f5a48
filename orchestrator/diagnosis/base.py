"""What every diagnosis rule receives and returns.

A rule is a pure function ``rule(node: NodeFacts, fleet: Fleet) -> list[Finding]``. ``fleet`` gives the peers
(for majority and peer comparisons) and the job's expectations. Rules never raise on odd facts: missing facts
mean "cannot judge" and produce no finding (the engine reports probes that did not run).

The engine runs every rule on every node, so a rule must not scan the whole fleet for each node (that is
quadratic in the node count: 4,096 nodes, 16 million peer visits per rule). What a rule needs from all nodes
(a majority, a peer group's figures) it computes once per fleet with :meth:`Fleet.derived` and then reads
for each node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import cached_property
from typing import Any, TypeVar, cast

from pydantic import Field

from fleetdx.orchestrator.judgement import Finding
from fleetdx.probes.contracts import Contract
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.topo import TopoMatrix

T = TypeVar("T")


class Fleet(Contract):
    """All nodes of the run plus what the job expects of them."""

    nodes: list[NodeFacts]
    expected_gpus_per_node: int | None = None  #: from --gpus-per-node, else SLURM_GPUS_ON_NODE/PER_NODE
    expected_gpus_source: str | None = None  #: where expected_gpus_per_node came from, for evidence
    extra: dict[str, str] = Field(default_factory=dict)

    def peers_of(self, host: str) -> list[NodeFacts]:
        """Every node but ``host``'s, in O(nodes): a statistic over the peers of *every* node belongs in
        :meth:`derived`."""
        return [n for n in self.nodes if n.host != host]

    def derived(self, build: Callable[[Fleet], T]) -> T:
        """``build(self)``, computed on the first call and kept for the fleet's life.

        For what a rule reads about the whole fleet on each node (the GPU-count majority, a peer group's
        figures): built once, read per node. ``build`` is the cache key, so pass a module-level function,
        pure in the fleet's fields. The value is rebuilt if ``nodes`` is another list (a ``model_copy`` with
        new nodes); the nodes must not be changed in place after the first call.
        """
        memo = self._derived
        hit = memo.get(build)
        if hit is None or hit[0] is not self.nodes:
            hit = memo[build] = (self.nodes, build(self))
        return cast(T, hit[1])

    @cached_property
    def _derived(self) -> dict[Callable[[Fleet], Any], tuple[list[NodeFacts], Any]]:
        """:meth:`derived`'s cache: ``build -> (the nodes it was built from, the value)``. A cached property,
        not a field nor a private attribute: it is neither dumped nor compared (pydantic ignores such keys of
        ``__dict__`` in ``==``)."""
        return {}


Rule = Callable[[NodeFacts, Fleet], list[Finding]]

#: the :class:`NodeFacts` fields a *peer rule* (one that reads the fleet: a majority, peer figures, peer
#: matrices; each rules module lists its own in ``PEER_RULES``) may read, of its node and of ``fleet.nodes``.
#: A streamed diagnosis (:func:`~fleetdx.orchestrator.diagnosis.engine.diagnose_stream`) keeps only these
#: of each node (:func:`peer_view`, a few KiB) until every node has been seen; the other rules read only
#: their node and run as each node arrives.
PEER_FIELDS = ("host", "replayed", "gpus", "gpu_source", "gpu_processes", "microbench", "topo", "ib", "sources")


class PeerViews:
    """Makes the :func:`peer_view` of each node of one fleet, sharing equal ``topo -m`` matrices: a fleet's
    nodes mostly have one layout, so the matrices (frozen models) of 4,096 such nodes are held once."""

    def __init__(self) -> None:
        self._topos: dict[bytes, TopoMatrix] = {}

    def __call__(self, node: NodeFacts) -> NodeFacts:
        """:func:`peer_view` of ``node`` with its matrix shared with an equal one seen before."""
        topo = node.topo
        if topo is not None:
            key = hashlib.blake2b(topo.model_dump_json().encode(), digest_size=16).digest()
            seen = self._topos.setdefault(key, topo)
            if seen == topo:  # else a hash collision: the node keeps its own
                topo = seen
        return peer_view(node, topo)


def peer_view(node: NodeFacts, topo: TopoMatrix | None = None) -> NodeFacts:
    """``node`` with only :data:`PEER_FIELDS` (the others empty: ``None``, ``[]``, ``{}``): what the peer
    rules read; ``topo`` (an equal matrix) in place of the node's when given. A copy without validation, so
    no GPU view is derived again (``gpus``, ``gpu_processes`` are the node's own)."""
    update: dict[str, Any] = {name: _emptied(getattr(node, name)) for name in _DROPPED}
    if topo is not None:
        update["topo"] = topo
    return node.model_copy(update=update)


#: the NodeFacts fields a peer view leaves empty
_DROPPED = tuple(name for name in NodeFacts.model_fields if name not in PEER_FIELDS)


def _emptied(value: object) -> object:
    return type(value)() if isinstance(value, list | dict) else None
