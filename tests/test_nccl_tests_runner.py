"""The nccl-tests wrapper. nccl-tests cannot be installed here, so its live mechanics (discovery, -h feature
probe, -J file, exit codes, the hard deadline) run against a STAND-IN executable,
tests/fixtures/standin/bin/all_reduce_perf: a script that replays outputs captured from the real
all_reduce_perf 2.19.6 on an H100 (copied byte for byte).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fleetdx.probes.contracts import FindingCode, Severity
from fleetdx.probes.nccl_tests_runner import (
    Features,
    NcclTest,
    NcclTestsOptions,
    build_argv,
    features_from_help,
    find_binary,
    mpirun_argv,
    not_mpi_evidence,
    run_nccl_test,
)
from fleetdx.probes.runner import RunResult, RunStatus, SubprocessRunner

STANDIN = Path(__file__).parent / "fixtures" / "standin"
STANDIN_BIN = STANDIN / "bin"


def env_with(**kw: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", **kw}


def test_discovery_order_dir_then_home_then_path(tmp_path: Path) -> None:
    assert find_binary(NcclTest.ALL_REDUCE, env=env_with()).path is None
    on_path = find_binary(NcclTest.ALL_REDUCE, env=env_with(PATH=f"{STANDIN_BIN}:/usr/bin"))
    assert (on_path.path, on_path.source) == (str(STANDIN_BIN / "all_reduce_perf"), "PATH")
    home = find_binary(NcclTest.ALL_REDUCE, env=env_with(NCCL_TESTS_HOME=str(STANDIN)))
    assert home.path is None  # only <home>/<name> and <home>/build/<name> are searched
    build = tmp_path / "build"
    build.mkdir()
    (build / "all_reduce_perf").symlink_to(STANDIN_BIN / "all_reduce_perf")
    home = find_binary(NcclTest.ALL_REDUCE, env=env_with(NCCL_TESTS_HOME=str(tmp_path)))
    assert (home.path, home.source) == (str(build / "all_reduce_perf"), "NCCL_TESTS_HOME")
    explicit = find_binary(
        NcclTest.ALL_REDUCE, nccl_tests_dir=STANDIN_BIN, env=env_with(NCCL_TESTS_HOME=str(tmp_path))
    )
    assert explicit.source == "--nccl-tests-dir"
    assert find_binary(NcclTest.SENDRECV, nccl_tests_dir=STANDIN_BIN, env=env_with()).path is None


def test_features_from_the_real_help_text() -> None:
    f = features_from_help((STANDIN / "all_reduce_perf_-h.txt").read_text())
    assert f == Features(json_output=True, per_iter_timing=True, self_timeout=True)
    assert features_from_help("USAGE: all_reduce_perf\n\t[-t,--nthreads <num threads>]") == Features()


def test_argv_asks_for_json_only_where_supported() -> None:
    opts = NcclTestsOptions(min_bytes="1M", max_bytes="64M", gpus=8, timeout_s=120)
    full = build_argv(
        "/x/all_reduce_perf",
        opts,
        Features(json_output=True, per_iter_timing=True, self_timeout=True),
        "/tmp/o.json",
    )
    assert full == [
        "/x/all_reduce_perf",
        "-b",
        "1M",
        "-e",
        "64M",
        "-f",
        "2",
        "-g",
        "8",
        "-c",
        "1",
        "-T",
        "110",
        "-J",
        "/tmp/o.json",
        "-I",
        "1",
    ]
    old = build_argv("/x/all_reduce_perf", opts, Features(), "/tmp/o.json")
    assert "-J" not in old and "-I" not in old and "-T" not in old


def test_mpirun_argv_one_rank_per_gpu() -> None:
    argv = mpirun_argv(["n1", "n2"], 8, ["all_reduce_perf", "-g", "1"], env_names=("NCCL_DEBUG",))
    assert argv == [
        "mpirun",
        "-np",
        "16",
        "-H",
        "n1:8,n2:8",
        "--bind-to",
        "none",
        "--map-by",
        "slot",
        "-x",
        "NCCL_DEBUG",
        "all_reduce_perf",
        "-g",
        "1",
    ]


def test_not_mpi_build_is_recognised_on_a_real_capture() -> None:
    # fixture 13: mpirun -np 2 on gdr114 and gdr116, both processes print "Rank  0" (lines 173 and 175)
    text = (STANDIN / "13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt").read_text()
    ev = not_mpi_evidence(text, launched_procs=2)
    assert ev is not None
    rank0 = ev["rank0_lines"]
    assert isinstance(rank0, list) and "gdr114 pid 29905" in rank0 and "gdr116 pid 6409" in rank0
    assert not_mpi_evidence(text, launched_procs=1) is None
    one_proc = (STANDIN / "all_reduce_perf_-I1_-J.txt").read_text()
    assert (
        not_mpi_evidence(one_proc, launched_procs=2) is None
    )  # one header, one rank 0: an MPI build's rank 0


def test_live_run_through_the_runner_writes_and_reads_json(tmp_path: Path) -> None:
    run = run_nccl_test(
        SubprocessRunner(),
        NcclTest.ALL_REDUCE,
        NcclTestsOptions(timeout_s=60),
        nccl_tests_dir=STANDIN_BIN,
        env=env_with(),
        json_dir=tmp_path,
        host="vm",
    )
    assert run.status is RunStatus.OK and run.returncode == 0 and run.findings == []
    assert run.argv[run.argv.index("-J") + 1] == str(tmp_path / "all_reduce_perf.json")
    assert run.argv[run.argv.index("-I") + 1] == "1"
    assert run.json_text is not None
    data = json.loads(run.json_text)
    assert data["results"][-1]["size"] == 134217728  # last row of the captured -I run
    assert "# Out of bounds values : 0 OK" in run.stdout


def test_a_failing_run_is_nccl_test_failed_with_its_last_lines(tmp_path: Path) -> None:
    run = run_nccl_test(
        SubprocessRunner(),
        NcclTest.ALL_REDUCE,
        NcclTestsOptions(gpus=2, timeout_s=60),
        nccl_tests_dir=STANDIN_BIN,
        env=env_with(),
        host="vm",
    )
    assert run.status is RunStatus.FAILED and run.returncode == 5
    (f,) = run.findings
    assert (f.code, f.severity, f.node) == (FindingCode.NCCL_TEST_FAILED, Severity.CRITICAL, "vm")
    assert "Test failure common.cu:1454" in f.message
    tail = f.evidence["tail"]
    assert isinstance(tail, list) and "Invalid number of GPUs: 2 requested but only 1 were found." in tail


@pytest.mark.timeout(60)
def test_a_hang_is_killed_at_the_deadline_and_keeps_its_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETDX_STANDIN_HANG", "1")
    run = run_nccl_test(
        SubprocessRunner(),
        NcclTest.ALL_REDUCE,
        NcclTestsOptions(timeout_s=2),
        nccl_tests_dir=STANDIN_BIN,
        env=env_with(),
        host="vm",
    )
    assert run.status is RunStatus.TIMEOUT and run.returncode is None
    (f,) = run.findings
    assert f.code is FindingCode.NCCL_TEST_HANG and f.severity is Severity.CRITICAL
    tail = f.evidence["tail"]
    assert isinstance(tail, list) and any("# nThread 1 nGpus 1" in str(ln) for ln in tail)


def test_missing_binary_is_skipped_with_the_places_searched() -> None:
    run = run_nccl_test(
        SubprocessRunner(),
        NcclTest.ALL_REDUCE,
        NcclTestsOptions(),
        env=env_with(NCCL_TESTS_HOME="/nonexistent"),
    )
    assert run.status is RunStatus.SKIPPED
    assert run.reason is not None and "/nonexistent/build/all_reduce_perf" in run.reason


class FakeLdd:
    """A runner answering ``ldd`` like a non-MPI build and running everything else for real."""

    def run(self, argv, timeout_s, env=None):  # type: ignore[no-untyped-def]
        if argv[0] == "ldd":
            return RunResult(
                argv=list(argv),
                status=RunStatus.OK,
                returncode=0,
                stdout="\tlibnccl.so.2 => /usr/lib/libnccl.so.2\n\tlibcudart.so.12 => x\n",
            )
        return SubprocessRunner().run(argv, timeout_s, env)


def test_multi_node_refuses_a_non_mpi_build() -> None:
    run = run_nccl_test(
        FakeLdd(),
        NcclTest.ALL_REDUCE,
        NcclTestsOptions(gpus=8),
        nccl_tests_dir=STANDIN_BIN,
        env=env_with(),
        mpi_hosts=["n1", "n2"],
    )
    assert run.status is RunStatus.SKIPPED and "MPI=1" in (run.reason or "")


def test_standin_is_executable() -> None:
    assert os.access(STANDIN_BIN / "all_reduce_perf", os.X_OK)
