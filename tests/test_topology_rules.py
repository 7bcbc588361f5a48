"""orchestrator/diagnosis/rules_topo.py: TOPO_* findings for NodeFacts, including the peer comparison."""

from __future__ import annotations

from orchestrator.diagnosis.base import Fleet
from orchestrator.diagnosis.rules_topo import RULES, topo_node_rule, topo_peers_rule
from probes.contracts import FindingCode
from probes.facts import NodeFacts
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
