"""TOPO_NVLINK_DEGRADED on hybrid cube-mesh nodes and their slices, and against peers (issue 16).

A GPU with fewer NVLink lanes than its siblings on one node is not evidence: on a DGX-1 / p3.16xlarge hybrid
cube-mesh every GPU has 6, but a 4-GPU slice of it (AWS p3.8xlarge, GPUs 0-3 of the same board) has GPUs with
4 and GPUs with 5 by design. The evidence is the mirror cell (A->B NV2 but B->A NV1), a pair weaker than an
all-to-all fabric's class, or the same cell on the majority of same-model, same-layout peers.

Matrices are the real captures of tests/fixtures/topo/ (01: DGX-1 V100, 02: Azure NDv2 V100, 05: AWS p4d A100
NV12, 23: GB200 tray) and slices or one-cell modifications of them (each test says which).
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.rules_topo import topo_node_rule, topo_peers_rule
from fleetdx.orchestrator.diagnosis.topo_findings import node_findings, peer_findings
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.contracts import Severity
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.topo import TopoMatrix, parse_topo
from fleetdx.topology.analyses import nvlink_report

FIX = Path(__file__).parent / "fixtures" / "topo"

#: GPUs 0-3 of the DGX-1 board (fixture 01) as an AWS p3.8xlarge prints them: GPU0/GPU1 have 4 lanes, GPU2/GPU3 5
P3_8XLARGE = """\
        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity
GPU0     X      NV1     NV1     NV2     0-31            N/A
GPU1    NV1      X      NV2     NV1     0-31            N/A
GPU2    NV1     NV2      X      NV2     0-31            N/A
GPU3    NV2     NV1     NV2      X      0-31            N/A

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def load(prefix: str) -> TopoMatrix:
    (path,) = [p for p in FIX.iterdir() if p.name.startswith(prefix)]
    return parse_topo(path.read_text(encoding="utf-8"))


def sliced(topo: TopoMatrix, keep: list[str]) -> TopoMatrix:
    """The GPUs ``keep`` of ``topo`` renamed GPU0.. in order, with no NIC: what a VM given those GPUs prints."""
    new = {old: f"GPU{i}" for i, old in enumerate(keep)}
    gpus = [g.model_copy(update={"name": new[g.name]}) for g in topo.gpus if g.name in new]
    gpus.sort(key=lambda g: int(g.name[3:]))
    links = {new[a]: {new[b]: c for b, c in row.items() if b in new} for a, row in topo.links.items() if a in new}
    return topo.model_copy(update={"gpus": gpus, "nics": [], "links": links})


def with_cells(topo: TopoMatrix, *cells: tuple[str, str, str]) -> TopoMatrix:
    """``topo`` with ``links[a][b] = cell`` for each ``(a, b, cell)`` (one direction: give both for a pair)."""
    links = {k: dict(v) for k, v in topo.links.items()}
    for a, b, cell in cells:
        links[a][b] = cell
    return topo.model_copy(update={"links": links})


def degraded(findings: list[Finding]) -> list[tuple[str, Severity]]:
    return [(f.subject, f.severity) for f in findings if f.code is FindingCode.TOPO_NVLINK_DEGRADED]


# --- good nodes are not condemned -------------------------------------------------------------------------


def test_p3_8xlarge_slice_of_the_cube_mesh_is_not_degraded() -> None:
    topo = parse_topo(P3_8XLARGE)
    rep = nvlink_report(topo)
    assert rep.per_gpu == {"GPU0": 4, "GPU1": 4, "GPU2": 5, "GPU3": 5}  # fewer lanes by design
    assert rep.pattern is None and rep.weaker == [] and rep.asymmetric == []
    assert degraded(node_findings(topo, host="p3-8x")) == []
    node = NodeFacts(host="p3-8x", topo=topo)
    assert degraded(topo_node_rule(node, Fleet(nodes=[node]))) == []


def test_the_printed_p3_8xlarge_is_gpus_0_to_3_of_the_dgx1_capture() -> None:
    assert sliced(load("01_"), ["GPU0", "GPU1", "GPU2", "GPU3"]).links == parse_topo(P3_8XLARGE).links


@pytest.mark.parametrize("prefix", ["01_", "02_"])
def test_no_slice_of_a_hybrid_cube_mesh_is_degraded(prefix: str) -> None:
    """Every 2- to 8-GPU slice of the DGX-1 and NDv2 boards: NV1 and NV2 pairs tie on the NDv2 0-3 slice (3 of
    6 each), so which class is "the pattern" must not depend on which pair comes first."""
    full = load(prefix)
    for k in range(2, 9):
        for keep in combinations(full.gpu_names, k):
            topo = sliced(full, list(keep))
            assert degraded(node_findings(topo)) == [], keep


def test_a_pascal_dgx1_cube_mesh_and_its_slices_are_not_degraded() -> None:
    """The DGX-1 board with every NV2 read as NV1 is the P100 DGX-1 (4 NVLinks per GPU: its quad plus one
    cross link): 16 of 28 pairs are NV1 and the 12 SYS pairs are by design. Its slices too: GPUs 0, 1, 2 and 4
    are NV1 on 4 of 6 pairs, GPU4 SYS to GPU1 and GPU2."""
    dgx1 = load("01_")
    cells = [(a, b, "NV1") for a, row in dgx1.links.items() for b, c in row.items() if c == "NV2"]
    p100 = with_cells(dgx1, *cells)
    rep = nvlink_report(p100)
    assert set(rep.per_gpu.values()) == {4} and rep.pattern is None
    for k in range(2, 9):
        for keep in combinations(p100.gpu_names, k):
            assert degraded(node_findings(sliced(p100, list(keep)))) == [], keep


def test_gb200_tray_with_one_gpu_a_lane_short_is_degraded_against_its_peers() -> None:
    """Fixture 23 (4 GPUs, NV18 all-to-all) with GPU3's bonds at NV17: half the pairs, all on one GPU. From the
    matrix alone that reads like a layout with two classes; three peers at NV18 say which half is short."""
    good = load("23_")
    cells = [c for g in range(3) for c in ((f"GPU{g}", "GPU3", "NV17"), ("GPU3", f"GPU{g}", "NV17"))]
    short = with_cells(good, *cells)
    assert degraded(node_findings(short)) == []
    bad, fleet = _cube_fleet(short, good)
    assert degraded(topo_peers_rule(bad, fleet)) == [
        ("GPU0-GPU3", Severity.CRITICAL),
        ("GPU1-GPU3", Severity.CRITICAL),
        ("GPU2-GPU3", Severity.CRITICAL),
    ]


def test_a100_four_gpu_board_with_one_pair_a_lane_short_is_degraded() -> None:
    """Fixture 13 (4x A100 SXM4, NV4 between every pair) with GPU1-GPU2 at NV3: 5 of 6 pairs NV4."""
    topo = with_cells(load("13_"), ("GPU1", "GPU2", "NV3"), ("GPU2", "GPU1", "NV3"))
    assert degraded(node_findings(topo)) == [("GPU1-GPU2", Severity.CRITICAL)]


# --- degraded nodes are still caught ----------------------------------------------------------------------


def test_a100_nv12_node_with_one_pair_at_nv6_is_degraded() -> None:
    """Fixture 05 (p4d, every pair NV12) with GPU2-GPU5 at NV6 both ways."""
    topo = with_cells(load("05_"), ("GPU2", "GPU5", "NV6"), ("GPU5", "GPU2", "NV6"))
    assert degraded(node_findings(topo, host="p4d")) == [("GPU2-GPU5", Severity.CRITICAL)]


def test_a100_nv12_node_with_one_gpu_off_nvlink_is_degraded() -> None:
    """Fixture 05 with GPU7's NVLinks gone (its pairs SYS): 21 of 28 pairs NV12, seven weaker."""
    cells = [c for g in range(7) for c in ((f"GPU{g}", "GPU7", "SYS"), ("GPU7", f"GPU{g}", "SYS"))]
    found = degraded(node_findings(with_cells(load("05_"), *cells)))
    assert found == [(f"GPU{g}-GPU7", Severity.CRITICAL) for g in range(7)]


@pytest.mark.parametrize(
    "topo",
    [
        with_cells(parse_topo(P3_8XLARGE), ("GPU3", "GPU0", "NV1")),  # GPU0->GPU3 NV2, GPU3->GPU0 NV1
        with_cells(load("01_"), ("GPU5", "GPU1", "NV1")),  # GPU1->GPU5 NV2 on the full DGX-1
    ],
    ids=["p3-8xlarge", "dgx1"],
)
def test_asymmetric_nv_cell_on_the_cube_mesh_is_degraded(topo: TopoMatrix) -> None:
    found = [f for f in node_findings(topo, host="h") if f.code is FindingCode.TOPO_NVLINK_DEGRADED]
    assert len(found) == 1 and found[0].severity is Severity.CRITICAL
    assert "asymmetry" in found[0].message and set(found[0].details.values()) == {"NV1", "NV2"}


def _cube_fleet(odd: TopoMatrix, good: TopoMatrix, n_good: int = 3) -> tuple[NodeFacts, Fleet]:
    nodes = [NodeFacts(host=f"p3-{i}", topo=good) for i in range(n_good)]
    bad = NodeFacts(host="p3-odd", topo=odd)
    return bad, Fleet(nodes=[*nodes, bad])


def test_dgx1_with_a_lost_lane_is_degraded_against_its_peers_not_on_its_own() -> None:
    """Fixture 01 with GPU0-GPU3 at NV1 both ways (one of the two lanes lost): GPU0 and GPU3 have 5 lanes, but
    nothing in the node's own matrix says which count is right; three peers with NV2 there do."""
    dgx1 = load("01_")
    lost = with_cells(dgx1, ("GPU0", "GPU3", "NV1"), ("GPU3", "GPU0", "NV1"))
    assert degraded(node_findings(lost)) == []
    bad, fleet = _cube_fleet(lost, dgx1)
    found = topo_peers_rule(bad, fleet)
    assert [(f.code, f.severity, f.subject) for f in found] == [
        (FindingCode.TOPO_MISMATCH_PEERS, Severity.WARNING, "GPU0-GPU3"),
        (FindingCode.TOPO_NVLINK_DEGRADED, Severity.CRITICAL, "GPU0-GPU3"),
    ]
    d = found[1]
    assert d.nodes == ["p3-odd"] and "NV1 here, NV2 on 3 of 3 peers" in d.message
    assert d.details == {"here": "NV1", "majority": "NV2", "majority_count": 3, "peers": 3, "nvlinks_short": 1}
    for good in fleet.nodes[:3]:
        assert topo_peers_rule(good, fleet) == []
    # the same through the fleet-free API
    assert peer_findings(lost, [dgx1] * 3, host="p3-odd")[1] == found


def test_p3_8xlarge_with_a_lost_lane_is_degraded_against_its_peers() -> None:
    good = parse_topo(P3_8XLARGE)
    lost = with_cells(good, ("GPU2", "GPU3", "NV1"), ("GPU3", "GPU2", "NV1"))
    assert degraded(node_findings(lost)) == []
    bad, fleet = _cube_fleet(lost, good)
    assert degraded(topo_peers_rule(bad, fleet)) == [("GPU2-GPU3", Severity.CRITICAL)]


def test_a_differently_wired_slice_with_the_same_lanes_is_a_mismatch_not_a_degradation() -> None:
    """GPUs 0-3 of the NDv2 board beside three p3.8xlarge nodes (GPU model unknown: no nvidia-smi -q -x): its
    cells differ, but it has as many NVLink lanes (9) as they do, so nothing was lost."""
    ndv2 = sliced(load("02_"), ["GPU0", "GPU1", "GPU2", "GPU3"])
    p3 = parse_topo(P3_8XLARGE)
    assert sum(nvlink_report(ndv2).per_gpu.values()) == sum(nvlink_report(p3).per_gpu.values()) == 18
    bad, fleet = _cube_fleet(ndv2, p3)
    found = topo_peers_rule(bad, fleet)
    assert found and {f.code for f in found} == {FindingCode.TOPO_MISMATCH_PEERS}


def test_a_cell_the_node_already_condemns_is_not_condemned_twice_by_the_peers() -> None:
    """Fixture 05 with GPU2-GPU5 at NV6: the node rule names it; the peer rule adds only the mismatch."""
    good = load("05_")
    bad_topo = with_cells(good, ("GPU2", "GPU5", "NV6"), ("GPU5", "GPU2", "NV6"))
    bad, fleet = _cube_fleet(bad_topo, good)
    assert degraded(topo_node_rule(bad, fleet)) == [("GPU2-GPU5", Severity.CRITICAL)]
    assert [(f.code, f.subject) for f in topo_peers_rule(bad, fleet)] == [
        (FindingCode.TOPO_MISMATCH_PEERS, "GPU2-GPU5")
    ]
