"""A node's matrix against the majority of its peers."""

from __future__ import annotations

from fleetdx.orchestrator.diagnosis.topo_findings import peer_findings
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.topology.fleet import compare_to_peers
from tests.topology_util import make_topo, uniform

COLS = ["PXB NODE", "PXB NODE", "NODE PXB", "NODE PXB"]
NICS = ["mlx5_0", "mlx5_2"]


def _node(cols: list[str] = COLS, cell01: str = "NV4") -> object:
    rows = [r.split() for r in uniform(4, "NV4")]
    rows[0][1] = rows[1][0] = cell01
    return make_topo([" ".join(r) for r in rows], nic_cols=cols, nic_names=NICS)


def test_names_the_differing_cell_with_the_peer_count() -> None:
    bad = _node(cols=["PXB NODE", "PXB NODE", "NODE PXB", "NODE SYS"])
    peers = [_node() for _ in range(31)] + [bad]
    cmp = compare_to_peers(bad, [_node() for _ in range(32)])
    assert [d.sentence() for d in cmp.diffs] == ["GPU3-mlx5_2 is SYS here, PXB on 32 of 32 peers"]
    cmp2, findings = peer_findings(bad, peers, host="n07")
    assert cmp2.diffs[0].sentence() == "GPU3-mlx5_2 is SYS here, PXB on 31 of 32 peers"
    assert [(f.code, f.subject, f.node) for f in findings] == [
        (FindingCode.TOPO_MISMATCH_PEERS, "GPU3-mlx5_2", "n07")
    ]


def test_gpu_cells_are_compared_too() -> None:
    cmp = compare_to_peers(_node(cell01="NV3"), [_node(), _node(), _node()])
    assert [(d.a, d.b, d.here, d.majority) for d in cmp.diffs] == [("GPU0", "GPU1", "NV3", "NV4")]


def test_no_majority_no_finding_and_too_few_peers() -> None:
    other = _node(cols=["NODE NODE", "PXB NODE", "NODE PXB", "NODE PXB"])
    assert compare_to_peers(_node(), [_node(), other]).diffs == []  # 1 of 2 is not a majority for GPU0-mlx5_0
    assert compare_to_peers(_node(cell01="NV2"), [_node()]).diffs == []  # one peer: cannot tell who is odd


def test_peers_with_other_devices_are_not_comparable() -> None:
    eight = make_topo(uniform(8, "NV18"))
    cmp = compare_to_peers(_node(), [eight, eight, eight])
    assert cmp.peers == 0 and cmp.diffs == []
