"""The node graph: GPUs, NICs and NUMA nodes of one host as a networkx graph.

Vertices (attribute ``kind``): ``"GPU0"`` (gpu), ``"mlx5_0"`` (nic), ``"NUMA0"`` (numa). Edges:

- GPU-GPU and GPU-NIC: ``link`` (class string as in the matrix, e.g. ``"NV18"``, ``"PXB"``), ``rank``
  (:func:`fleetdx.topology.links.link_rank`) and ``nominal_gbps`` (per direction, GB/s = 1e9 B/s, from
  :data:`fleetdx.topology.links.GENERATIONS`; ``None`` when the GPU generation is unknown).
- GPU-NUMA: ``link="affinity"`` for each NUMA node in the GPU's ``NUMA Affinity``.
- With ``numactl -H`` facts: every NUMA node (``cpus`` attribute) and NUMA-NUMA edges with the SLIT
  ``distance`` (10 = local); GPU-NUMA ``link="cpus"`` for a GPU whose row has no NUMA Affinity but whose CPUs
  all sit on one node.
- NIC-NUMA: ``link="inferred"`` when every GPU reaching the NIC without crossing SYS sits on that one NUMA
  node (``topo -m`` prints no affinity for NICs).
"""

from __future__ import annotations

from enum import Enum

import networkx as nx

from fleetdx.probes.parsers.numactl import NumaTopology
from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.topology.analyses import link_between, numa_node_of
from fleetdx.topology.links import GpuGeneration, LinkKind, generation_of, nominal_gbps


class DeviceKind(str, Enum):
    GPU = "gpu"
    NIC = "nic"
    NUMA = "numa"


def numa_vertex(node: int) -> str:
    return f"NUMA{node}"


def build_node_graph(
    topo: TopoMatrix,
    gpu_model: str | None = None,
    smp_gbps: float | None = None,
    numa: NumaTopology | None = None,
) -> nx.Graph[str]:
    """Build the node graph of ``topo``. ``gpu_model`` is nvidia-smi's product name (for nominal bandwidths);
    ``smp_gbps`` the socket interconnect's per-direction GB/s when known (bounds SYS edges)."""
    gen: GpuGeneration | None = generation_of(gpu_model)
    g: nx.Graph[str] = nx.Graph(gpu_model=gpu_model, generation=gen.value if gen else None)
    for gpu in topo.gpus:
        g.add_node(gpu.name, kind=DeviceKind.GPU, cpus=tuple(gpu.cpu_affinity))
    for n in topo.nics:
        g.add_node(n.name, kind=DeviceKind.NIC)
    gpus = topo.gpu_names
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :] + topo.nic_names:
            link = link_between(topo, a, b)
            if link is not None:
                g.add_edge(
                    a, b, link=str(link), rank=link.rank, nominal_gbps=nominal_gbps(link, gen, smp_gbps)
                )
    if numa is not None:
        _add_numa_facts(g, numa)
    numa_of_gpu: dict[str, list[int]] = {}
    for gpu in topo.gpus:
        for node in gpu.numa_affinity or []:
            g.add_node(numa_vertex(node), kind=DeviceKind.NUMA)
            g.add_edge(gpu.name, numa_vertex(node), link="affinity")
        numa_of_gpu[gpu.name] = list(gpu.numa_affinity or [])
        resolved = numa_node_of(gpu, numa) if gpu.numa_affinity is None else None
        if resolved is not None:
            g.add_edge(gpu.name, numa_vertex(resolved), link="cpus")
            numa_of_gpu[gpu.name] = [resolved]
    for nic in topo.nic_names:
        near = {
            tuple(numa_of_gpu[gpu])
            for gpu in gpus
            if (lk := link_between(topo, gpu, nic)) is not None and lk.kind is not LinkKind.SYS
        }
        if len(near) == 1 and len(only := next(iter(near))) == 1:
            g.add_edge(nic, numa_vertex(only[0]), link="inferred")
    return g


def _add_numa_facts(g: nx.Graph[str], numa: NumaTopology) -> None:
    for node in numa.nodes:
        g.add_node(numa_vertex(node.node), kind=DeviceKind.NUMA, cpus=tuple(node.cpus))
    ids = numa.node_ids
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            if numa.distances:
                g.add_edge(numa_vertex(a), numa_vertex(b), link="numa", distance=numa.distance(a, b))
