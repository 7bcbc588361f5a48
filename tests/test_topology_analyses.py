"""Node analyses and TOPO_* findings on matrices built in the test (real outputs: test_topology_fixtures)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetdx.orchestrator.diagnosis.topo_findings import node_findings
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.probes.contracts import Severity
from fleetdx.topology.analyses import affinity_issues, nearest_nics, nic_report, nvlink_report, remote_gpu_pairs
from fleetdx.topology.binding import advise
from fleetdx.topology.contracts import AffinityIssueKind
from fleetdx.topology.node_graph import DeviceKind, build_node_graph
from tests.topology_util import make_topo, random_topo, uniform

# the DGX-1 hybrid cube-mesh GPU block (NV1/NV2/SYS), as nvidia-smi prints it on a DGX-1
DGX1 = [
    "X NV1 NV1 NV2 NV2 SYS SYS SYS",
    "NV1 X NV2 NV1 SYS NV2 SYS SYS",
    "NV1 NV2 X NV2 SYS SYS NV1 SYS",
    "NV2 NV1 NV2 X SYS SYS SYS NV1",
    "NV2 SYS SYS SYS X NV1 NV1 NV2",
    "SYS NV2 SYS SYS NV1 X NV2 NV1",
    "SYS SYS NV1 SYS NV1 NV2 X NV2",
    "SYS SYS SYS NV1 NV2 NV1 NV2 X",
]


def _set(rows: list[str], i: int, j: int, cell: str) -> list[str]:
    grid = [r.split() for r in rows]
    grid[i][j] = grid[j][i] = cell
    return [" ".join(r) for r in grid]


def codes(findings: list) -> list[FindingCode]:  # type: ignore[type-arg]
    return [f.code for f in findings]


def test_nvswitch_node_is_clean() -> None:
    topo = make_topo(uniform(8, "NV18"), cpus=[list(range(48))] * 4 + [list(range(48, 96))] * 4)
    rep = nvlink_report(topo)
    assert rep.pattern == "NV18" and rep.weaker == [] and rep.short_gpus == [] and rep.asymmetric == []
    assert rep.expected_per_gpu == 7 * 18
    assert remote_gpu_pairs(topo).pairs == []
    assert node_findings(topo) == []


def test_one_bond_at_nv17_among_nv18_is_degraded() -> None:
    topo = make_topo(_set(uniform(8, "NV18"), 2, 5, "NV17"))
    rep = nvlink_report(topo)
    assert [(c.a, c.b, c.link) for c in rep.weaker] == [("GPU2", "GPU5", "NV17")]
    found = [f for f in node_findings(topo, host="n1") if f.code is FindingCode.TOPO_NVLINK_DEGRADED]
    assert [(f.subject, f.severity, f.node) for f in found] == [("GPU2-GPU5", Severity.CRITICAL, "n1")]
    assert found[0].details == {"cell": "NV17", "pattern": "NV18"}


def test_pair_without_nvlink_on_an_nvswitch_system_is_degraded() -> None:
    topo = make_topo(_set(uniform(8, "NV12"), 0, 7, "SYS"))
    assert [(c.a, c.b, c.link) for c in nvlink_report(topo).weaker] == [("GPU0", "GPU7", "SYS")]
    assert FindingCode.TOPO_GPU_PAIR_SYS in codes(node_findings(topo))


def test_dgx1_cube_mesh_has_no_pair_pattern_and_is_not_degraded() -> None:
    rep = nvlink_report(make_topo(DGX1))
    assert rep.pattern is None
    assert rep.weaker == []
    assert set(rep.per_gpu.values()) == {6}  # 2x NV1 + 2x NV2 per GPU
    assert rep.short_gpus == []


def test_dgx1_with_one_nv2_down_to_nv1_names_both_gpus() -> None:
    rep = nvlink_report(make_topo(_set(DGX1, 0, 3, "NV1")))
    assert rep.expected_per_gpu == 6
    assert rep.short_gpus == ["GPU0", "GPU3"]


def test_bridged_pair_beside_a_pcie_gpu_is_by_design() -> None:
    rep = nvlink_report(make_topo(["X NV4 NODE", "NV4 X NODE", "NODE NODE X"]))
    assert rep.pattern is None and rep.weaker == [] and rep.short_gpus == []


def test_nvlink_asymmetry_is_reported() -> None:
    topo = make_topo(uniform(4, "NV4"))
    links = {k: dict(v) for k, v in topo.links.items()}
    links["GPU1"]["GPU2"] = "NV3"
    topo = topo.model_copy(update={"links": links})
    rep = nvlink_report(topo)
    assert [(a.a, a.b, a.ab, a.ba) for a in rep.asymmetric] == [("GPU1", "GPU2", "NV3", "NV4")]


def test_remote_pairs_and_share_on_dgx1() -> None:
    rp = remote_gpu_pairs(make_topo(DGX1))
    assert rp.sys_pairs == 12 and rp.node_pairs == 0 and rp.total_pairs == 28
    assert rp.share == 12 / 28
    f = [x for x in node_findings(make_topo(DGX1)) if x.code is FindingCode.TOPO_GPU_PAIR_SYS]
    assert len(f) == 1 and f[0].details["sys_pairs"] == 12
    assert f[0].details["cells"]["GPU0-GPU5"] == "SYS"  # type: ignore[index]


def test_node_pairs_count_but_only_sys_raises_a_finding() -> None:
    topo = make_topo(uniform(4, "NODE"))
    rp = remote_gpu_pairs(topo)
    assert (rp.node_pairs, rp.sys_pairs, rp.share) == (6, 0, 1.0)
    assert FindingCode.TOPO_GPU_PAIR_SYS not in codes(node_findings(topo))


TWO_SOCKET_NICS = dict(
    nic_cols=[
        "PXB SYS SYS",
        "PXB SYS SYS",
        "NODE SYS SYS",
        "NODE SYS SYS",
        "SYS PXB NODE",
        "SYS PXB NODE",
        "SYS NODE NODE",
        "SYS NODE NODE",
    ],
    nic_names=["mlx5_0", "mlx5_3", "mlx5_bond_0"],
)


def test_nearest_nics_rails_and_oversubscription() -> None:
    topo = make_topo(uniform(8, "NV12"), **TWO_SOCKET_NICS)  # type: ignore[arg-type]
    near = nearest_nics(topo)
    assert near["GPU0"].nics == ["mlx5_0"] and near["GPU0"].link == "PXB"
    assert near["GPU2"].link == "NODE"
    assert near["GPU6"].nics == ["mlx5_3", "mlx5_bond_0"] and near["GPU6"].link == "NODE"
    rep = nic_report(topo)
    assert rep.remote == ["GPU2", "GPU3", "GPU6", "GPU7"]
    assert {r.gpu: r.nic for r in rep.rails} == {
        "GPU0": "mlx5_0",
        "GPU1": "mlx5_0",
        "GPU2": "mlx5_0",
        "GPU3": "mlx5_0",
        "GPU4": "mlx5_3",
        "GPU5": "mlx5_3",
        "GPU6": "mlx5_bond_0",
        "GPU7": "mlx5_bond_0",
    }
    assert rep.load == {"mlx5_0": 4, "mlx5_3": 2, "mlx5_bond_0": 2}
    assert rep.oversubscribed == ["mlx5_0"]
    fs = node_findings(topo, host="h")
    assert [f.subject for f in fs if f.code is FindingCode.TOPO_GPU_NIC_REMOTE] == [
        "GPU2-mlx5_0",
        "GPU3-mlx5_0",
        "GPU6-mlx5_bond_0",
        "GPU7-mlx5_bond_0",
    ]
    assert [f.subject for f in fs if f.code is FindingCode.TOPO_NIC_OVERSUBSCRIBED] == ["mlx5_0"]


def test_one_nic_per_gpu_is_not_oversubscribed_and_unused_nic_is_ignored() -> None:
    cols = [" ".join("PXB" if j == i else "NODE" for j in range(5)) for i in range(4)]
    rep = nic_report(make_topo(uniform(4, "NV4"), nic_cols=cols, nic_names=[f"mlx5_{i}" for i in range(5)]))
    assert rep.load["mlx5_4"] == 0 and rep.oversubscribed == []


def test_no_nic_gives_empty_nearest() -> None:
    assert nearest_nics(make_topo(uniform(2, "NV4"))) == {}


def test_affinity_missing_empty_and_shared_across_sockets() -> None:
    topo = make_topo(
        ["X SYS SYS", "SYS X SYS", "SYS SYS X"],
        cpus=[[0, 1], [0, 1], []],
        cpu_raw=["0-1", "0-1", ""],
    )
    kinds = {(i.gpu, i.kind) for i in affinity_issues(topo)}
    assert kinds == {
        ("GPU2", AffinityIssueKind.EMPTY),
        ("GPU0", AffinityIssueKind.SHARED_ACROSS_SYS),
        ("GPU1", AffinityIssueKind.SHARED_ACROSS_SYS),
    }
    fs = [f for f in node_findings(topo) if f.code is FindingCode.TOPO_AFFINITY_MISSING]
    assert [f.subject for f in fs] == ["GPU2"]
    missing = make_topo(["X NV4", "NV4 X"])  # no CPU Affinity column at all
    assert {i.kind for i in affinity_issues(missing)} == {AffinityIssueKind.MISSING}


def test_node_graph_vertices_edges_and_nominal_bandwidth() -> None:
    topo = make_topo(uniform(8, "NV12"), numa=[[0]] * 4 + [[1]] * 4, **TWO_SOCKET_NICS)  # type: ignore[arg-type]
    g = build_node_graph(topo, gpu_model="NVIDIA A100-SXM4-80GB")
    kinds = {v: d["kind"] for v, d in g.nodes(data=True)}
    assert sum(k is DeviceKind.GPU for k in kinds.values()) == 8
    assert kinds["mlx5_bond_0"] is DeviceKind.NIC and kinds["NUMA1"] is DeviceKind.NUMA
    assert g.edges["GPU0", "GPU7"]["link"] == "NV12" and g.edges["GPU0", "GPU7"]["nominal_gbps"] == 300.0
    assert g.edges["GPU0", "mlx5_0"]["nominal_gbps"] == 31.5  # PCIe Gen4 x16
    assert g.has_edge("mlx5_0", "NUMA0") and g.has_edge("mlx5_bond_0", "NUMA1")
    unknown = build_node_graph(topo)
    assert unknown.edges["GPU0", "GPU1"]["nominal_gbps"] is None


@settings(max_examples=80, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 10), nics=st.integers(0, 5))
def test_findings_and_advice_hold_together_on_random_matrices(seed: int, n: int, nics: int) -> None:
    topo = random_topo(random.Random(seed), n, nics)
    rep = nic_report(topo)
    assert sum(rep.load.values()) == (n if nics else 0)  # every GPU gets exactly one rail when NICs exist
    for f in node_findings(topo, host="h"):
        assert f.node == "h" and f.message and f.subject
    adv = advise(topo, n)
    assert adv.gpus == topo.gpu_names  # k = n: every GPU, in row order
    assert [r.local_rank for r in adv.ranks] == list(range(n))
