"""Diagnosis rules over the ``nvidia-smi topo -m`` matrix of a node (TOPO_* findings).

``RULES`` (in order): the node's own topology findings (:func:`.topo_findings.node_findings`: SYS GPU
pairs, degraded NVLink, remote or oversubscribed NICs, missing CPU affinity), then the comparison with its
peers (TOPO_MISMATCH_PEERS: cells that differ from the majority of peers with the same GPU model, GPU rows
and NIC names; TOPO_NVLINK_DEGRADED where such a cell is an NVLink bond below the peers' while the node has
fewer NVLink lanes than they do). A node without a parsed matrix gives no finding (the engine reports the probe
that did not run or parse).
"""

from __future__ import annotations

from collections import defaultdict
from functools import cached_property

from fleetdx.orchestrator.diagnosis.base import Fleet, Rule
from fleetdx.orchestrator.diagnosis.topo_findings import comparison_findings, node_findings
from fleetdx.orchestrator.judgement import Finding
from fleetdx.probes.catalog import SMI_XML_FILE
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.topology.fleet import MIN_PEERS, CellCounts, LayoutKey, compare_to_majority, layout_key


def topo_node_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """TOPO_GPU_PAIR_SYS, TOPO_NVLINK_DEGRADED, TOPO_GPU_NIC_REMOTE, TOPO_NIC_OVERSUBSCRIBED,
    TOPO_AFFINITY_MISSING for ``node``."""
    if node.topo is None:
        return []
    return node_findings(node.topo, host=node.host)


def gpu_model(node: NodeFacts) -> str | None:
    """The GPU product name of ``node`` (``nvidia-smi -q -x``) when all its GPUs share one, else ``None``.

    Read from the GPU views (``node.gpus``) that came from the XML, the same names as ``node.smi``'s: a peer
    rule reads only :data:`~fleetdx.orchestrator.diagnosis.base.PEER_FIELDS`."""
    if node.gpu_source != SMI_XML_FILE:
        return None
    names = {g.name for g in node.gpus if g.name}
    return names.pop() if len(names) == 1 else None


class LayoutGroup:
    """The matrices of a fleet that share one :func:`~fleetdx.topology.fleet.layout_key`, counted once per GPU
    model (``by_model``, ``None`` for an unknown model) and over every model (:attr:`every`), with each host's
    own matrices and their models (to leave a node's host out of its peers)."""

    def __init__(self) -> None:
        self.by_model: dict[str | None, CellCounts] = defaultdict(CellCounts)
        self.by_host: dict[str, list[tuple[str | None, TopoMatrix]]] = defaultdict(list)

    def add(self, host: str, model: str | None, topo: TopoMatrix) -> None:
        self.by_model[model].add(topo)
        self.by_host[host].append((model, topo))

    @cached_property
    def every(self) -> CellCounts:
        """The counts over every model (the peers of a node whose model is unknown)."""
        if len(self.by_model) == 1:
            return next(iter(self.by_model.values()))
        return CellCounts.union(self.by_model.values())


def layout_groups(fleet: Fleet) -> dict[LayoutKey, LayoutGroup]:
    """The fleet's parsed matrices grouped by layout. Once per fleet (:meth:`Fleet.derived`)."""
    out: dict[LayoutKey, LayoutGroup] = defaultdict(LayoutGroup)
    for n in fleet.nodes:
        if n.topo is not None:
            out[layout_key(n.topo)].add(n.host, gpu_model(n), n.topo)
    return dict(out)


def topo_peers_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """TOPO_MISMATCH_PEERS: ``node``'s cells that differ from the majority of comparable peers (2 at least), and
    TOPO_NVLINK_DEGRADED for those that show lost NVLinks (:func:`.topo_findings.comparison_findings`).

    Peers are the other hosts' nodes with the same GPU model (when ``node``'s is known, peers of another or an
    unknown model are left out), the same GPU rows and NIC names
    (:func:`fleetdx.topology.fleet.compare_to_peers`'s comparison): the node's layout group, counted once per
    fleet, less the node's host.
    """
    if node.topo is None:
        return []
    group = fleet.derived(layout_groups)[layout_key(node.topo)]
    model = gpu_model(node)
    own = group.by_host[node.host]
    if model is None:
        counts, leave_out = group.every, [t for _, t in own]
    else:
        counts, leave_out = group.by_model[model], [t for m, t in own if m == model]
    peers = counts.size - len(leave_out)
    majority = counts.majority(leave_out) if peers >= MIN_PEERS else {}
    return comparison_findings(compare_to_majority(node.topo, majority, peers), host=node.host, topo=node.topo)


RULES: list[Rule] = [topo_node_rule, topo_peers_rule]

#: the rules of ``RULES`` that read the fleet (:data:`~fleetdx.orchestrator.diagnosis.base.PEER_FIELDS` only)
PEER_RULES: list[Rule] = [topo_peers_rule]
