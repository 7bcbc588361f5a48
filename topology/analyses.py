"""Analyses of one node's ``nvidia-smi topo -m`` matrix; each returns a typed result holding its evidence
cells.

All functions take a :class:`fleetdx.probes.parsers.topo.TopoMatrix` and never raise on odd content: a cell the matrix
lacks is treated as unknown and left out (never read as a healthy link).
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations

from fleetdx.probes.parsers.numactl import NumaTopology
from fleetdx.probes.parsers.topo import TopoGpu, TopoMatrix
from fleetdx.topology.contracts import (
    AffinityIssue,
    AffinityIssueKind,
    AsymmetricCell,
    Cell,
    NicChoice,
    NicReport,
    NvlinkReport,
    RailAssignment,
    RemotePairs,
)
from fleetdx.topology.links import Link, LinkKind, parse_link


def link_between(topo: TopoMatrix, a: str, b: str) -> Link | None:
    """The parsed link class of cell ``[a][b]``; ``None`` when the matrix has no such cell."""
    cell = topo.links.get(a, {}).get(b)
    return parse_link(cell) if cell is not None else None


def gpu_pairs(topo: TopoMatrix) -> list[tuple[str, str]]:
    """All unordered GPU pairs ``(a, b)`` with ``a`` before ``b`` in row order."""
    return list(combinations(topo.gpu_names, 2))


def remote_gpu_pairs(topo: TopoMatrix) -> RemotePairs:
    """GPU pairs whose only path crosses NODE (host bridges within a NUMA node) or SYS (the SMP interconnect).

    Such pairs have no NVLink and no common PCIe switch: peer-to-peer traffic goes through the CPU's root
    complex (NODE) or across sockets (SYS), the slowest intra-node paths of the ``topo -m`` legend.
    """
    pairs: list[Cell] = []
    for a, b in gpu_pairs(topo):
        link = link_between(topo, a, b)
        if link is not None and link.remote:
            pairs.append(Cell(a=a, b=b, link=str(link)))
    n = len(topo.gpus)
    return RemotePairs(pairs=pairs, total_pairs=n * (n - 1) // 2)


def asymmetric_cells(topo: TopoMatrix) -> list[AsymmetricCell]:
    """Cells where ``[a][b]`` and ``[b][a]`` disagree (the matrix of a healthy node is symmetric)."""
    names = topo.gpu_names + topo.nic_names
    out: list[AsymmetricCell] = []
    for a, b in combinations(names, 2):
        ab = topo.links.get(a, {}).get(b)
        ba = topo.links.get(b, {}).get(a)
        if ab is not None and ba is not None and ab != ba:
            out.append(AsymmetricCell(a=a, b=b, ab=ab, ba=ba))
    return out


def _max_clique(nodes: list[str], edges: set[frozenset[str]]) -> int:
    """Size of the largest set of ``nodes`` that are pairwise joined by ``edges`` (Bron-Kerbosch with a pivot;
    a ``topo -m`` matrix has at most a few dozen GPUs)."""
    adj = {v: {w for w in nodes if w != v and frozenset((v, w)) in edges} for v in nodes}
    best = 0

    def grow(size: int, cand: set[str], done: set[str]) -> None:
        nonlocal best
        if not cand and not done:
            best = max(best, size)
            return
        if size + len(cand) <= best:
            return
        pivot = max(cand | done, key=lambda v: len(adj[v] & cand))
        for v in list(cand - adj[pivot]):
            grow(size + 1, cand & adj[v], done & adj[v])
            cand = cand - {v}
            done = done | {v}

    grow(0, set(nodes), set())
    return best


def all_to_all_class(topo: TopoMatrix) -> Link | None:
    """The NV# class of an all-to-all NVLink fabric (NVSwitch: NV18 on HGX H100, NV12 on HGX A100; a fully meshed
    board such as 4x A100 NV4), or ``None`` when the matrix does not show one.

    A class is the fabric's when it joins at least three quarters of the GPU pairs and more than half of the GPUs
    are all joined to each other by it: an all-to-all fabric of which one pair, or one GPU of eight, lost links.
    A hybrid cube-mesh never passes, nor does any slice of one a VM or container is given: on a V100 DGX-1 /
    p3.16xlarge NV1 and NV2 each join 8 of 28 pairs as an 8-cycle (no three GPUs pairwise NV1 or NV2), on its
    4-GPU slices (p3.8xlarge, NDv2 GPUs 0-3) NV1 and NV2 tie at 3 of 6 pairs, on 3-GPU slices one class joins 2
    of 3; the P100 DGX-1 joins 16 of 28 pairs by NV1 (4 GPUs at most pairwise), its slices at most 7 of 10.
    Fewer than three quarters (half the pairs of a 4-GPU tray on one GPU, two GPUs of eight) cannot be told from
    a design with fewer links; the peers judge those
    (``comparison_findings`` of the orchestrator's diagnosis).
    """
    gpus = topo.gpu_names
    pairs = gpu_pairs(topo)
    by_class: dict[Link, set[frozenset[str]]] = {}
    for a, b in pairs:
        lk = link_between(topo, a, b)
        if lk is not None and lk.is_nvlink:
            by_class.setdefault(lk, set()).add(frozenset((a, b)))
    for lk, edges in by_class.items():
        if 4 * len(edges) >= 3 * len(pairs) and 2 * _max_clique(gpus, edges) > len(gpus):
            return lk  # at most one class holds three quarters of the pairs
    return None


def nvlink_report(topo: TopoMatrix) -> NvlinkReport:
    """NVLink bonds weaker than the node's all-to-all class, per-GPU lane totals, asymmetric NV# cells.

    ``pattern`` is :func:`all_to_all_class`; ``weaker`` the GPU pairs below it (NV17 among NV18, SYS on an
    NVSwitch board). ``asymmetric`` are the NV# cells whose mirror cell differs (A->B NV2, B->A NV1): the matrix
    disagrees with itself. Both are evidence of a degraded link from the node's matrix alone.

    ``per_gpu`` (each GPU's total lanes), ``expected_per_gpu`` (the most common non-zero total) and
    ``short_gpus`` (GPUs below it) describe the node but are no evidence: GPUs of one node may have different
    totals by design (a 4-GPU slice of a DGX-1 cube-mesh, AWS p3.8xlarge: GPU0/GPU1 4 lanes, GPU2/GPU3 5). A
    lost lane that leaves the matrix symmetric and no all-to-all class shows only against the same cell on the
    node's peers (``comparison_findings`` of the orchestrator's diagnosis). GPUs with no NVLink at all are left
    out of the totals' mode (a PCIe GPU beside a bridged pair is by design).
    """
    pairs = gpu_pairs(topo)
    links = {(a, b): link_between(topo, a, b) for a, b in pairs}
    pattern = all_to_all_class(topo)
    weaker: list[Cell] = []
    if pattern is not None:
        for (a, b), lk in links.items():
            if lk is not None and lk.rank < pattern.rank:
                weaker.append(Cell(a=a, b=b, link=str(lk)))
    per_gpu = {g: 0 for g in topo.gpu_names}
    for (a, b), lk in links.items():
        if lk is not None and lk.is_nvlink:
            per_gpu[a] += lk.nvlinks
            per_gpu[b] += lk.nvlinks
    totals = Counter(v for v in per_gpu.values() if v > 0)
    expected = max(totals, key=lambda v: (totals[v], v)) if totals else None
    short = [g for g, v in per_gpu.items() if expected is not None and 0 < v < expected]
    asym = [c for c in asymmetric_cells(topo) if c.ab.startswith("NV") or c.ba.startswith("NV")]
    return NvlinkReport(
        pattern=str(pattern) if pattern is not None else None,
        weaker=weaker,
        per_gpu=per_gpu,
        expected_per_gpu=expected,
        short_gpus=short,
        asymmetric=asym,
    )


def nearest_nics(topo: TopoMatrix) -> dict[str, NicChoice]:
    """For each GPU, the NIC(s) at its best link class (ties kept, in column order); ``{}`` with no NIC."""
    if not topo.nics:
        return {}
    out: dict[str, NicChoice] = {}
    for gpu in topo.gpu_names:
        known = [(nic, lk) for nic in topo.nic_names if (lk := link_between(topo, gpu, nic)) is not None]
        if not known:
            out[gpu] = NicChoice(nics=[], link=None)
            continue
        best = max(lk.rank for _, lk in known)
        nics = [nic for nic, lk in known if lk.rank == best]
        out[gpu] = NicChoice(nics=nics, link=str(next(lk for _, lk in known if lk.rank == best)))
    return out


def assign_rails(topo: TopoMatrix, nearest: dict[str, NicChoice] | None = None) -> list[RailAssignment]:
    """One NIC per GPU: the nearest; among tied NICs the one carrying the fewest GPUs so far, then column
    order.

    This mirrors what NCCL does by default (each GPU uses the closest NIC by PCIe distance, NCCL
    ``src/graph/search.cc``) and spreads GPUs over equally near NICs.
    """
    nearest = nearest if nearest is not None else nearest_nics(topo)
    load: Counter[str] = Counter()
    out: list[RailAssignment] = []
    for gpu, choice in nearest.items():
        if not choice.nics or choice.link is None:
            continue
        nic = min(choice.nics, key=lambda n: (load[n], choice.nics.index(n)))
        load[nic] += 1
        if len(choice.nics) == 1:
            reason = f"the only NIC at {choice.link}"
        else:
            others = ", ".join(n for n in choice.nics if n != nic)
            reason = f"tied at {choice.link} with {others}; {nic} had fewer GPUs assigned"
        out.append(RailAssignment(gpu=gpu, nic=nic, link=choice.link, reason=reason))
    return out


def nic_report(topo: TopoMatrix) -> NicReport:
    """Nearest NICs, GPUs whose best NIC is remote (NODE/SYS), the rail assignment and oversubscribed NICs."""
    nearest = nearest_nics(topo)
    remote = [g for g, c in nearest.items() if c.link is not None and parse_link(c.link).remote]
    rails = assign_rails(topo, nearest)
    load = {nic: 0 for nic in topo.nic_names}
    for r in rails:
        load[r.nic] += 1
    used = [v for v in load.values() if v > 0]
    floor = min(used) if used else 0
    over = [nic for nic, v in load.items() if len(used) > 1 and v > floor]
    return NicReport(nearest=nearest, remote=remote, rails=rails, load=load, oversubscribed=over)


def numa_node_of(gpu: TopoGpu, numa: NumaTopology | None = None) -> int | None:
    """The NUMA node to bind ``gpu``'s rank to, or ``None`` when it cannot be told.

    1. The single ``NUMA Affinity`` value of the ``topo -m`` row.
    2. Else, with ``numactl -H`` facts, the one NUMA node holding all of the GPU's affinity CPUs.

    Several values (POWER9 prints ``0,8,252-255``, Grace ``0,2-17``: the extra ids are GPU-memory NUMA nodes)
    without ``numa`` facts, CPUs spread over several nodes, or no affinity at all give ``None``; the CPU list
    is then the binding.
    """
    if gpu.numa_affinity is not None and len(gpu.numa_affinity) == 1:
        return gpu.numa_affinity[0]
    if numa is None or not gpu.cpu_affinity:
        return None
    nodes = {numa.node_of_cpu(c) for c in gpu.cpu_affinity}
    if len(nodes) == 1:
        return nodes.pop()
    return None


def affinity_issues(topo: TopoMatrix) -> list[AffinityIssue]:
    """GPUs whose CPU affinity cannot be used as printed.

    MISSING: no CPU Affinity column or ``N/A``. EMPTY: an empty cell (nvidia-smi inside a cgroup/cpuset that
    excludes the GPU's CPUs prints nothing). SHARED_ACROSS_SYS: two GPUs a SYS hop apart (different sockets)
    print the same CPU list, which the hardware cannot do: the list is a job cpuset, not the GPU's socket.
    """
    out: list[AffinityIssue] = []
    for g in topo.gpus:
        if g.cpu_affinity:
            continue
        raw = g.cpu_affinity_raw
        empty = raw is not None and raw.strip() == ""
        kind = AffinityIssueKind.EMPTY if empty else AffinityIssueKind.MISSING
        out.append(AffinityIssue(gpu=g.name, kind=kind, raw=raw))
    by_name = {g.name: g for g in topo.gpus}
    flagged: set[str] = set()
    for a, b in gpu_pairs(topo):
        lk = link_between(topo, a, b)
        ga, gb = by_name[a], by_name[b]
        if (
            lk is not None
            and lk.kind is LinkKind.SYS
            and ga.cpu_affinity
            and ga.cpu_affinity == gb.cpu_affinity
        ):
            for g in (ga, gb):
                if g.name not in flagged:
                    flagged.add(g.name)
                    out.append(
                        AffinityIssue(
                            gpu=g.name, kind=AffinityIssueKind.SHARED_ACROSS_SYS, raw=g.cpu_affinity_raw
                        )
                    )
    return out
