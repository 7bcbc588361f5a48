"""NCCL_BUSBW_LOW against the network line rate (orchestrator/diagnosis/rules_nccl.fabric_busbw_rule), on real
nccl-tests captures (tests/fixtures/nccl, SOURCES in its README) beside real ibstat output. The two come from
different machines of the same fabric class: each pairing is a constructed case, named in the test."""

from __future__ import annotations

from pathlib import Path

from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.rules_nccl import fabric_busbw_rule
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.probes.catalog import NamedNcclTests
from fleetdx.probes.contracts import Severity
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.ibstat import parse_ibstat
from fleetdx.probes.parsers.nccl_tests import parse_nccl_tests

FIX = Path(__file__).parent / "fixtures"
IBSTAT_H100 = (FIX / "host" / "ibstat_01_h100-node_8x-cx7-ib-400_4x-cx6dx-eth_some-down_gpud-testdata.txt").read_text()


def _hdr_single_port() -> str:
    """The first CA of the real ibstat capture, its rate set to HDR's 200 (what an HDR HCA prints): one Active
    HDR port, the fabric of the A100-PCIe posts (fixtures 21, 22: 'HDR IB')."""
    first = IBSTAT_H100.split("CA 'mlx5_1'")[0]
    return first.replace("Rate: 400", "Rate: 200")


def _node(nccl_file: str, ibstat: str) -> NodeFacts:
    text = (FIX / "nccl" / nccl_file).read_text()
    return NodeFacts(
        host="node-a",
        ib=parse_ibstat(ibstat),
        nccl_tests=[NamedNcclTests(file=nccl_file, report=parse_nccl_tests(text))],
    )


def test_a100_pcie_over_hdr_at_a_quarter_of_line_rate_is_low() -> None:
    # fixture 21: 2 nodes x 1 A100-PCIE over HDR IB, peak busbw 6.44 GB/s (the poster calls it bad); HDR = 25 GB/s
    node = _node("21_all_reduce_A100PCIe_2node_HDR_IB_GDRDMA_crosssocket_slow_ncclinfo.txt", _hdr_single_port())
    (f,) = fabric_busbw_rule(node, Fleet(nodes=[node]))
    assert f.code is FindingCode.NCCL_BUSBW_LOW and f.severity is Severity.WARNING
    assert len(f.nodes) == 2 and f.details["line_rate_gbps"] == 25.0
    assert f.details["peak_busbw_gbps"] == 6.44 and f.details["ratio"] < 0.5


def test_after_the_nps4_change_still_low() -> None:
    node = _node("22_all_reduce_A100PCIe_2node_HDR_IB_noGDR_after_NPS4_ncclinfo.txt", _hdr_single_port())
    (f,) = fabric_busbw_rule(node, Fleet(nodes=[node]))
    assert f.details["peak_busbw_gbps"] == 9.0  # the poster: "still low"


def test_b200_at_full_speed_is_not_low() -> None:
    # fixture 17: 2 nodes x 8 B200, 702.91 GB/s, presented as expected; 8x400G IB + 100G Ethernet ports
    node = _node("17_all_reduce_B200x16_2node_IB_dstack_docs_hash_stripped.txt", IBSTAT_H100)
    assert fabric_busbw_rule(node, Fleet(nodes=[node])) == []


def test_sockets_are_left_to_the_transport_fallback() -> None:
    node = _node("15_all_reduce_L40Sx2_2node_socket_IBdisabled.txt", _hdr_single_port())
    assert fabric_busbw_rule(node, Fleet(nodes=[node])) == []


def test_no_ibstat_no_reference() -> None:
    text = (FIX / "nccl" / "21_all_reduce_A100PCIe_2node_HDR_IB_GDRDMA_crosssocket_slow_ncclinfo.txt").read_text()
    node = NodeFacts(host="node-a", nccl_tests=[NamedNcclTests(file="x", report=parse_nccl_tests(text))])
    assert fabric_busbw_rule(node, Fleet(nodes=[node])) == []
