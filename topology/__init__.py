"""Topology: pure graph models and analyses of GPU nodes and clusters (no I/O, no Ray, no database).

- :mod:`fleetdx.topology.links`: link classes (NV#, PIX, PXB, PHB, NODE, SYS), their ranking and nominal bandwidths.
- :mod:`fleetdx.topology.node_graph`: the networkx graph of one node (GPUs, NICs, NUMA nodes).
- :mod:`fleetdx.topology.analyses`: SYS/NODE GPU pairs, NVLink pattern, nearest NICs and rails, CPU affinity.
- :mod:`fleetdx.topology.subset`: the exact best ``k``-GPU subset of a node.
- :mod:`fleetdx.topology.binding`: per-local-rank GPU, CPUs, NUMA node, NIC; ``advise``.
- :mod:`fleetdx.topology.fleet`: one node against the majority of its peers.
- :mod:`fleetdx.topology.cluster`: Slurm topology.conf / switch maps, cluster graph, node placement, rendering.

Inputs are parsed models from :mod:`fleetdx.probes.parsers`; outputs are the models of
:mod:`fleetdx.topology.contracts`. Topology does not judge: the TOPO_* findings are made from these analyses by
:mod:`fleetdx.orchestrator.diagnosis.topo_findings`.
"""
