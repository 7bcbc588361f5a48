"""Topology analyses on real ``nvidia-smi topo -m`` outputs (tests/fixtures/topo/, see SOURCES-topo.md).

Every expected value below was read from the fixture files by eye.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis.topo_findings import node_findings
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.probes.parsers.topo import TopoMatrix, parse_topo
from fleetdx.topology.analyses import affinity_issues, nearest_nics, nic_report, nvlink_report, remote_gpu_pairs
from fleetdx.topology.binding import advise
from fleetdx.topology.contracts import AffinityIssueKind
from fleetdx.topology.subset import best_subset
from tests.topology_util import check_against_brute_force

FIX = Path(__file__).parent / "fixtures" / "topo"
MATRICES = [
    "01_dgx1-v100_8gpu-4nic_mlx5-cols_legacy-legend.txt",
    "02_azure-ndv2-v100_8gpu-0nic_X-left-aligned.txt",
    "03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt",
    "05_aws-p4d-a100_8gpu-0nic_nv12.txt",
    "06_aws-p5-h100_8gpu-0nic_nv18.txt",
    "07_aws-g6e-l40s_4gpu-0nic_node.txt",
    "10_h100-sxm_8gpu-0nic_no-gpu-numa-id_no-legend.txt",
    "11_tesla-p40_8gpu-1nic_soc-legacy_tabs.txt",
    "13_princeton-della-a100-sxm4_4gpu-1nic_nv4_tabs.txt",
    "15_princeton-traverse-ac922-v100_1gpu-4nic_numa-list.txt",
    "16_princeton-traverse-ac922-v100_4gpu-4nic_nv3_power9_hdr-5sp.txt",
    "19_consumer-2x-rtx3090-nvlink_2gpu-0nic_ryzen5900x.txt",
    "20_workstation-3x-rtx-a6000_3gpu-0nic_nvlink-pair-plus-node.txt",
    "21_h100-sxm_8gpu-9nic_sglang-env_ansi-remnants_bond.txt",
    "23_gb200-tray_4gpu-8nic_numa-list_openshift.txt",
    "24_aws-eks-single-gpu_1gpu-0nic_no-legend_tabs.txt",
    "25_pcie-4gpu_phb_0nic_litgpt-test_no-final-newline.txt",
    "27_tesla-k80_4gpu-mlx4_soc-legacy_cgroup-affinity_legend-deindented.txt",
]


def load(prefix: str) -> TopoMatrix:
    matches = [m for m in MATRICES if m.startswith(prefix)]
    path = FIX / matches[0]
    if not path.exists():
        pytest.skip(f"{path} not present (the topo parser work copies tests/fixtures/topo/)")
    try:
        return parse_topo(path.read_text(encoding="utf-8"))
    except NotImplementedError:
        pytest.skip("parse_topo is not implemented yet")


def findings_by_code(topo: TopoMatrix) -> dict[FindingCode, list[str]]:
    out: dict[FindingCode, list[str]] = {}
    for f in node_findings(topo, host="h"):
        out.setdefault(f.code, []).append(f.subject)
    return out


@pytest.mark.parametrize("name", MATRICES)
def test_best_subset_matches_brute_force_on_every_fixture(name: str) -> None:
    check_against_brute_force(load(name[:3]))


def test_03_dgx_a100_three_nics() -> None:
    topo = load("03_")
    near = nearest_nics(topo)
    assert (near["GPU0"].nics, near["GPU0"].link) == (["mlx5_0"], "PXB")
    assert (near["GPU1"].nics, near["GPU1"].link) == (["mlx5_0"], "PXB")
    assert (near["GPU2"].nics, near["GPU2"].link) == (["mlx5_0"], "NODE")
    assert (near["GPU3"].nics, near["GPU3"].link) == (["mlx5_0"], "NODE")
    assert (near["GPU4"].nics, near["GPU4"].link) == (["mlx5_3"], "PXB")
    assert (near["GPU5"].nics, near["GPU5"].link) == (["mlx5_3"], "PXB")
    assert (near["GPU6"].nics, near["GPU6"].link) == (["mlx5_3", "mlx5_bond_0"], "NODE")
    assert (near["GPU7"].nics, near["GPU7"].link) == (["mlx5_3", "mlx5_bond_0"], "NODE")
    rep = nic_report(topo)
    assert rep.remote == ["GPU2", "GPU3", "GPU6", "GPU7"]
    assert rep.load == {"mlx5_0": 4, "mlx5_3": 2, "mlx5_bond_0": 2}
    by = findings_by_code(topo)
    assert by[FindingCode.TOPO_NIC_OVERSUBSCRIBED] == ["mlx5_0"]
    # GPU6/7 are NODE from mlx5_3 and mlx5_bond_0 alike; mlx5_3 already carries GPU4/5, so they get the bond
    remote = ["GPU2-mlx5_0", "GPU3-mlx5_0", "GPU6-mlx5_bond_0", "GPU7-mlx5_bond_0"]
    assert by[FindingCode.TOPO_GPU_NIC_REMOTE] == remote
    assert FindingCode.TOPO_GPU_PAIR_SYS not in by and FindingCode.TOPO_NVLINK_DEGRADED not in by
    adv = advise(topo, 2)
    assert adv.gpus == ["GPU0", "GPU1"] and adv.min_link == "NV12"
    assert [(r.numa_node, r.nic) for r in adv.ranks] == [(0, "mlx5_0"), (0, "mlx5_0")]
    assert adv.env["NCCL_IB_HCA"] == "=mlx5_0"
    assert adv.ranks[0].cpus == list(range(0, 32)) + list(range(64, 96))


def test_11_p40_every_gpu_reaches_the_nic_across_the_socket() -> None:
    topo = load("11_")
    near = nearest_nics(topo)
    assert {g: (c.nics, c.link) for g, c in near.items()} == {
        f"GPU{i}": (["mlx5_0"], "SYS") for i in range(8)
    }
    by = findings_by_code(topo)
    assert by[FindingCode.TOPO_GPU_NIC_REMOTE] == [f"GPU{i}-mlx5_0" for i in range(8)]
    assert FindingCode.TOPO_NIC_OVERSUBSCRIBED not in by  # one NIC: nothing to compare it with
    assert remote_gpu_pairs(topo).pairs == []  # PIX within a switch, PXB across
    assert best_subset(topo, 4).gpus == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert best_subset(topo, 4).min_link == "PIX"
    assert best_subset(topo, 5).min_link == "PXB"


def test_20_a6000_workstation_best_pair_is_the_nvlinked_one() -> None:
    topo = load("20_")
    choice = best_subset(topo, 2)
    assert choice.gpus == ["GPU0", "GPU1"] and choice.min_link == "NV4" and choice.ties == 0
    rp = remote_gpu_pairs(topo)
    assert (rp.node_pairs, rp.total_pairs) == (2, 3)
    assert node_findings(topo) == []  # a bridged pair plus a PCIe GPU is by design


@pytest.mark.parametrize("prefix", ["06_", "10_"])
def test_h100_nv18_no_sys_pairs_and_any_four_are_equally_good(prefix: str) -> None:
    topo = load(prefix)
    assert remote_gpu_pairs(topo).pairs == []
    assert nvlink_report(topo).pattern == "NV18"
    choice = best_subset(topo, 4)
    assert choice.min_link == "NV18" and choice.ties == 69  # all C(8,4) = 70 subsets equal
    assert node_findings(topo) == []


def test_01_dgx1_cube_mesh() -> None:
    topo = load("01_")
    assert {g: c.nics for g, c in nearest_nics(topo).items()} == {
        "GPU0": ["mlx5_0"], "GPU1": ["mlx5_0"], "GPU2": ["mlx5_1"], "GPU3": ["mlx5_1"],
        "GPU4": ["mlx5_2"], "GPU5": ["mlx5_2"], "GPU6": ["mlx5_3"], "GPU7": ["mlx5_3"],
    }  # fmt: skip
    rep = nvlink_report(topo)
    assert rep.pattern is None and set(rep.per_gpu.values()) == {6} and rep.short_gpus == []
    rp = remote_gpu_pairs(topo)
    assert (rp.sys_pairs, rp.total_pairs) == (12, 28)
    by = findings_by_code(topo)
    assert list(by) == [FindingCode.TOPO_GPU_PAIR_SYS]
    # the NV2 bonds form an 8-cycle, so no 3 GPUs are pairwise NV2; the two 4-GPU NVLink quads tie
    assert best_subset(topo, 2).min_link == "NV2"
    assert best_subset(topo, 3).min_link == "NV1"
    four = best_subset(topo, 4)
    assert four.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"] and four.min_link == "NV1" and four.ties == 1
    # every GPU prints 0-19,40-59 although GPU0-GPU5 is SYS: a cpuset, not the socket
    assert {i.kind for i in affinity_issues(topo)} == {AffinityIssueKind.SHARED_ACROSS_SYS}


def test_02_azure_ndv2_node_pairs_no_degradation() -> None:
    topo = load("02_")
    rp = remote_gpu_pairs(topo)
    assert (rp.node_pairs, rp.sys_pairs) == (12, 0)
    assert set(nvlink_report(topo).per_gpu.values()) == {6}
    assert node_findings(topo) == []


def test_13_della_single_nic_on_socket_0() -> None:
    topo = load("13_")
    near = nearest_nics(topo)
    assert [near[g].link for g in topo.gpu_names] == ["NODE", "NODE", "SYS", "SYS"]
    assert findings_by_code(topo)[FindingCode.TOPO_GPU_NIC_REMOTE] == [f"GPU{i}-mlx5_0" for i in range(4)]


def test_16_power9_nv3_pairs_and_two_nics_per_socket() -> None:
    topo = load("16_")
    by = findings_by_code(topo)
    assert by[FindingCode.TOPO_GPU_PAIR_SYS] == ["GPU pairs"]
    assert FindingCode.TOPO_NVLINK_DEGRADED not in by
    rails = {r.gpu: r.nic for r in nic_report(topo).rails}
    assert rails == {"GPU0": "mlx5_0", "GPU1": "mlx5_1", "GPU2": "mlx5_2", "GPU3": "mlx5_3"}
    adv = advise(topo, 2)
    assert adv.gpus == ["GPU0", "GPU1"] and adv.min_link == "NV3"
    assert [r.numa_node for r in adv.ranks] == [0, 0]


def test_15_and_23_numa_lists_give_no_single_numa_node() -> None:
    one = load("15_")
    assert advise(one, 1).ranks[0].numa_node is None  # NUMA Affinity 0,8,252-255
    gb = load("23_")
    adv = advise(gb, 4)
    assert [r.numa_node for r in adv.ranks] == [None] * 4  # 0,2-17 and 1,18-33
    assert [r.cpus[0] for r in adv.ranks] == [0, 0, 72, 72]
    assert nic_report(gb).remote == ["GPU0", "GPU1", "GPU2", "GPU3"]
    # every NIC is SYS from every GPU: the rails spread them over the first four NICs
    assert findings_by_code(gb)[FindingCode.TOPO_GPU_NIC_REMOTE] == [f"GPU{i}-mlx5_{i}" for i in range(4)]


def test_21_h100_one_pxb_nic_per_gpu_and_the_bond_unused() -> None:
    topo = load("21_")
    rep = nic_report(topo)
    assert {r.gpu: (r.nic, r.link) for r in rep.rails} == {f"GPU{i}": (f"mlx5_1{i}", "PXB") for i in range(8)}
    assert rep.load["mlx5_bond_0"] == 0 and rep.oversubscribed == [] and rep.remote == []
    adv = advise(topo, 8)
    assert adv.env["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_1{i}" for i in range(8))


def test_27_k80_pix_pairs_prefer_the_gpus_near_the_hca() -> None:
    topo = load("27_")
    rp = remote_gpu_pairs(topo)
    assert (rp.sys_pairs, rp.total_pairs) == (4, 6)
    choice = best_subset(topo, 2)
    assert choice.gpus == ["GPU2", "GPU3"] and choice.min_link == "PIX" and choice.nic_links == ["PHB", "PHB"]
    assert findings_by_code(topo)[FindingCode.TOPO_GPU_NIC_REMOTE] == ["GPU0-mlx4_0", "GPU1-mlx4_0"]
