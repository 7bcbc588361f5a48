"""TOPO_* findings of one node's ``topo -m`` matrix, with the cells they rest on as evidence.

Codes and severities (issue 3): TOPO_GPU_PAIR_SYS [warning], TOPO_NVLINK_DEGRADED [critical],
TOPO_GPU_NIC_REMOTE [warning], TOPO_NIC_OVERSUBSCRIBED [warning], TOPO_AFFINITY_MISSING [warning],
TOPO_MISMATCH_PEERS [warning] (:func:`peer_findings`, :func:`comparison_findings`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fleetdx.probes.contracts import Finding, FindingCode, JsonScalar, Severity
from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.topology.analyses import affinity_issues, nic_report, nvlink_report, remote_gpu_pairs
from fleetdx.topology.contracts import AffinityIssueKind, PeerComparison
from fleetdx.topology.fleet import compare_to_peers


def _scalars(items: Sequence[str]) -> list[JsonScalar]:
    return list(items)


def _nodes(host: str | None) -> list[str]:
    """The ``Finding.nodes`` of a finding about ``host`` (none for an anonymous matrix)."""
    return [host] if host else []


def sys_pair_findings(topo: TopoMatrix, host: str | None = None) -> list[Finding]:
    """One TOPO_GPU_PAIR_SYS for a node with GPU pairs that cross the SMP interconnect with no NVLink."""
    rp = remote_gpu_pairs(topo)
    sys_cells = [c for c in rp.pairs if c.link == "SYS"]
    if not sys_cells:
        return []
    names = ", ".join(c.key for c in sys_cells[:6]) + (", ..." if len(sys_cells) > 6 else "")
    return [
        Finding(
            code=FindingCode.TOPO_GPU_PAIR_SYS,
            severity=Severity.WARNING,
            nodes=_nodes(host),
            subject="GPU pairs",
            message=(
                f"{len(sys_cells)} of {rp.total_pairs} GPU pairs cross the CPU socket link (SYS) "
                "with no NVLink "
                f"({names}): keep tightly coupled ranks off these pairs"
            ),
            evidence={
                "cells": {c.key: c.link for c in sys_cells},
                "sys_pairs": rp.sys_pairs,
                "node_pairs": rp.node_pairs,
                "total_pairs": rp.total_pairs,
                "share_sys_or_node": round(rp.share, 4),
            },
        )
    ]


def nvlink_findings(topo: TopoMatrix, host: str | None = None) -> list[Finding]:
    """TOPO_NVLINK_DEGRADED per weaker pair, per GPU short of NVLinks, and per asymmetric NV# cell."""
    rep = nvlink_report(topo)
    out: list[Finding] = []
    for c in rep.weaker:
        out.append(
            Finding(
                code=FindingCode.TOPO_NVLINK_DEGRADED,
                severity=Severity.CRITICAL,
                nodes=_nodes(host),
                subject=c.key,
                message=(
                    f"{c.a}-{c.b} is {c.link} where the node's GPU pairs are {rep.pattern}: "
                    "NVLink lost or down"
                ),
                evidence={"cell": c.link, "pattern": rep.pattern},
            )
        )
    in_weak = {g for c in rep.weaker for g in (c.a, c.b)}
    for g in rep.short_gpus:
        if g in in_weak:
            continue
        out.append(
            Finding(
                code=FindingCode.TOPO_NVLINK_DEGRADED,
                severity=Severity.CRITICAL,
                nodes=_nodes(host),
                subject=g,
                message=f"{g} has {rep.per_gpu[g]} NVLinks where its siblings have {rep.expected_per_gpu}",
                evidence={
                    "nvlinks": rep.per_gpu[g],
                    "expected": rep.expected_per_gpu,
                    "per_gpu": dict(rep.per_gpu),
                },
            )
        )
    for a in rep.asymmetric:
        out.append(
            Finding(
                code=FindingCode.TOPO_NVLINK_DEGRADED,
                severity=Severity.CRITICAL,
                nodes=_nodes(host),
                subject=f"{a.a}-{a.b}",
                message=f"NVLink asymmetry: {a.a}->{a.b} is {a.ab} but {a.b}->{a.a} is {a.ba}",
                evidence={f"{a.a}-{a.b}": a.ab, f"{a.b}-{a.a}": a.ba},
            )
        )
    return out


def nic_findings(topo: TopoMatrix, host: str | None = None) -> list[Finding]:
    """TOPO_GPU_NIC_REMOTE per GPU whose nearest NIC is NODE/SYS (subject: the GPU and its rail NIC);
    TOPO_NIC_OVERSUBSCRIBED per NIC carrying more GPUs than the others."""
    rep = nic_report(topo)
    rail = {r.gpu: r.nic for r in rep.rails}
    out: list[Finding] = []
    for g in rep.remote:
        c = rep.nearest[g]
        nic = rail.get(g, c.nics[0])
        where = "across the CPU sockets" if c.link == "SYS" else "across PCIe host bridges"
        out.append(
            Finding(
                code=FindingCode.TOPO_GPU_NIC_REMOTE,
                severity=Severity.WARNING,
                nodes=_nodes(host),
                subject=f"{g}-{nic}",
                message=(
                    f"{g}'s nearest NIC {nic} is {c.link} away ({where}): "
                    "GPUDirect RDMA traffic crosses the CPU"
                ),
                evidence={"nearest": _scalars(c.nics), "link": c.link},
            )
        )
    for nic in rep.oversubscribed:
        gpus = [r.gpu for r in rep.rails if r.nic == nic]
        out.append(
            Finding(
                code=FindingCode.TOPO_NIC_OVERSUBSCRIBED,
                severity=Severity.WARNING,
                nodes=_nodes(host),
                subject=nic,
                message=(
                    f"{nic} is the nearest NIC of {len(gpus)} GPUs ({', '.join(gpus)}) "
                    "while other NICs serve "
                    f"{min(v for v in rep.load.values() if v > 0)}: its GPUs share its bandwidth"
                ),
                evidence={"gpus": _scalars(gpus), "load": dict(rep.load)},
            )
        )
    return out


def affinity_findings(topo: TopoMatrix, host: str | None = None) -> list[Finding]:
    """TOPO_AFFINITY_MISSING per GPU with an empty or missing CPU affinity."""
    out: list[Finding] = []
    for i in affinity_issues(topo):
        if i.kind is AffinityIssueKind.SHARED_ACROSS_SYS:
            continue
        what = "empty (cgroup-restricted?)" if i.kind is AffinityIssueKind.EMPTY else "missing"
        out.append(
            Finding(
                code=FindingCode.TOPO_AFFINITY_MISSING,
                severity=Severity.WARNING,
                nodes=_nodes(host),
                subject=i.gpu,
                message=f"{i.gpu}'s CPU affinity is {what}: its rank cannot be bound to the GPU's NUMA node",
                evidence={"cpu_affinity": i.raw, "kind": i.kind.value},
            )
        )
    return out


def node_findings(topo: TopoMatrix, host: str | None = None) -> list[Finding]:
    """Every TOPO_* finding of one matrix except the peer comparison."""
    return (
        sys_pair_findings(topo, host)
        + nvlink_findings(topo, host)
        + nic_findings(topo, host)
        + affinity_findings(topo, host)
    )


def peer_findings(
    topo: TopoMatrix, peers: Sequence[TopoMatrix], host: str | None = None
) -> tuple[PeerComparison, list[Finding]]:
    """TOPO_MISMATCH_PEERS, one per cell where ``topo`` differs from the majority of comparable peers."""
    cmp = compare_to_peers(topo, peers)
    return cmp, comparison_findings(cmp, host)


def comparison_findings(cmp: PeerComparison, host: str | None = None) -> list[Finding]:
    """TOPO_MISMATCH_PEERS, one per differing cell of ``cmp`` (:func:`peer_findings` without the
    comparison, for a caller that compared through :class:`~fleetdx.topology.fleet.CellCounts`)."""
    return [
        Finding(
            code=FindingCode.TOPO_MISMATCH_PEERS,
            severity=Severity.WARNING,
            nodes=_nodes(host),
            subject=f"{d.a}-{d.b}",
            message=d.sentence(),
            evidence={
                "here": d.here,
                "majority": d.majority,
                "majority_count": d.majority_count,
                "peers": d.peers,
            },
        )
        for d in cmp.diffs
    ]
