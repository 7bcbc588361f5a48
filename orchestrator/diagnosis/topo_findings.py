"""TOPO_* findings of one node's ``topo -m`` matrix, with the cells they rest on as details, and
:class:`TopoShow`, ``fleetdx topo show --json`` (the matrix, its analyses and these findings).

Codes and severities (issue 3): TOPO_GPU_PAIR_SYS [warning], TOPO_NVLINK_DEGRADED [critical],
TOPO_GPU_NIC_REMOTE [warning], TOPO_NIC_OVERSUBSCRIBED [warning], TOPO_AFFINITY_MISSING [warning],
TOPO_MISMATCH_PEERS [warning] (:func:`peer_findings`, :func:`comparison_findings`).

TOPO_NVLINK_DEGRADED rests on evidence, never on a GPU having fewer NVLink lanes than its siblings (a hybrid
cube-mesh slice has such GPUs by design): a pair below the node's all-to-all class or an NV# cell whose mirror
cell differs (:func:`nvlink_findings`), or an NV# cell below the same cell on the majority of the node's
comparable peers while the node has fewer lanes than they do (:func:`comparison_findings`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.contracts import SCHEMA_VERSION, Contract, EvidenceValue, JsonScalar, Severity
from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.topology.analyses import affinity_issues, nic_report, nvlink_report, remote_gpu_pairs
from fleetdx.topology.contracts import AffinityIssueKind, NicChoice, PeerComparison, RailAssignment
from fleetdx.topology.fleet import compare_to_peers
from fleetdx.topology.links import parse_link


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
            details={
                "cells": {c.key: c.link for c in sys_cells},
                "sys_pairs": rp.sys_pairs,
                "node_pairs": rp.node_pairs,
                "total_pairs": rp.total_pairs,
                "share_sys_or_node": round(rp.share, 4),
            },
        )
    ]


def nvlink_findings(topo: TopoMatrix, host: str | None = None) -> list[Finding]:
    """TOPO_NVLINK_DEGRADED per pair weaker than the node's all-to-all NV# class and per asymmetric NV# cell
    (:func:`~fleetdx.topology.analyses.nvlink_report`). A GPU with fewer lanes than its siblings is not one: a
    cube-mesh slice has such GPUs by design; the peers judge that case (:func:`comparison_findings`)."""
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
                details={"cell": c.link, "pattern": rep.pattern},
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
                details={f"{a.a}-{a.b}": a.ab, f"{a.b}-{a.a}": a.ba},
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
                details={"nearest": _scalars(c.nics), "link": c.link},
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
                details={"gpus": _scalars(gpus), "load": dict(rep.load)},
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
                details={"cpu_affinity": i.raw, "kind": i.kind.value},
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
    """TOPO_MISMATCH_PEERS, one per cell where ``topo`` differs from the majority of comparable peers, and
    TOPO_NVLINK_DEGRADED where such a cell shows lost NVLinks (:func:`comparison_findings`)."""
    cmp = compare_to_peers(topo, peers)
    return cmp, comparison_findings(cmp, host, topo=topo)


def _nvlinks(cell: str | None) -> int:
    """The NVLink count of a cell (0 for a PCIe class or an absent device)."""
    return parse_link(cell).nvlinks if cell is not None and cell.startswith("NV") else 0


def comparison_findings(
    cmp: PeerComparison, host: str | None = None, *, topo: TopoMatrix | None = None
) -> list[Finding]:
    """TOPO_MISMATCH_PEERS, one per differing cell of ``cmp`` (:func:`peer_findings` without the
    comparison, for a caller that compared through :class:`~fleetdx.topology.fleet.CellCounts`).

    With the node's matrix ``topo``, also TOPO_NVLINK_DEGRADED (critical) for each GPU pair that is below an NV#
    majority of the peers (NV1 here, NV2 on 3 of 3 peers; SYS here, NV12 on the peers) when, over the GPU pairs,
    the node has fewer NVLink lanes than the peers' majority: links were lost, not wired otherwise (a slice of
    another board with as many lanes differs cell by cell but loses none: mismatches only). A cell the node's
    own matrix already condemns (:func:`nvlink_findings`) is not condemned twice.
    """
    gpus = set(topo.gpu_names) if topo is not None else set()
    short = sum(_nvlinks(d.majority) - _nvlinks(d.here) for d in cmp.diffs if d.a in gpus and d.b in gpus)
    condemned: set[frozenset[str]] = set()
    if topo is not None and short > 0:
        rep = nvlink_report(topo)
        condemned = {frozenset((c.a, c.b)) for c in rep.weaker} | {frozenset((x.a, x.b)) for x in rep.asymmetric}
    out: list[Finding] = []
    for d in cmp.diffs:
        evidence: dict[str, EvidenceValue] = {
            "here": d.here,
            "majority": d.majority,
            "majority_count": d.majority_count,
            "peers": d.peers,
        }
        out.append(
            Finding(
                code=FindingCode.TOPO_MISMATCH_PEERS,
                severity=Severity.WARNING,
                nodes=_nodes(host),
                subject=f"{d.a}-{d.b}",
                message=d.sentence(),
                details=evidence,
            )
        )
        if (
            short > 0
            and d.a in gpus
            and d.b in gpus
            and d.here is not None
            and d.majority.startswith("NV")
            and parse_link(d.here).rank < parse_link(d.majority).rank
            and frozenset((d.a, d.b)) not in condemned
        ):
            out.append(
                Finding(
                    code=FindingCode.TOPO_NVLINK_DEGRADED,
                    severity=Severity.CRITICAL,
                    nodes=_nodes(host),
                    subject=f"{d.a}-{d.b}",
                    message=(
                        f"{d.sentence()}: NVLink lost or down (the node has {short} NVLink lane(s) fewer than "
                        "its peers)"
                    ),
                    details={**evidence, "nvlinks_short": short},
                )
            )
    return out


class TopoShow(Contract):
    """``fleetdx topo show --json``."""

    schema_version: int = SCHEMA_VERSION
    gpus: list[str]
    nics: list[str]
    matrix: dict[str, dict[str, str]]
    nearest_nic: dict[str, NicChoice]
    rails: list[RailAssignment]
    remote_pairs_share: float
    gpu_model: str | None = None  #: nvidia-smi product name, when known (--gpu-model or the bundle's -q -x)
    generation: str | None = None
    nominal_gbps: dict[str, float] = Field(default_factory=dict)  #: per link class, GB/s per direction
    findings: list[Finding]
