"""Topology: pure graph models and analyses of GPU nodes and clusters (no I/O, no Ray, no database).

- :mod:`topology.links`: link classes (NV#, PIX, PXB, PHB, NODE, SYS), their ranking and nominal bandwidths.
- :mod:`topology.node_graph`: the networkx graph of one node (GPUs, NICs, NUMA nodes).
- :mod:`topology.analyses`: SYS/NODE GPU pairs, NVLink pattern, nearest NICs and rails, CPU affinity.
- :mod:`topology.subset`: the exact best ``k``-GPU subset of a node.
- :mod:`topology.binding`: per-local-rank GPU, CPUs, NUMA node, NIC; ``advise``.
- :mod:`topology.fleet`: one node against the majority of its peers.
- :mod:`topology.findings`: TOPO_* findings.
- :mod:`topology.cluster`: Slurm topology.conf / switch maps, cluster graph, node placement, rendering.

Inputs are parsed models from :mod:`probes.parsers`; outputs are the models of :mod:`topology.contracts`.
"""
