"""NCCL_DEBUG=INFO log parser on real captured outputs (tests/fixtures/nccl).

Expected values were read by eye from the fixture lines quoted in the comments (``grep "NCCL INFO"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.nccl_log import NcclLog, TransportKind, parse_nccl_log

FIX = Path(__file__).parent / "fixtures" / "nccl"


class Expect(NamedTuple):
    versions: list[str]
    networks: list[str]
    transports: list[str]
    connections: int
    warnings: int
    gdrdma: bool = False
    pxn: bool = False
    collnet_fallback: bool = False
    env: dict[str, str] = {}


GOLDEN: dict[str, Expect] = {
    # one stray "hostname:3442:3442 [0] NCCL INFO Launch mode Parallel" line each
    "01_all_reduce_A100x8_superbench_oldfmt_c0.txt": Expect([], [], [], 0, 0),
    "02_reduce_scatter_A100x8_superbench_oldfmt_c0.txt": Expect([], [], [], 0, 0),
    # "NET/OFI Selected Provider is efa", "Using network AWS Libfabric",
    # "Channel 00 : 1[101d0] -> 8[101c0] [send] via NET/AWS Libfabric/1/GDRDMA", "... via P2P/IPC/read"
    "04_all_reduce_A100x16_p4d_2node_EFA_ncclinfo_tagged_oldfmt.txt": Expect(
        ["2.9.9+cuda11.2"],
        ["AWS Libfabric"],
        ["NET/AWS Libfabric/GDRDMA", "P2P/IPC/read"],
        320,
        0,
        gdrdma=True,
    ),
    # two NCCL builds on the two nodes: 2.26.5 on gdr114, 2.26.2 on gdr116; RoCE devices, no connection
    "13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt": Expect(
        ["2.26.5+cuda12.9", "2.26.2+cuda12.8"], ["IB"], [], 0, 0, env={"NCCL_IB_DISABLE": "0"}
    ),
    # NCCL_DEBUG=VERSION only: the version line, and the launcher's "-x NCCL_IB_DISABLE=1"
    "15_all_reduce_L40Sx2_2node_socket_IBdisabled.txt": Expect(
        ["2.27.3+cuda12.9"], [], [], 0, 0, env={"NCCL_IB_DISABLE": "1", "NCCL_ALGO": "ring"}
    ),
    "20_all_reduce_H100x16_2node_IB_bootstrap_WARN_TestNCCLfailure.txt": Expect(
        ["2.18.3+cuda12.2"], ["IBext_v6"], [], 0, 8
    ),
    # "NCCL_NET_GDR_LEVEL set by environment to SYS",
    # "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IBext_v8/0/GDRDMA"
    "21_all_reduce_A100PCIe_2node_HDR_IB_GDRDMA_crosssocket_slow_ncclinfo.txt": Expect(
        ["2.21.5+cuda12.4"],
        ["IBext_v8"],
        ["NET/IBext_v8/GDRDMA"],
        8,
        0,
        gdrdma=True,
        env={"NCCL_NET_GDR_LEVEL": "SYS"},
    ),
    # "NCCL_NET_GDR_LEVEL set by environment to PXB", "... [send] via NET/IBext_v8/0" (no GDRDMA)
    "22_all_reduce_A100PCIe_2node_HDR_IB_noGDR_after_NPS4_ncclinfo.txt": Expect(
        ["2.21.5+cuda12.4"], ["IBext_v8"], ["NET/IBext_v8"], 8, 0, env={"NCCL_NET_GDR_LEVEL": "PXB"}
    ),
    "23_alltoall_RTX5090x1_socket_illegal_memory_access_ws_collapsed.txt": Expect(
        ["2.25.1+cuda12.4"], ["Socket"], [], 0, 0
    ),
    # "CollNet 00/0 : 4 [receive] via COLLNET/SHARP/0/GDRDMA"; 4 WARN "SHARP ... Datatypes not supported"
    "28_all_reduce_A100x8_4node_IB_CollNet_SHARP_hang_no_results.txt": Expect(
        ["2.23.4+cuda12.4"],
        ["IBext_v8"],
        ["COLLNET/SHARP/GDRDMA"],
        4,
        4,
        gdrdma=True,
        env={"NCCL_COLLNET_ENABLE": "1"},
    ),
    # "via P2P/CUMEM/read", "via NET/IBext_v8/5(2)/GDRDMA" (PXN), "WARN Cannot initialize CollNet, ..."
    "31_all_reduce_A100x8_4node_IB_CollNet_fallback_P2P_CUMEM_GDRDMA_PXN_ncclinfo.txt": Expect(
        ["2.23.4+cuda12.4"],
        ["IBext_v8"],
        ["COLLNET/SHARP/GDRDMA", "NET/IBext_v8/GDRDMA", "P2P/CUMEM/read"],
        86,
        8,
        gdrdma=True,
        pxn=True,
        collnet_fallback=True,
    ),
    "all_reduce_perf_NCCL_DEBUG_INFO.txt": Expect(["2.28.9+cuda13.0"], ["Socket"], [], 0, 0),
    "nccl_debug_info_1rank.txt": Expect(["2.28.9+cuda13.0"], ["Socket"], [], 0, 0),
}

#: fixtures with no NCCL line at all: the log parser refuses them
NOT_LOGS = [
    "03_alltoall_A100x8_superbench_oldfmt_c0.txt",
    "05_all_reduce_A100x16_p4de_2node_EFA_srun_prefix.txt",
    "08_all_reduce_GH200x8_2node_slingshot_healthy.txt",
    "09_all_reduce_GH200x8_2node_slingshot_noCXIhook_degraded.txt",
    "12_multi_RTX2080Tix2_PCIe_noP2P_allreduce_allgather_bcast_reduce_alltoall.txt",
    "17_all_reduce_B200x16_2node_IB_dstack_docs_hash_stripped.txt",
    "25_all_reduce_RTX5090x4_PCIe_noP2P_after_NCCL2262_fix.txt",
    "all_gather_perf_-d_all.txt",
    "all_reduce_perf_-I1_-J.json",
    "all_reduce_perf_-I1_-J.txt",
    "all_reduce_perf_-b8_-e512M_-f2_-g1.txt",
    "all_reduce_perf_-g2_error_one_gpu.txt",
    "all_reduce_perf_-h.txt",
    "all_reduce_perf_-t2_error_one_gpu.txt",
    "sendrecv_perf_-g1.txt",
]


def parse_fixture(name: str) -> NcclLog:
    return parse_nccl_log((FIX / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden(name: str) -> None:
    exp = GOLDEN[name]
    log = parse_fixture(name)
    assert log.nccl_versions == exp.versions
    assert log.networks == exp.networks
    assert log.transports == exp.transports
    assert len(log.connections) == exp.connections
    assert len(log.warnings) == exp.warnings
    assert log.uses_gdrdma is exp.gdrdma
    assert log.uses_pxn is exp.pxn
    assert log.collnet_fallback is exp.collnet_fallback
    for key, value in exp.env.items():
        assert log.env[key] == value


@pytest.mark.parametrize("name", NOT_LOGS)
def test_no_nccl_line_is_a_parse_error(name: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_fixture(name)
    assert info.value.fmt == "nccl-log"


def test_efa_plugin_and_p2p_ipc() -> None:
    log = parse_fixture("04_all_reduce_A100x16_p4d_2node_EFA_ncclinfo_tagged_oldfmt.txt")
    assert log.ofi_provider == "efa"
    assert log.hosts == ["nccl-tests-efa-16-worker-0", "nccl-tests-efa-16-worker-1"]
    assert log.kinds() == {TransportKind.NET, TransportKind.P2P}
    # "[1,1]<stdout>:nccl-tests-efa-16-worker-0:26:68 [1] NCCL INFO Channel 00 : 1[101d0] -> 8[101c0] [send]
    #  via NET/AWS Libfabric/1/GDRDMA" is the first connection line of the file
    first = log.connections[0]
    assert (first.host, first.channel, first.src_rank, first.dst_rank, first.direction) == (
        "nccl-tests-efa-16-worker-0",
        0,
        1,
        8,
        "send",
    )
    assert (first.net_name, first.nic, first.gdrdma) == ("AWS Libfabric", 1, True)


def test_roce_devices() -> None:
    """13: "NET/IB : Using [0]rocep4s0f0:1/RoCE [1]rocep137s0f0:1/RoCE [RO]; OOB enp129s0f0:..."."""
    log = parse_fixture("13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt")
    gdr114 = [(d.name, d.link_layer) for d in log.net_devices if d.host == "gdr114"]
    assert gdr114 == [("rocep4s0f0:1", "RoCE"), ("rocep137s0f0:1", "RoCE")]
    assert {d.name for d in log.net_devices if d.host == "gdr116"} == {"mlx5_0:1", "mlx5_2:1"}


def test_pxn_proxy_and_cumem() -> None:
    """31: "gpu36:20776:20833 [1] NCCL INFO Channel 00/0 : 3[1] -> 4[0] [send] via NET/IBext_v8/5(2)/GDRDMA"
    (PXN: NIC 5 of local rank 2's GPU)."""
    log = parse_fixture("31_all_reduce_A100x8_4node_IB_CollNet_fallback_P2P_CUMEM_GDRDMA_PXN_ncclinfo.txt")
    pxn = next(c for c in log.connections if c.transport == "NET/IBext_v8/5(2)/GDRDMA")
    assert (pxn.host, pxn.src_rank, pxn.dst_rank, pxn.nic, pxn.pxn_proxy_rank) == ("gpu36", 3, 4, 5, 2)
    assert any(c.kind is TransportKind.P2P and c.transport == "P2P/CUMEM/read" for c in log.connections)
    assert sum("Cannot initialize CollNet" in w.text for w in log.warnings) == 4
    assert {d.name for d in log.net_devices} >= {"mlx5_2:1", "mlx5_0:1", "mlx5_6:1"}
    assert all(d.flags == ["SHARP"] and d.link_layer == "IB" for d in log.net_devices)


def test_socket_only_vm() -> None:
    """h100 VM: "NET/IB : No device found.", "NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'"."""
    log = parse_fixture("nccl_debug_info_1rank.txt")
    assert log.ib_no_device is True
    assert log.gdr_disabled == ["0 'eth0'"]
    assert log.net_plugin_failures == ["Failed to initialize NET plugin IB"]
    assert [(d.net, d.name) for d in log.net_devices] == [("Socket", "eth0:192.0.2.2<0>")]


def test_warn_lines_keep_host_and_line() -> None:
    log = parse_fixture("20_all_reduce_H100x16_2node_IB_bootstrap_WARN_TestNCCLfailure.txt")
    assert all(w.host == "h100-4" for w in log.warnings)
    assert all("neither AF_INET(2) nor AF_INET6(10)" in w.text for w in log.warnings)
    lines = (
        (FIX / "20_all_reduce_H100x16_2node_IB_bootstrap_WARN_TestNCCLfailure.txt").read_text().splitlines()
    )
    assert all("NCCL WARN" in lines[w.line - 1] for w in log.warnings)
