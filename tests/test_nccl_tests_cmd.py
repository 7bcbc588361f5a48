"""Finding and invoking nccl-tests (probes/nccl_tests_cmd.py). nccl-tests cannot be installed here, so
discovery and the ``-h`` feature probe run against a STAND-IN executable,
tests/fixtures/standin/bin/all_reduce_perf: a script that replays outputs captured from the real
all_reduce_perf 2.19.6 on an H100 (copied byte for byte).
"""

from __future__ import annotations

import os
from pathlib import Path

from fleetdx.probes.contracts import Collective
from fleetdx.probes.nccl_tests_cmd import Features, NcclTestsOptions, build_argv, features_from_help, find_binary
from fleetdx.probes.parsers.nccl_tests import parse_nccl_tests

STANDIN = Path(__file__).parent / "fixtures" / "standin"
STANDIN_BIN = STANDIN / "bin"


def env_with(**kw: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", **kw}


def test_discovery_order_dir_then_home_then_path(tmp_path: Path) -> None:
    assert find_binary(Collective.ALL_REDUCE, env=env_with()).path is None
    on_path = find_binary(Collective.ALL_REDUCE, env=env_with(PATH=f"{STANDIN_BIN}:/usr/bin"))
    assert (on_path.path, on_path.source) == (str(STANDIN_BIN / "all_reduce_perf"), "PATH")
    home = find_binary(Collective.ALL_REDUCE, env=env_with(NCCL_TESTS_HOME=str(STANDIN)))
    assert home.path is None  # only <home>/<name> and <home>/build/<name> are searched
    build = tmp_path / "build"
    build.mkdir()
    (build / "all_reduce_perf").symlink_to(STANDIN_BIN / "all_reduce_perf")
    home = find_binary(Collective.ALL_REDUCE, env=env_with(NCCL_TESTS_HOME=str(tmp_path)))
    assert (home.path, home.source) == (str(build / "all_reduce_perf"), "NCCL_TESTS_HOME")
    explicit = find_binary(
        Collective.ALL_REDUCE, nccl_tests_dir=STANDIN_BIN, env=env_with(NCCL_TESTS_HOME=str(tmp_path))
    )
    assert explicit.source == "--nccl-tests-dir"
    assert find_binary(Collective.SENDRECV, nccl_tests_dir=STANDIN_BIN, env=env_with()).path is None


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


def test_not_mpi_build_is_recognised_on_a_real_capture() -> None:
    # fixture 13: mpirun -np 2 on gdr114 and gdr116, both processes print "Rank  0" (lines 173 and 175)
    text = (STANDIN / "13_all_reduce_V100_2node_RoCE_nonMPI_build_nranks1_ncclinfo.txt").read_text()
    solo = [r for r in parse_nccl_tests(text).runs if r.non_mpi_build]
    rank0 = {f"{d.host} pid {d.pid}" for r in solo for d in r.devices if d.rank == 0}
    assert {"gdr114 pid 29905", "gdr116 pid 6409"} <= rank0
    one_proc = (STANDIN / "all_reduce_perf_-I1_-J.txt").read_text()
    assert not any(r.non_mpi_build for r in parse_nccl_tests(one_proc).runs)  # an MPI build's one rank 0


def test_standin_is_executable() -> None:
    assert os.access(STANDIN_BIN / "all_reduce_perf", os.X_OK)
