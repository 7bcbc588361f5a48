"""orchestrator/diagnosis/rules_topo.py: TOPO_* findings for NodeFacts, including the peer comparison."""

from __future__ import annotations

from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.rules_topo import RULES, gpu_model, topo_node_rule, topo_peers_rule
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.smi_xml import SmiGpu, SmiReport
from tests.topology_util import make_topo, uniform

CPUS = [list(range(0, 8))] * 2 + [list(range(8, 16))] * 2
GOOD = make_topo(uniform(4, "NV4"), nic_cols=["PIX", "PIX", "SYS", "SYS"], nic_names=["mlx5_0"], cpus=CPUS)


def _with(cell: str) -> object:
    rows = [r.split() for r in uniform(4, "NV4")]
    rows[1][2] = rows[2][1] = cell
    return make_topo(
        [" ".join(r) for r in rows], nic_cols=["PIX", "PIX", "SYS", "SYS"], nic_names=["mlx5_0"], cpus=CPUS
    )


def test_rules_list_is_explicit() -> None:
    assert RULES == [topo_node_rule, topo_peers_rule]


def test_node_rule_sets_the_host_and_skips_nodes_without_a_matrix() -> None:
    bad = NodeFacts(host="gpu07", topo=_with("SYS"))
    fleet = Fleet(nodes=[bad])
    found = topo_node_rule(bad, fleet)
    assert {f.node for f in found} == {"gpu07"}
    assert {f.code for f in found} >= {
        FindingCode.TOPO_NVLINK_DEGRADED,
        FindingCode.TOPO_GPU_PAIR_SYS,
        FindingCode.TOPO_GPU_NIC_REMOTE,
    }
    assert topo_node_rule(NodeFacts(host="x"), fleet) == []


def test_peer_rule_names_the_cell_against_the_majority() -> None:
    nodes = [NodeFacts(host=f"gpu{i:02d}", topo=GOOD) for i in range(1, 5)]
    odd = NodeFacts(host="gpu05", topo=_with("NV3"))
    fleet = Fleet(nodes=[*nodes, odd, NodeFacts(host="gpu06")])
    found = topo_peers_rule(odd, fleet)
    assert [(f.code, f.subject, f.message) for f in found] == [
        (FindingCode.TOPO_MISMATCH_PEERS, "GPU1-GPU2", "GPU1-GPU2 is NV3 here, NV4 on 4 of 4 peers")
    ]
    assert topo_peers_rule(nodes[0], fleet) == []  # 3 of 4 peers agree with it; gpu05 is the odd one


def _smi(name: str) -> SmiReport:
    return SmiReport(gpus=[SmiGpu(index=i, bus_id=f"00000000:{i:02X}:00.0", name=name) for i in range(4)])


def test_peers_are_grouped_by_gpu_model() -> None:
    a100 = [NodeFacts(host=f"a{i}", topo=GOOD, smi=_smi("NVIDIA A100-SXM4-80GB")) for i in range(2)]
    h100 = [NodeFacts(host=f"h{i}", topo=_with("NV3"), smi=_smi("NVIDIA H100 80GB HBM3")) for i in range(3)]
    odd = NodeFacts(host="a9", topo=_with("NV3"), smi=_smi("NVIDIA A100-SXM4-80GB"))
    fleet = Fleet(nodes=[*a100, *h100, odd])
    assert gpu_model(odd) == "NVIDIA A100-SXM4-80GB"
    # among A100 peers (2), NV4 is the majority; the three H100 nodes (NV3) are not its peers
    assert [f.message for f in topo_peers_rule(odd, fleet)] == ["GPU1-GPU2 is NV3 here, NV4 on 2 of 2 peers"]
    # without the model, the 5 other nodes would make NV3 the majority and the A100 nodes the odd ones
    bare = NodeFacts(host="x", topo=GOOD)
    assert [f.message for f in topo_peers_rule(bare, fleet)] == ["GPU1-GPU2 is NV4 here, NV3 on 4 of 6 peers"]
