"""NCCL diagnosis rules on NodeFacts built from the real fixtures (tests/fixtures/nccl).

Where no fixture shows a failure mode (wrong results, sockets despite IB devices), the test derives the input
from a real fixture by changing the one cell or line that carries the fault, and says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.rules_nccl import (
    OLD_ERROR_LIMIT,
    RULES,
    fabric_busbw_rule,
    failed_run_rule,
    hang_rule,
    misconfigured_rule,
    not_mpi_rule,
    transport_fallback_rule,
    wrong_results_rule,
)
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.contracts import Severity
from fleetdx.probes.facts import NamedNcclLog, NamedNcclTests, NodeFacts
from fleetdx.probes.parsers.ibstat import parse_ibstat
from fleetdx.probes.parsers.nccl_log import parse_nccl_log
from fleetdx.probes.parsers.nccl_tests import parse_nccl_tests
from tests.test_parse_nccl_tests import hint_for

FIX = Path(__file__).parent / "fixtures" / "nccl"
HOST = "node-a"


def text_of(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def facts_with_tests(name: str, text: str | None = None) -> NodeFacts:
    report = parse_nccl_tests(text_of(name) if text is None else text, hint_for(name))
    return NodeFacts(host=HOST, nccl_tests=[NamedNcclTests(file=name, report=report)])


def facts_with_log(name: str, text: str | None = None) -> NodeFacts:
    log = parse_nccl_log(text_of(name) if text is None else text)
    return NodeFacts(host=HOST, nccl_logs=[NamedNcclLog(file=name, log=log)])


def run_all(node: NodeFacts) -> list[Finding]:
    fleet = Fleet(nodes=[node])
    return [f for rule in RULES for f in rule(node, fleet)]


def codes(findings: list[Finding]) -> list[FindingCode]:
    return [f.code for f in findings]


@pytest.mark.parametrize(
    "name",
    [
        "01_all_reduce_A100x8_superbench_oldfmt_c0.txt",
        "04_all_reduce_A100x16_p4d_2node_EFA_ncclinfo_tagged_oldfmt.txt",  # error 5e-07 is rounding
        "08_all_reduce_GH200x8_2node_slingshot_healthy.txt",
        "12_multi_RTX2080Tix2_PCIe_noP2P_allreduce_allgather_bcast_reduce_alltoall.txt",
        "17_all_reduce_B200x16_2node_IB_dstack_docs_hash_stripped.txt",
        "all_reduce_perf_-I1_-J.json",
        "sendrecv_perf_-g1.txt",
    ],
)
def test_complete_runs_give_no_finding(name: str) -> None:
    assert run_all(facts_with_tests(name)) == []


def test_nccl_failure_at_init() -> None:
    name = "20_all_reduce_H100x16_2node_IB_bootstrap_WARN_TestNCCLfailure.txt"
    findings = run_all(facts_with_tests(name))
    assert codes(findings) == [FindingCode.NCCL_TEST_FAILED]  # failed, so not also reported as a hang
    f = findings[0]
    # the failure lines name h100-4, one of the run's two hosts: the finding is about it, not the bundle's host
    assert f.severity is Severity.CRITICAL and f.nodes == ["h100-4"] and f.subject == "all_reduce"
    assert "Test NCCL failure common.cu:1057" in f.message
    assert f.details["file"] == name
    errors = f.details["errors"]
    assert isinstance(errors, list) and len(errors) == 6  # first EVIDENCE_LINES lines
    # distinct error lines: one "Test NCCL failure" (printed 8 times), 8 "pid N: Test failure", mpirun's abort
    assert f.details["error_count"] == 10


def test_cuda_illegal_memory_access() -> None:
    findings = run_all(
        facts_with_tests("23_alltoall_RTX5090x1_socket_illegal_memory_access_ws_collapsed.txt")
    )
    assert codes(findings) == [FindingCode.NCCL_TEST_FAILED]
    assert "an illegal memory access was encountered" in findings[0].message
    assert findings[0].subject == "alltoall"


def test_hang_without_table() -> None:
    findings = run_all(facts_with_tests("28_all_reduce_A100x8_4node_IB_CollNet_SHARP_hang_no_results.txt"))
    assert codes(findings) == [FindingCode.NCCL_TEST_HANG]
    f = findings[0]
    assert f.details["rows"] == 0 and f.details["nranks"] == 8 and f.details["last_size_bytes"] is None
    last = f.details["last_lines"]
    assert isinstance(last, list) and last  # what the run printed last, for a person to read
    assert "before the first row" in f.message


def test_table_cut_mid_sweep_is_a_hang() -> None:
    """05 is a table pasted without its footer: nothing says the run ended, so it is reported."""
    findings = run_all(facts_with_tests("05_all_reduce_A100x16_p4de_2node_EFA_srun_prefix.txt"))
    assert codes(findings) == [FindingCode.NCCL_TEST_HANG]
    assert findings[0].details["last_size_bytes"] == 2147483648
    assert "after 29 row(s)" in findings[0].message


def test_non_mpi_build() -> None:
    findings = run_all(facts_with_tests("13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt"))
    assert sorted(codes(findings)) == sorted([FindingCode.NCCL_TEST_FAILED, FindingCode.NCCL_TESTS_NOT_MPI])
    not_mpi = next(f for f in findings if f.code is FindingCode.NCCL_TESTS_NOT_MPI)
    assert not_mpi.details["one_rank_runs"] == 3
    assert not_mpi.details["processes"] == ["gdr114:25043", "gdr114:29905", "gdr116:6409"]
    failed = next(f for f in findings if f.code is FindingCode.NCCL_TEST_FAILED)
    assert "mpirun was unable to launch" in failed.message


def test_wrong_elements_and_out_of_bounds() -> None:
    """08 with the in-place ``#wrong`` of the 1 MiB row set to 12 and the footer to ``1 FAILED``."""
    name = "08_all_reduce_GH200x8_2node_slingshot_healthy.txt"
    lines = text_of(name).splitlines()
    row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["1048576"])
    lines[row] = lines[row][: lines[row].rstrip().rfind(" ")] + "     12"
    lines = [line.replace("Out of bounds values : 0 OK", "Out of bounds values : 1 FAILED") for line in lines]
    findings = run_all(facts_with_tests(name, "\n".join(lines)))
    assert codes(findings) == [FindingCode.NCCL_WRONG_RESULTS]
    ev = findings[0].details
    assert (ev["wrong_total"], ev["out_of_bounds"], ev["bad_row_sizes_bytes"]) == (12, 1, [1048576])


def test_old_format_error_above_limit() -> None:
    """04 with the last row's out-of-place ``error`` 5e-07 changed to 3e+02 (corrupted data)."""
    name = "04_all_reduce_A100x16_p4d_2node_EFA_ncclinfo_tagged_oldfmt.txt"
    text = text_of(name)
    last = next(line for line in reversed(text.splitlines()) if "4294967296" in line)
    bad = last.replace("43.81  5e-07", "43.81  3e+02")
    assert bad != last
    node = facts_with_tests(name, text.replace(last, bad))
    findings = wrong_results_rule(node, Fleet(nodes=[node]))
    assert codes(findings) == [FindingCode.NCCL_WRONG_RESULTS]
    assert findings[0].details["max_old_format_error"] == 300.0
    assert OLD_ERROR_LIMIT > 5e-07  # the real fixture's rounding noise stays below the limit


def test_no_gdrdma_with_ib_devices() -> None:
    """22: "NET/IB : Using [0]mlx5_0:1/IB/SHARP", connections "via NET/IBext_v8/0" (no /GDRDMA)."""
    findings = run_all(facts_with_log("22_all_reduce_A100PCIe_2node_HDR_IB_noGDR_after_NPS4_ncclinfo.txt"))
    assert codes(findings) == [FindingCode.NCCL_TRANSPORT_FALLBACK]
    f = findings[0]
    assert f.severity is Severity.WARNING and f.subject == "GDRDMA"
    assert f.details["NCCL_NET_GDR_LEVEL"] == "PXB" and f.details["example"] == "NET/IBext_v8/0"


def test_collnet_fallback() -> None:
    findings = run_all(
        facts_with_log("31_all_reduce_A100x8_4node_IB_CollNet_fallback_P2P_CUMEM_GDRDMA_PXN_ncclinfo.txt")
    )
    assert codes(findings) == [FindingCode.NCCL_TRANSPORT_FALLBACK]
    assert findings[0].subject == "CollNet" and findings[0].details["NCCL_COLLNET_ENABLE"] == "1"


def test_socket_despite_roce_devices() -> None:
    """13's log with "Using network IB" changed to "Using network Socket": NCCL found RoCE devices."""
    name = "13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt"
    text = text_of(name).replace("NCCL INFO Using network IB", "NCCL INFO Using network Socket")
    node = facts_with_log(name, text)
    findings = transport_fallback_rule(node, Fleet(nodes=[node]))
    assert codes(findings) == [FindingCode.NCCL_TRANSPORT_FALLBACK]
    assert findings[0].subject == "NET/Socket"
    assert "rocep4s0f0:1/RoCE" in findings[0].message


IBSTAT = (
    Path(__file__).parent
    / "fixtures"
    / "host"
    / ("ibstat_01_h100-node_8x-cx7-ib-400_4x-cx6dx-eth_some-down_gpud-testdata.txt")
)


@pytest.mark.parametrize(
    "name",
    [
        "15_all_reduce_L40Sx2_2node_socket_IBdisabled.txt",  # launched with -x NCCL_IB_DISABLE=1
        "nccl_debug_info_1rank.txt",  # "Using network Socket"
    ],
)
def test_sockets_on_a_node_with_active_ib_ports(name: str) -> None:
    """The NCCL log of one machine next to the ibstat facts of an H100 node (9 Active ports): the rule
    combines the two facts it is given; the pairing itself is made up for the test."""
    ib = parse_ibstat(IBSTAT.read_text(encoding="utf-8"))
    node = facts_with_log(name).model_copy(update={"ib": ib})
    findings = transport_fallback_rule(node, Fleet(nodes=[node]))
    assert codes(findings) == [FindingCode.NCCL_TRANSPORT_FALLBACK]
    assert "9 Active RDMA port(s)" in findings[0].message
    ports = findings[0].details["active_rdma_ports"]
    assert isinstance(ports, list) and ports[:2] == ["mlx5_0/1", "mlx5_1/1"]
    assert run_all(facts_with_log(name)) == []  # without ibstat facts nothing says IB was there


@pytest.mark.parametrize(
    "name",
    [
        "04_all_reduce_A100x16_p4d_2node_EFA_ncclinfo_tagged_oldfmt.txt",  # EFA with GDRDMA
        "13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt",  # IB network chosen
        "21_all_reduce_A100PCIe_2node_HDR_IB_GDRDMA_crosssocket_slow_ncclinfo.txt",  # GDRDMA used
        "nccl_debug_info_1rank.txt",  # sockets, but NCCL found no IB device
    ],
)
def test_logs_without_fallback(name: str) -> None:
    assert run_all(facts_with_log(name)) == []


def test_rules_are_pure_and_listed_once() -> None:
    assert RULES == [
        wrong_results_rule,
        failed_run_rule,
        misconfigured_rule,
        hang_rule,
        not_mpi_rule,
        transport_fallback_rule,
        fabric_busbw_rule,
    ]
    assert run_all(NodeFacts(host=HOST)) == []


VARIANTS = Path(__file__).parent / "fixtures" / "nccl_variants"


@pytest.mark.parametrize(
    "name",
    ["all_reduce_perf_mpirun_ofi_abort_before_output.txt", "all_reduce_perf_srun_efa_abort_before_output.txt"],
)
def test_abort_before_any_output_is_a_failed_test(name: str) -> None:
    """An abort (signal 6) before nccl-tests printed anything (tests/fixtures/nccl_variants, modelled on
    nccl-tests#295): a failed test whose evidence is the abort lines, not a parse failure nor a hang."""
    node = facts_with_tests(name, (VARIANTS / name).read_text(encoding="utf-8"))
    findings = run_all(node)
    assert codes(findings) == [FindingCode.NCCL_TEST_FAILED]
    f = findings[0]
    assert f.severity is Severity.CRITICAL and f.subject == "all_reduce"
    assert "aborted (Aborted (6))" in f.message and "before printing any result" in f.message
    assert f.details["signal"] == "Aborted (6)"
    abort_lines = f.details["abort_lines"]
    assert isinstance(abort_lines, list)
    assert any("Signal: Aborted (6)" in str(line) for line in abort_lines)
    assert any("*** Process received signal ***" in str(line) for line in abort_lines)
    assert not any("[ 0]" in str(line) for line in abort_lines)  # backtrace frames are not evidence


def test_abort_lines_reach_the_evidence_after_many_other_errors() -> None:
    """20 (eight ranks' ``Test NCCL failure`` lines and mpirun's notice) followed by the srun abort's
    handler lines: the abort lines are in the evidence although ``errors`` keeps only the first lines."""
    name = "20_all_reduce_H100x16_2node_IB_bootstrap_WARN_TestNCCLfailure.txt"
    abort = (VARIANTS / "all_reduce_perf_srun_efa_abort_before_output.txt").read_text(encoding="utf-8")
    node = facts_with_tests(name, text_of(name) + abort)
    (f,) = failed_run_rule(node, Fleet(nodes=[node]))
    assert f.details["signal"] == "Aborted (6)"
    lines = f.details["abort_lines"]
    assert isinstance(lines, list) and "[gpu-a11:20914] Signal: Aborted (6)" in lines


def test_non_mpi_rows_without_header_or_devices() -> None:
    """13's second launch with every ``#`` line but the footers dropped and no NCCL INFO line: only the
    two processes' interleaved rows and their footers remain; still a build without MPI."""
    lines = text_of("13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt").splitlines()[151:]
    kept = [
        ln
        for ln in lines
        if "NCCL INFO" not in ln and (not ln.startswith("#") or "Out of bounds" in ln or "Avg bus" in ln)
    ]
    name = "all_reduce_perf_-b8_-e1G_-f2_-g1.txt"
    findings = run_all(facts_with_tests(name, "\n".join(kept)))
    assert codes(findings) == [FindingCode.NCCL_TESTS_NOT_MPI]
    assert findings[0].details["one_rank_runs"] == 2 and findings[0].details["nranks"] == [1, 1]


def test_a_test_asking_for_more_gpus_than_the_node_has_is_misconfigured_not_failed() -> None:
    # "Invalid number of GPUs: 2 requested but only 1 were found" (a real capture on a one-GPU VM): before,
    # NCCL_TEST_FAILED condemned the node CRITICAL for a typo in the command
    for name in ("all_reduce_perf_-g2_error_one_gpu.txt", "all_reduce_perf_-t2_error_one_gpu.txt"):
        findings = run_all(facts_with_tests(name))
        assert codes(findings) == [FindingCode.NCCL_TEST_MISCONFIGURED], name
        f = findings[0]
        assert f.severity is Severity.WARNING and "Invalid number of GPUs: 2 requested" in f.message


def test_a_multi_node_run_told_to_use_sockets_despite_named_hcas_is_a_transport_fallback() -> None:
    # the captured command line: mpirun ... -x NCCL_IB_DISABLE=1 ... -x NCCL_IB_HCA=mlx5_1,mlx5_3 ... on two
    # L40S nodes; it reached 8.1 GB/s over TCP. Before: no finding at all (UNKNOWN)
    name = "15_all_reduce_L40Sx2_2node_socket_IBdisabled.txt"
    findings = run_all(facts_with_tests(name))
    (f,) = [f for f in findings if f.code is FindingCode.NCCL_TRANSPORT_FALLBACK]
    assert f.subject == "NET/Socket" and "NCCL_IB_DISABLE=1" in f.message
    assert f.details["NCCL_IB_HCA"] == "mlx5_1,mlx5_3" and f.details["peak_busbw_gbps"] == 8.11


def test_sockets_on_one_node_or_without_rdma_are_no_fallback() -> None:
    name = "15_all_reduce_L40Sx2_2node_socket_IBdisabled.txt"
    no_hca = facts_with_tests(name, text_of(name).replace(" -x NCCL_IB_HCA=mlx5_1,mlx5_3", ""))
    assert transport_fallback_rule(no_hca, Fleet(nodes=[no_hca])) == []  # nothing says this node has RDMA
    one_node = facts_with_tests("all_reduce_perf_-b8_-e512M_-f2_-g1.txt")
    assert transport_fallback_rule(one_node, Fleet(nodes=[one_node])) == []
