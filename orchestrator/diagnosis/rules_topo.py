"""Diagnosis rules over the ``nvidia-smi topo -m`` matrix of a node (TOPO_* findings).

``RULES`` (in order): the node's own topology findings (:func:`fleetdx.topology.findings.node_findings`: SYS GPU
pairs, degraded NVLink, remote or oversubscribed NICs, missing CPU affinity), then the comparison with its
peers (TOPO_MISMATCH_PEERS: cells that differ from the majority of peers with the same GPU model, GPU rows
and NIC names). A node without a parsed matrix gives no finding (the engine reports the probe that did not
run or parse).
"""

from __future__ import annotations

from fleetdx.orchestrator.diagnosis.base import Fleet, Rule
from fleetdx.probes.contracts import Finding
from fleetdx.probes.facts import NodeFacts
from fleetdx.topology.findings import node_findings, peer_findings


def topo_node_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """TOPO_GPU_PAIR_SYS, TOPO_NVLINK_DEGRADED, TOPO_GPU_NIC_REMOTE, TOPO_NIC_OVERSUBSCRIBED,
    TOPO_AFFINITY_MISSING for ``node``."""
    if node.topo is None:
        return []
    return node_findings(node.topo, host=node.host)


def gpu_model(node: NodeFacts) -> str | None:
    """The GPU product name of ``node`` (``nvidia-smi -q -x``) when all its GPUs share one, else ``None``."""
    if node.smi is None:
        return None
    names = {g.name for g in node.smi.gpus if g.name}
    return names.pop() if len(names) == 1 else None


def topo_peers_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """TOPO_MISMATCH_PEERS: ``node``'s cells that differ from the majority of comparable peers (2 at least).

    Peers are the nodes with the same GPU model (when ``node``'s is known, peers of another or an unknown
    model are left out) and, inside :func:`fleetdx.topology.fleet.compare_to_peers`, the same GPU rows and NIC names.
    """
    if node.topo is None:
        return []
    model = gpu_model(node)
    peers = [
        p.topo
        for p in fleet.peers_of(node.host)
        if p.topo is not None and (model is None or gpu_model(p) == model)
    ]
    return peer_findings(node.topo, peers, host=node.host)[1]


RULES: list[Rule] = [topo_node_rule, topo_peers_rule]
