"""nccl-tests parser on real captured outputs (tests/fixtures/nccl, from /work/shared/fixtures).

Every expected value below was read by eye from the fixture file (footer lines, last table rows, device
lines) or from the summary table of SOURCES-nccl.md (peak busbw, rank count). ``GOLDEN`` has one entry per
nccl-tests fixture; :func:`test_every_fixture_has_a_golden` fails if a fixture is used by neither this
file nor test_parse_nccl_log.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from fleetdx.probes.contracts import Collective
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.nccl_tests import NcclTestsReport, busbw_factor, collective_from_name, parse_nccl_tests

FIX = Path(__file__).parent / "fixtures" / "nccl"

AR, AG, RS, A2A = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALLTOALL
BC, RD, SR = Collective.BROADCAST, Collective.REDUCE, Collective.SENDRECV


class Run(NamedTuple):
    """Expected facts of one run; ``peak``/``avg``/``oob`` None means "not printed" (checked as None)."""

    collective: Collective | None
    nranks: int | None
    complete: bool
    rows: int
    peak: float | None
    avg: float | None
    oob: int | None
    non_mpi: bool = False


class Expect(NamedTuple):
    runs: list[Run]
    errors: tuple[str, ...] = ()  #: substrings that must appear among the report's error lines


SKIP_PEAK = -1.0  # the 1-GPU reduce of fixture 12 prints absurd busbw (no transfer); not asserted

GOLDEN: dict[str, Expect] = {
    "01_all_reduce_A100x8_superbench_oldfmt_c0.txt": Expect([Run(AR, 8, True, 34, 235.26, 68.4048, 0)]),
    "02_reduce_scatter_A100x8_superbench_oldfmt_c0.txt": Expect([Run(RS, 8, True, 34, 231.52, 60.168, 0)]),
    "03_alltoall_A100x8_superbench_oldfmt_c0.txt": Expect([Run(A2A, 8, True, 34, 226.16, 58.6481, 0)]),
    "04_all_reduce_A100x16_p4d_2node_EFA_ncclinfo_tagged_oldfmt.txt": Expect(
        [Run(AR, 16, True, 30, 43.81, 11.2432, 0)]
    ),
    # a pasted table without banner nor footer: n from busbw/algbw = 78.33/41.78 = 1.875 = 2(n-1)/n, n = 16
    "05_all_reduce_A100x16_p4de_2node_EFA_srun_prefix.txt": Expect(
        [Run(AR, 16, False, 29, 78.33, None, None)]
    ),
    "08_all_reduce_GH200x8_2node_slingshot_healthy.txt": Expect([Run(AR, 8, True, 25, 123.11, 19.7866, 0)]),
    "09_all_reduce_GH200x8_2node_slingshot_noCXIhook_degraded.txt": Expect(
        [Run(AR, 8, True, 25, 6.07, 1.58767, 0)]
    ),
    "12_multi_RTX2080Tix2_PCIe_noP2P_allreduce_allgather_bcast_reduce_alltoall.txt": Expect(
        [
            Run(AR, 2, True, 28, 4.00, 2.05774, 0),
            Run(AG, 2, True, 28, 3.84, 1.6651, 0),
            Run(BC, 2, True, 28, 11.09, 5.07658, 0),
            Run(RD, 2, True, 28, 11.14, 5.23248, 0),
            Run(RD, 1, True, 28, SKIP_PEAK, 202818, 0),
            Run(A2A, 2, True, 28, 4.73, 2.06935, 0),
        ]
    ),
    # first launch: one process of "mpirun -np 2" printed a one-rank table, then mpirun failed on s116;
    # second launch: two one-rank tables (gdr114, gdr116) interleaved, each with its own footer
    "13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt": Expect(
        [
            Run(AR, 1, False, 27, 0.0, None, None, non_mpi=True),
            Run(AR, 1, True, 28, 0.0, 0.0, 0, non_mpi=True),
            Run(AR, 1, True, 28, 0.0, 0.0, 0, non_mpi=True),
        ],
        ("mpirun was unable to launch",),
    ),
    "15_all_reduce_L40Sx2_2node_socket_IBdisabled.txt": Expect([Run(AR, 2, True, 31, 8.14, 3.98762, 0)]),
    # "#" stripped, no device lines: n = 16 from 702.91/374.88 = 1.875
    "17_all_reduce_B200x16_2node_IB_dstack_docs_hash_stripped.txt": Expect(
        [Run(AR, 16, True, 29, 702.91, 137.179, 0)]
    ),
    "20_all_reduce_H100x16_2node_IB_bootstrap_WARN_TestNCCLfailure.txt": Expect(
        [Run(AR, 16, False, 0, None, None, None)], ("Test NCCL failure common.cu:1057 'internal error / '",)
    ),
    "21_all_reduce_A100PCIe_2node_HDR_IB_GDRDMA_crosssocket_slow_ncclinfo.txt": Expect(
        [Run(AR, 2, True, 28, 6.44, 2.36313, 0)]
    ),
    "22_all_reduce_A100PCIe_2node_HDR_IB_noGDR_after_NPS4_ncclinfo.txt": Expect(
        [Run(AR, 2, True, 28, 9.00, 3.60188, 0)]
    ),
    "23_alltoall_RTX5090x1_socket_illegal_memory_access_ws_collapsed.txt": Expect(
        [Run(A2A, 1, False, 0, None, None, None)], ("an illegal memory access was encountered",)
    ),
    "25_all_reduce_RTX5090x4_PCIe_noP2P_after_NCCL2262_fix.txt": Expect(
        [Run(AR, 4, True, 25, 27.28, 9.09703, 0)]
    ),
    "28_all_reduce_A100x8_4node_IB_CollNet_SHARP_hang_no_results.txt": Expect(
        [Run(AR, 8, False, 0, None, None, None)]
    ),
    "31_all_reduce_A100x8_4node_IB_CollNet_fallback_P2P_CUMEM_GDRDMA_PXN_ncclinfo.txt": Expect(
        [Run(AR, 8, True, 15, 23.10, 8.69534, 0)]
    ),
    "all_gather_perf_-d_all.txt": Expect([Run(AG, 1, True, 72, 0.0, 0.0, 0)]),
    "all_reduce_perf_-I1_-J.json": Expect([Run(AR, 1, True, 13, 0.0, 0.0, 0)]),
    "all_reduce_perf_-I1_-J.txt": Expect([Run(AR, 1, True, 13, 0.0, 0.0, 0)]),
    "all_reduce_perf_-b8_-e512M_-f2_-g1.txt": Expect([Run(AR, 1, True, 27, 0.0, 0.0, 0)]),
    "all_reduce_perf_-g2_error_one_gpu.txt": Expect(
        [Run(AR, None, False, 0, None, None, None)], ("Invalid number of GPUs: 2 requested but only 1",)
    ),
    "all_reduce_perf_-t2_error_one_gpu.txt": Expect(
        [Run(AR, None, False, 0, None, None, None)], ("Test failure common.cu:1454",)
    ),
    "all_reduce_perf_NCCL_DEBUG_INFO.txt": Expect([Run(AR, 1, True, 4, 0.0, 0.0, 0)]),
    "sendrecv_perf_-g1.txt": Expect([Run(SR, 1, True, 13, 32214, 2076.3, 0)]),
    # a NCCL_DEBUG=INFO log of torch.distributed: NCCL content, no nccl-tests table
    "nccl_debug_info_1rank.txt": Expect([]),
}

#: files that are not nccl-tests output at all: the parser must refuse them
NOT_NCCL_TESTS = ["all_reduce_perf_-h.txt"]


def hint_for(name: str) -> Collective | None:
    """The collective the fixture's file name says (``all_reduce_perf_...`` or ``02_reduce_scatter_...``)."""
    named = collective_from_name(name)
    if named is not None:
        return named
    by_length = sorted(Collective, key=lambda c: -len(c.value))
    return next((c for c in by_length if f"_{c.value}_" in name), None)


def parse_fixture(name: str) -> NcclTestsReport:
    return parse_nccl_tests((FIX / name).read_text(encoding="utf-8"), hint_for(name))


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden(name: str) -> None:
    expect = GOLDEN[name]
    report = parse_fixture(name)
    assert len(report.runs) == len(expect.runs)
    for run, exp in zip(report.runs, expect.runs, strict=True):
        assert run.collective is exp.collective
        assert run.nranks == exp.nranks
        assert run.complete is exp.complete
        assert len(run.rows) == exp.rows
        if exp.peak != SKIP_PEAK:
            assert run.peak_busbw_gbps == (None if exp.peak is None else pytest.approx(exp.peak))
        assert run.avg_busbw_gbps == (None if exp.avg is None else pytest.approx(exp.avg))
        assert run.out_of_bounds == exp.oob
        assert run.non_mpi_build is exp.non_mpi
        assert run.wrong_total == 0  # no fixture has wrong elements
    for fragment in expect.errors:
        assert any(fragment in e for e in report.errors), (fragment, report.errors)
    if not expect.errors:
        assert report.errors == []


@pytest.mark.parametrize("name", NOT_NCCL_TESTS)
def test_help_text_is_refused(name: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_fixture(name)
    assert info.value.fmt == "nccl-tests"


def test_every_fixture_has_a_golden() -> None:
    from tests.test_parse_nccl_log import GOLDEN as LOG_GOLDEN
    from tests.test_parse_nccl_log import NOT_LOGS

    files = {p.name for p in FIX.iterdir() if p.is_file()}
    used = set(GOLDEN) | set(NOT_NCCL_TESTS) | set(LOG_GOLDEN) | set(NOT_LOGS)
    assert files == used
    assert files <= set(GOLDEN) | set(NOT_NCCL_TESTS)  # every file also goes through this parser


def test_old_format_error_column_and_mpi_tag_prefix() -> None:
    """04: ``[1,0]<stdout>:`` prefixes, old ``error`` column; last row prints ``5e-07`` on both sides."""
    run = parse_fixture("04_all_reduce_A100x16_p4d_2node_EFA_ncclinfo_tagged_oldfmt.txt").runs[0]
    last = run.rows[-1]
    assert (last.size, last.count, last.type, last.redop, last.root) == (
        4294967296,
        1073741824,
        "float",
        "sum",
        None,
    )
    assert last.out_of_place.time_us == 183834
    assert last.out_of_place.error == pytest.approx(5e-07)
    assert last.out_of_place.wrong is None
    assert last.in_place is not None and last.in_place.busbw_gbps == pytest.approx(43.72)
    assert run.max_error == pytest.approx(5e-07)
    assert run.nccl_version == "2.9.9+cuda11.2"
    assert [d.host for d in run.devices].count("nccl-tests-efa-16-worker-1") == 8
    assert run.devices[2].bus_id == "0x20"


def test_unchecked_results_read_as_none() -> None:
    """01 ran with ``-c 0``: ``N/A`` in the error column is "not checked", never 0."""
    run = parse_fixture("01_all_reduce_A100x8_superbench_oldfmt_c0.txt").runs[0]
    assert all(r.out_of_place.error is None and r.out_of_place.wrong is None for r in run.rows)
    assert run.max_error is None


def test_old_alltoall_has_blank_redop() -> None:
    run = parse_fixture("03_alltoall_A100x8_superbench_oldfmt_c0.txt").runs[0]
    assert all(r.redop is None for r in run.rows)
    assert run.rows[-1].size == 8589934592


def test_devices_with_bdf_and_hosts() -> None:
    run = parse_fixture("08_all_reduce_GH200x8_2node_slingshot_healthy.txt").runs[0]
    dev = run.devices[5]
    assert (dev.rank, dev.group, dev.pid, dev.host, dev.device) == (5, 0, 155255, "nid005487", 1)
    assert (dev.bus_id, dev.gpu_name) == ("0019:01:00", "NVIDIA GH200 120GB")


def test_collapsed_whitespace_and_command_line_collective() -> None:
    """23: blanks collapsed (``#Rank 0 Group 0 ...``); collective from ``./alltoall_perf`` without a hint."""
    text = (FIX / "23_alltoall_RTX5090x1_socket_illegal_memory_access_ws_collapsed.txt").read_text()
    run = parse_nccl_tests(text).runs[0]
    assert run.collective is Collective.ALLTOALL
    assert run.devices[0].gpu_name == "NVIDIA GeForce RTX 5090"
    assert run.errors and "illegal memory access" in run.errors[0]


def test_non_mpi_processes_interleaved() -> None:
    runs = parse_fixture("13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt").runs
    assert {d.host for r in runs[1:] for d in r.devices} == {"gdr114", "gdr116"}
    assert {r.nccl_version for r in runs[1:]} == {"2.26.5+cuda12.9", "2.26.2+cuda12.8"}
    assert all(r.rows[-1].size == 1073741824 for r in runs[1:])


def test_per_iteration_columns_text() -> None:
    """-I text: first row ``i_min 5.95 i_max 21.86 i_p99 21.86 i_cv% 49.56`` (out-of-place)."""
    run = parse_fixture("all_reduce_perf_-I1_-J.txt").runs[0]
    first = run.rows[0].out_of_place
    assert first.per_iter is not None
    assert (first.per_iter.min_us, first.per_iter.max_us, first.per_iter.p99_us) == (5.95, 21.86, 21.86)
    assert first.per_iter.cv_pct == 49.56
    assert run.nccl_tests_version == "2.19.6"


def test_json_per_iteration_timings() -> None:
    report = parse_fixture("all_reduce_perf_-I1_-J.json")
    assert report.source_format == "json"
    run = report.runs[0]
    assert run.nccl_version == "2.28.9"
    assert run.devices[0].bus_id == "0000:00:06" and run.devices[0].host == "vm"
    first = run.rows[0]
    assert (first.size, first.count, first.root, first.redop) == (8, 2, -1, "sum")
    assert first.out_of_place.per_iter is not None
    assert first.out_of_place.per_iter.times_us[:3] == [13.632, 7.04, 11.104]
    assert len(first.out_of_place.per_iter.times_us) == 20
    assert first.out_of_place.per_iter.min_us == 5.952
    assert run.out_of_bounds_ok is True and run.avg_busbw_ok is None  # "unchecked"


def test_json_and_text_of_the_same_run_agree_on_sizes() -> None:
    text_rows = parse_fixture("all_reduce_perf_-I1_-J.txt").runs[0].rows
    json_rows = parse_fixture("all_reduce_perf_-I1_-J.json").runs[0].rows
    assert [r.size for r in text_rows] == [r.size for r in json_rows]


def test_datatype_all() -> None:
    run = parse_fixture("all_gather_perf_-d_all.txt").runs[0]
    types = list(dict.fromkeys(r.type for r in run.rows))
    assert types[:3] == ["int8", "uint8", "int32"] and types[-2:] == ["f8e4m3", "f8e5m2"]
    assert len(types) == 12


def test_sendrecv_in_place_unchecked() -> None:
    last = parse_fixture("sendrecv_perf_-g1.txt").runs[0].rows[-1]
    assert last.out_of_place.wrong == 0
    assert last.in_place is not None and last.in_place.wrong is None  # printed N/A


def test_nranks_from_ratio_only_without_devices() -> None:
    run = parse_fixture("17_all_reduce_B200x16_2node_IB_dstack_docs_hash_stripped.txt").runs[0]
    assert run.nranks_source == "busbw_ratio" and run.devices == []
    assert (
        parse_fixture("08_all_reduce_GH200x8_2node_slingshot_healthy.txt").runs[0].nranks_source == "devices"
    )


def test_timestamp_column() -> None:
    """``-S`` appends a ``%Y-%m-%d %H:%M:%S`` column: add one to fixture 25 and read it back."""
    lines = (FIX / "25_all_reduce_RTX5090x4_PCIe_noP2P_after_NCCL2262_fix.txt").read_text().splitlines()
    out = []
    for line in lines:
        if line.startswith("#       size"):
            line += "  timestamp"
        elif line.lstrip()[:1].isdigit():
            line += "  2025-10-01 12:00:00"
        out.append(line)
    run = parse_nccl_tests("\n".join(out)).runs[0]
    assert len(run.rows) == 25 and run.rows[0].timestamp == "2025-10-01 12:00:00"
    assert run.peak_busbw_gbps == pytest.approx(27.28)


def test_row_that_does_not_fit_the_header_is_a_parse_error() -> None:
    lines = (FIX / "25_all_reduce_RTX5090x4_PCIe_noP2P_after_NCCL2262_fix.txt").read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("1024 "))
    lines[row] = " ".join(lines[row].split()[:-2])
    with pytest.raises(ParseError) as info:
        parse_nccl_tests("\n".join(lines))
    assert info.value.line == row + 1 and "columns" in info.value.expected


@pytest.mark.parametrize(
    ("collective", "n", "factor"),
    [(AR, 8, 1.75), (AR, 16, 1.875), (AR, 1, 0.0), (RS, 8, 0.875), (A2A, 2, 0.5), (BC, 8, 1.0), (SR, 2, 1.0)],
)
def test_busbw_factor(collective: Collective, n: int, factor: float) -> None:
    assert busbw_factor(collective, n) == pytest.approx(factor)


def test_collective_from_name() -> None:
    assert collective_from_name("all_reduce_perf_-b8_-e8G_-f2_-g8.txt") is AR
    assert collective_from_name("./build/reduce_scatter_perf") is RS
    assert collective_from_name("nvidia-smi_topo_-m.txt") is None


def test_garbage_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_nccl_tests("hello\nworld\n")
    with pytest.raises(ParseError) as info:
        parse_nccl_tests('{"results": [1]}')
    assert info.value.fmt == "nccl-tests-json"
