"""nccl-tests and NCCL log parsers on variants seen in public posts but absent from the real captures.

Each input is a real capture of tests/fixtures/nccl transformed the way the variant does (the test says
how), or a hand-written file of tests/fixtures/nccl_variants modelled on a public post (its README says
which). Expected values come from the untransformed capture or were read by eye from the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.probes.contracts import Collective
from fleetdx.probes.parsers.nccl_log import parse_nccl_log
from fleetdx.probes.parsers.nccl_tests import NcclTestsReport, parse_nccl_tests

FIX = Path(__file__).parent / "fixtures"
NCCL = FIX / "nccl"
VARIANTS = FIX / "nccl_variants"
AR = Collective.ALL_REDUCE

TAGGED = "04_all_reduce_A100x16_p4d_2node_EFA_ncclinfo_tagged_oldfmt.txt"  # "[1,0]<stdout>:" on every line
PLAIN = "08_all_reduce_GH200x8_2node_slingshot_healthy.txt"  # no prefix
NON_MPI = "13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt"
ABORT_MPIRUN = "all_reduce_perf_mpirun_ofi_abort_before_output.txt"
ABORT_SRUN = "all_reduce_perf_srun_efa_abort_before_output.txt"


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def summary(report: NcclTestsReport) -> list[tuple[object, ...]]:
    return [
        (r.collective, r.nranks, r.complete, len(r.rows), r.peak_busbw_gbps, r.avg_busbw_gbps, len(r.devices))
        for r in report.runs
    ]


# --- item 9: stacked launcher prefixes -----------------------------------------------------------------------


def _prefixed(body: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in body.splitlines())


RAY = "(train, rank=0, pid=1234) "
RAY_COLOURED = "\x1b[36m(RayTrainWorker pid=4009, ip=10.0.0.5)\x1b[0m "
SRUN = "0: "
STAMP = "2019-06-02T16:13:44.884Z: "  # as tests/fixtures joblog 22 (mpirun output through a log collector)
MPICH = "[0] "  # MPICH/Intel MPI hydra -prepend-rank


@pytest.mark.parametrize(
    "prefix",
    [RAY, RAY_COLOURED, STAMP, STAMP + RAY, RAY + STAMP, SRUN, RAY + SRUN],
    ids=["ray", "ray-ansi", "timestamp", "timestamp-ray", "ray-timestamp", "srun", "ray-srun"],
)
def test_launcher_prefix_before_an_mpi_tag(prefix: str) -> None:
    """04 already carries Open MPI's ``[1,0]<stdout>:`` on every line; a job launcher (Ray, a log
    collector's timestamp, srun -l) puts its own prefix before it: same runs, same NCCL facts."""
    raw = text(NCCL / TAGGED)
    stacked = _prefixed(raw, prefix)
    assert summary(parse_nccl_tests(stacked)) == summary(parse_nccl_tests(raw))
    assert parse_nccl_log(stacked) == parse_nccl_log(raw)


@pytest.mark.parametrize(
    "prefix",
    [
        RAY + "[1,0]<stdout>:",
        "[1,0]<stdout>:" + RAY,
        SRUN + "[1,0]<stdout>:",
        "[1,0]<stdout>:" + SRUN,
        STAMP + SRUN + RAY + "[1,0]<stdout>:",
        MPICH,
        RAY + MPICH,
    ],
    ids=["ray-mpi", "mpi-ray", "srun-mpi", "mpi-srun", "stamp-srun-ray-mpi", "mpich", "ray-mpich"],
)
def test_stacked_prefixes_in_any_order(prefix: str) -> None:
    """08 (no prefix) with a stack of launcher prefixes on every line, in either order."""
    raw = text(NCCL / PLAIN)
    report = parse_nccl_tests(_prefixed(raw, prefix))
    assert summary(report) == summary(parse_nccl_tests(raw))
    assert summary(report) == [(AR, 8, True, 25, pytest.approx(123.11), pytest.approx(19.7866), 8)]


# --- item 10: an abort before nccl-tests printed anything ------------------------------------------------------


def test_abort_before_output_is_a_failed_run() -> None:
    """Modelled on nccl-tests#295: mpirun launch, libfabric assertion, signal 6, backtrace, mpirun's notice."""
    report = parse_nccl_tests(text(VARIANTS / ABORT_MPIRUN))
    (run,) = report.runs
    assert run.collective is AR  # from the mpirun command line
    assert run.rows == [] and run.complete is False
    assert run.aborted is True and run.signal == "Aborted (6)"
    assert run.errors == report.errors
    assert report.errors == [
        "[gpu-b07:41377] mtl_ofi_endpoint.h:49: *** The Open MPI OFI MTL is aborting the MPI job (via exit(3)).",
        "all_reduce_perf: prov/util/src/util_mem_monitor.c:177: ofi_monitor_cleanup: Assertion "
        "`dlist_empty(&monitor->list)' failed.",
        "[gpu-b07:41377] *** Process received signal ***",
        "[gpu-b07:41377] Signal: Aborted (6)",
        "mpirun noticed that process rank 1 with PID 0 on node gpu-b07 exited on signal 6 (Aborted).",
    ]


def test_abort_under_srun_without_command_line() -> None:
    """Same abort under Slurm: no command line, no mpirun message; the collective comes from the binary
    named in the assertion line."""
    report = parse_nccl_tests(text(VARIANTS / ABORT_SRUN))
    (run,) = report.runs
    assert (run.collective, run.aborted, run.signal, run.rows) == (AR, True, "Aborted (6)", [])
    assert "srun: error: gpu-a11: task 1: Aborted (core dumped)" in report.errors
    assert not any("[ 0]" in e or "End of error message" in e for e in report.errors)  # backtrace kept out


def test_abort_lines_alone() -> None:
    """The srun variant cut to the signal handler's two lines (a capture of stderr only, cut short)."""
    lines = [ln for ln in text(VARIANTS / ABORT_SRUN).splitlines() if "received signal" in ln or "Signal: " in ln]
    assert len(lines) == 2
    (run,) = parse_nccl_tests("\n".join(lines), AR).runs
    assert (run.collective, run.aborted, run.signal) == (AR, True, "Aborted (6)")


def test_abort_of_each_rank_is_one_evidence_line() -> None:
    """Eight ranks print the same handler lines with their own ``[host:pid]``: each message kept once."""
    one = text(VARIANTS / ABORT_SRUN).splitlines()
    many = [ln.replace(":20914]", f":{20914 + i}]") for i in range(8) for ln in one[1:4]]
    report = parse_nccl_tests("\n".join(many), AR)
    assert report.errors == ["[gpu-a11:20914] *** Process received signal ***", "[gpu-a11:20914] Signal: Aborted (6)"]


def test_abort_after_rows_marks_the_open_run() -> None:
    """08 cut after its 10th row, then the srun abort lines: the started run is the aborted one."""
    lines = text(NCCL / PLAIN).splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["8"])
    cut = "\n".join(lines[: first + 10] + text(VARIANTS / ABORT_SRUN).splitlines())
    (run,) = parse_nccl_tests(cut).runs
    assert (len(run.rows), run.complete, run.aborted, run.signal) == (10, False, True, "Aborted (6)")
    assert len(run.devices) == 8


def test_backtrace_naming_the_binary_is_not_a_new_launch() -> None:
    """A backtrace frame ``.../build/all_reduce_perf(+0x1b2f6)`` names the binary like a command line does;
    it must not open a second run."""
    assert len(parse_nccl_tests(text(VARIANTS / ABORT_MPIRUN)).runs) == 1


# --- item 11: non-MPI build printing only interleaved rows ---------------------------------------------------


def _second_launch_rows_only(keep_command: bool) -> str:
    """13's second launch (line 152 on: two one-rank processes, rows interleaved) with every ``#`` line
    dropped but the footers (no banner, no header, no device line), NCCL INFO lines dropped, and the
    ``mpirun`` command kept or dropped."""
    lines = text(NCCL / NON_MPI).splitlines()[151:]
    out = []
    for ln in lines:
        if "NCCL INFO" in ln:
            continue
        if ln.startswith("#") and "Out of bounds" not in ln and "Avg bus bandwidth" not in ln:
            continue
        out.append(ln)
    if not keep_command:
        out = [ln for ln in out if ln.startswith("# ") or ln.split()[:1] and ln.split()[0].isdigit()]
    return "\n".join(out)


@pytest.mark.parametrize("keep_command", [True, False], ids=["with-mpirun-line", "rows-and-footers-only"])
def test_interleaved_rows_without_header_are_a_non_mpi_build(keep_command: bool) -> None:
    body = _second_launch_rows_only(keep_command)
    assert "size" not in body and "Rank" not in body
    runs = parse_nccl_tests(body, AR).runs
    assert len(runs) == 2
    assert all(r.non_mpi_build for r in runs)
    assert [len(r.rows) for r in runs] == [28, 28]
    assert all(r.complete and r.avg_busbw_gbps == 0.0 and r.out_of_bounds == 0 for r in runs)
    # each process swept 8 B .. 1 GiB upwards; busbw 0.00 with algbw up to 411 GB/s: one rank each
    assert all([row.size for row in r.rows] == [8 << i for i in range(28)] for r in runs)
    assert [r.nranks for r in runs] == [1, 1] and {r.nranks_source for r in runs} == {"busbw_ratio"}


def test_one_header_less_sweep_is_not_a_non_mpi_build() -> None:
    """08's table with its header and banner dropped: one process's sweep, no interleaving, n = 8."""
    lines = [ln for ln in text(NCCL / PLAIN).splitlines() if not ln.startswith("#") or "Avg" in ln or "Out" in ln]
    (run,) = parse_nccl_tests("\n".join(lines), AR).runs
    assert (run.non_mpi_build, len(run.rows), run.nranks, run.complete) == (False, 25, 8, True)


def test_repeated_sweeps_one_after_the_other_are_not_interleaved() -> None:
    """08's rows (header dropped) twice in a row, as ``-N 2`` prints them: sequential, not two processes."""
    lines = text(NCCL / PLAIN).splitlines()
    rows = [ln for ln in lines if ln.split()[:1] and ln.split()[0].isdigit()]
    runs = parse_nccl_tests("\n".join(rows + rows), AR).runs
    assert not any(r.non_mpi_build for r in runs)
    assert sum(len(r.rows) for r in runs) == 50


def test_numbers_that_are_not_rows_stay_noise() -> None:
    """A line starting with two integers that does not read as a table row is still ignored."""
    assert parse_nccl_tests("12 34 apples and pears\n" + text(NCCL / PLAIN)).runs[0].rows[0].size == 8


# --- item 13: newer NCCL transport suffixes, RCCL banner --------------------------------------------------------


def _with_suffix(body: str, suffix: str) -> str:
    return body.replace("/GDRDMA\n", f"/GDRDMA{suffix}\n")


@pytest.mark.parametrize("suffix", ["/Shared", "/flush", "(PCI)", "(PCI)/Shared", "/flush=1"])
def test_gdrdma_followed_by_more_flags(suffix: str) -> None:
    """21's connections ``... [send] via NET/IBext_v8/0/GDRDMA`` as newer NCCL prints them
    (``/GDRDMA/Shared``, ``/GDRDMA(PCI)``, ``/GDRDMA/flush``)."""
    raw = text(NCCL / "21_all_reduce_A100PCIe_2node_HDR_IB_GDRDMA_crosssocket_slow_ncclinfo.txt")
    changed = _with_suffix(raw, suffix)
    assert changed != raw
    log = parse_nccl_log(changed)
    assert log.uses_gdrdma
    assert all(c.gdrdma and c.nic == 0 for c in log.connections)
    assert log.transports == ["NET/IBext_v8/GDRDMA"]


def test_no_gdrdma_with_shared_suffix() -> None:
    """22 (no GDRDMA) with ``/Shared`` appended: still no GPU Direct RDMA."""
    raw = text(NCCL / "22_all_reduce_A100PCIe_2node_HDR_IB_noGDR_after_NPS4_ncclinfo.txt")
    changed = raw.replace("via NET/IBext_v8/0\n", "via NET/IBext_v8/0/Shared\n")
    assert changed != raw
    log = parse_nccl_log(changed)
    assert not log.uses_gdrdma and log.transports == ["NET/IBext_v8"]


RCCL_INFO = "gpu-mi300-1:4102:4102 [0] NCCL INFO RCCL version 2.18.3+hip6.0 develop:7e1cbb4\n"


@pytest.mark.parametrize(
    ("line", "version"),
    [
        (RCCL_INFO, "2.18.3+hip6.0"),
        ("RCCL version 2.18.3+hip6.0 develop:7e1cbb4\n", "2.18.3+hip6.0"),  # bare banner (NCCL_DEBUG=VERSION)
        ("RCCL version 2.6.4+hip3.5\n", "2.6.4+hip3.5"),  # ROCm/rccl#212's example
        ("RCCL version : 2.28.3-gfx1151-rccl:a188cf2\n", "2.28.3-gfx1151-rccl:a188cf2"),  # newer "key : value"
    ],
)
def test_rccl_version_banner(line: str, version: str) -> None:
    """23's ``NCCL version 2.25.1+cuda12.4`` banner replaced by RCCL's."""
    raw = text(NCCL / "23_alltoall_RTX5090x1_socket_illegal_memory_access_ws_collapsed.txt")
    bare = next(ln for ln in raw.splitlines() if "NCCL version" in ln)
    changed = raw.replace(bare + "\n", line)
    assert changed != raw
    assert parse_nccl_log(changed).nccl_versions == [version]
    assert parse_nccl_tests(changed).runs[0].nccl_version == version
