"""The torch.distributed collective probe on Ray actors, end to end on a simulated cluster (ray.cluster_utils,
gloo).

The slow node here is an *injected straggler*: its rank sleeps before each operation (``inject_delay_s``), so
the other ranks really wait for it in the collective. The real network fault (a throttled link) is in
tests/test_bandwidth_netns.py; this test is for machines where namespaces are not allowed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetdx.orchestrator.cluster.collective import (
    TORCH_COLLECTIVES,
    Backend,
    BadTiming,
    CollectiveWorker,
    RankResult,
    RayCollectiveProbe,
    SweepSpec,
    curve_of,
    effective_size,
    point,
    ray_hosts,
)
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.preflight.detection import DetectionPolicy
from fleetdx.orchestrator.preflight.schedules import localisation_round_bound
from fleetdx.orchestrator.report import RunReport, Schedule
from fleetdx.probes.contracts import Collective, Verdict
from fleetdx.probes.parsers.nccl_tests import busbw_factor
from tests.straggler import (
    HANG_GUARD_S,
    STRAGGLER_DELAY_S,
    STRAGGLER_ITERS,
    STRAGGLER_POLICY_ARGS,
    STRAGGLER_SIZES,
)


def test_bus_factors_are_nccl_tests_ones() -> None:
    # nccl-tests doc/PERFORMANCE.md; fixture 01 (8 ranks): busbw/algbw = 235.26/134.44 = 1.75 = 2*7/8
    assert busbw_factor(Collective.ALL_REDUCE, 8) == pytest.approx(235.26 / 134.44, rel=1e-3)
    # fixture 02 reduce_scatter (8 ranks): 231.52/264.60 = 0.875 = 7/8
    assert busbw_factor(Collective.REDUCE_SCATTER, 8) == pytest.approx(231.52 / 264.60, rel=1e-3)
    assert busbw_factor(Collective.ALL_GATHER, 2) == 0.5
    assert busbw_factor(Collective.SENDRECV, 2) == 1.0
    assert busbw_factor(Collective.ALL_REDUCE, 1) == 0.0


def test_point_reproduces_a_real_nccl_tests_row() -> None:
    # fixture 17, B200 x16: 2147483648 B in 5784.75 us -> algbw 371.23, busbw 696.06 GB/s
    p = point(Collective.ALL_REDUCE, 2147483648, 16, 5784.75)
    assert p.algbw_gbps == pytest.approx(371.23, abs=0.01)
    assert p.busbw_gbps == pytest.approx(696.06, abs=0.01)


@pytest.mark.parametrize("time_us", [0.0, -1.0, math.nan, math.inf])
def test_a_time_that_is_not_positive_and_finite_is_an_error_not_a_zero_bandwidth(time_us: float) -> None:
    with pytest.raises(BadTiming, match="size 1048576 B") as e:
        point(Collective.ALL_REDUCE, 1 << 20, 2, time_us)
    assert e.value.size == 1 << 20


def test_a_bad_time_at_any_size_spoils_the_whole_curve() -> None:
    good = RankResult(rank=0, host="a", sizes=[1 << 20, 4 << 20], time_us=[100.0, 400.0], wrong=[0, 0])
    curve = curve_of(Collective.ALL_REDUCE, Backend.GLOO, ["a", "b"], good)
    assert (curve.collective, curve.backend, curve.nranks) == ("all_reduce", "gloo", 2)
    # 1048576 B in 100 us = 10.49 GB/s algbw; 2 ranks: busbw = algbw x 2(2-1)/2
    assert curve.points[0].algbw_gbps == pytest.approx(10.48576)
    assert curve.points[0].busbw_gbps == pytest.approx(10.48576)
    bad = good.model_copy(update={"time_us": [100.0, 0.0]})
    with pytest.raises(BadTiming, match="size 4194304 B"):
        curve_of(Collective.ALL_REDUCE, Backend.GLOO, ["a", "b"], bad)


def test_effective_size_splits_per_rank() -> None:
    assert effective_size(Collective.ALL_GATHER, 1000, 3) == 996  # 250 elements -> 249, a multiple of 3
    assert effective_size(Collective.ALL_REDUCE, 1000, 3) == 1000


SIM_NODES = 8


@pytest.fixture(scope="module")
def sim_cluster() -> Iterator[list[str]]:
    ray = pytest.importorskip("ray")
    pytest.importorskip("torch")
    from fleetdx.orchestrator.cluster.simulate import add_node, start_cluster

    cluster = start_cluster({"num_cpus": 1, "include_dashboard": False})
    try:
        for i in range(SIM_NODES):
            add_node(cluster, num_cpus=1, labels={"fleetdx.host": f"sim{i}"})
        ray.init(address=cluster.address)
        cluster.wait_for_nodes()
        yield [f"sim{i}" for i in range(SIM_NODES)]
    finally:
        ray.shutdown()
        cluster.shutdown()


def run_small(
    nodes: list[str],
    schedule: Schedule,
    slow: str,
    policy: DetectionPolicy | None = None,
    delay_s: float = STRAGGLER_DELAY_S,
    sizes: list[int] | None = None,
    iters: int = STRAGGLER_ITERS,
) -> RunReport:
    """A short gloo sweep (tests/straggler.py: 1 MiB, 2 timed iterations) with ``slow``'s rank delayed
    ``delay_s`` per operation."""
    from fleetdx.orchestrator.preflight.bandwidth import run_bandwidth

    return run_bandwidth(
        nodes,
        schedule=schedule,
        sizes=sizes or STRAGGLER_SIZES,
        iters=iters,
        warmup_iters=1,
        timeout_s=60.0,
        inject_delay_s={slow: delay_s},
        policy=policy,
    )


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(HANG_GUARD_S)
def test_every_collective_validates_and_reports_nccl_tests_units(sim_cluster: list[str]) -> None:
    hosts = {h.name: h for h in ray_hosts()}
    assert set(sim_cluster) <= set(hosts)
    for coll in sorted(TORCH_COLLECTIVES):
        spec = SweepSpec(collective=coll, sizes=[1 << 20], iters=2, warmup_iters=1)
        probe = RayCollectiveProbe(
            [hosts["sim0"], hosts["sim1"], hosts["sim2"]], Backend.GLOO, spec, timeout_s=60
        )
        try:
            (res,) = probe.measure_round([("sim0", "sim1", "sim2")])
        finally:
            probe.close()
        assert res.status.value == "ok", res.error
        assert res.wrong == 0
        assert res.curve is not None and res.curve.nranks == 3 and res.curve.backend == "gloo"
        (p,) = res.curve.points
        assert p.size == effective_size(coll, 1 << 20, 3)
        assert p.busbw_gbps == pytest.approx(p.algbw_gbps * busbw_factor(coll, 3))
        assert p.time_us > 0


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(HANG_GUARD_S)
def test_round_robin_names_the_injected_straggler(sim_cluster: list[str]) -> None:
    four = sim_cluster[:4]
    rep = run_small(four, Schedule.ROUNDROBIN, "sim2", DetectionPolicy(**STRAGGLER_POLICY_ARGS))
    stragglers = [f.node for f in rep.findings if f.code is FindingCode.STRAGGLER_NODE]
    measured = [(c.nodes, round(c.points[-1].busbw_gbps, 4)) for c in rep.curves if c.points]
    assert stragglers == ["sim2"], (measured, [(f.code.value, f.message) for f in rep.findings])
    assert rep.exclude == "sim2" and rep.verdict is Verdict.CRITICAL
    assert len(rep.curves) == 6  # every pair of 4 nodes once
    f = next(f for f in rep.findings if f.code is FindingCode.STRAGGLER_NODE)
    assert f.details["low"] == 3 and f.details["measured"] == 3


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(HANG_GUARD_S)
def test_localise_names_the_injected_straggler_among_eight(sim_cluster: list[str]) -> None:

    # 8 gloo ranks on 2 cores: healthy pairs of one round differ 3x idle and up to 36x under a CPU hog and a
    # parallel CI run (0.58 vs 0.016 GB/s), and four pairs give a MAD too wide for any z cut to pass a fault
    # 165x below the median (z -1.9): tests/straggler.py STRAGGLER_POLICY_ARGS.
    policy = DetectionPolicy(**STRAGGLER_POLICY_ARGS)
    rep = run_small(sim_cluster, Schedule.LOCALISE, "sim5", policy)
    measured = [(c.nodes, round(c.points[-1].busbw_gbps, 4)) for c in rep.curves if c.points]
    assert [f.node for f in rep.findings if f.code is FindingCode.STRAGGLER_NODE] == ["sim5"], (
        measured,
        [(f.code.value, f.message) for f in rep.findings],
    )
    assert rep.exclude == "sim5"
    assert ["sim4", "sim5"] == rep.curves[2].nodes  # the screen pair that flagged it
    assert len(rep.curves) <= 4 + localisation_round_bound(8) * 2


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(HANG_GUARD_S)
def test_a_group_that_does_not_finish_is_a_hang_and_its_actors_are_replaced(sim_cluster: list[str]) -> None:
    from fleetdx.orchestrator.preflight.bandwidth import findings_for, measurement_of, screen_and_localise
    from fleetdx.orchestrator.preflight.detection import DetectionPolicy

    hosts = {h.name: h for h in ray_hosts()}
    spec = SweepSpec(collective=Collective.ALL_REDUCE, sizes=[1 << 20], iters=1, warmup_iters=0, check=False)
    probe = RayCollectiveProbe(
        [hosts["sim6"], hosts["sim7"]], Backend.GLOO, spec, timeout_s=10, inject_delay_s={"sim7": 120.0}
    )
    try:
        (hung,) = probe.measure_round([("sim6", "sim7")])
        assert hung.status.value == "hang" and hung.curve is None
        m = measurement_of(hung, 0)
        result = screen_and_localise(["sim6", "sim7"], lambda r, g: [m], DetectionPolicy(), Schedule.QUICK)
        (f,) = findings_for(result, DetectionPolicy())
        assert (f.code, f.subject) == (FindingCode.NCCL_TEST_HANG, "sim6,sim7")
        probe.inject.clear()
        probe.timeout_s = 90.0  # fresh actors start and rendezvous under load: only the hang needed 10 s
        (again,) = probe.measure_round([("sim6", "sim7")])  # fresh actors, no injected delay
        assert again.status.value == "ok", again.error
    finally:
        probe.close()


@pytest.mark.gpu
@pytest.mark.timeout(HANG_GUARD_S)
def test_nccl_backend_on_a_gpu() -> None:
    """On a GPU machine: the NCCL path for real (CUDA events, validation, the MAX reduction of times) on a
    one-rank group; a one-rank all_reduce moves no data, so only the mechanics and units are checked."""
    ray = pytest.importorskip("ray")
    import torch

    ray.init(address="local", num_cpus=2, num_gpus=torch.cuda.device_count(), include_dashboard=False)
    try:
        hosts = ray_hosts()
        spec = SweepSpec(collective=Collective.ALL_REDUCE, sizes=[8 << 20], iters=5)
        probe = RayCollectiveProbe(hosts[:1], Backend.NCCL, spec, timeout_s=120)
        try:
            (res,) = probe.measure_round([(hosts[0].name,)])
        finally:
            probe.close()
        assert res.status.value == "ok", res.error
        assert res.wrong == 0 and res.curve is not None and res.curve.backend == "nccl"
        (p,) = res.curve.points
        assert p.time_us > 0 and p.busbw_gbps == 0.0  # factor 2(n-1)/n = 0 for n = 1
    finally:
        ray.shutdown()


def _gloo_rank(rank: int, port: int, collective: Collective, out: Any) -> None:
    spec = SweepSpec(collective=collective, sizes=[4096, 1 << 20], iters=3)
    try:
        res = CollectiveWorker(f"p{rank}", Backend.GLOO).run(rank, 2, "127.0.0.1", port, spec, timeout_s=60)
    except BaseException as e:  # noqa: BLE001 - the parent fails at once with the child's error, not at a timeout
        out.put((rank, f"{type(e).__name__}: {e}"))
        raise
    out.put((rank, res.model_dump()))


@pytest.mark.timeout(HANG_GUARD_S)
@pytest.mark.parametrize("collective", sorted(TORCH_COLLECTIVES, key=lambda c: c.value))
def test_worker_body_runs_every_collective_on_two_gloo_processes(collective: Collective) -> None:
    """The actor body without Ray, in two real processes over loopback gloo: every collective the probe runs
    validates (``wrong`` 0) and is timed, through the torch.distributed API names the installed torch has (a
    torch 2.11 GPU machine lacked ``reduce_scatter_single``, which torch 2.13 has)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("ray")  # gloo's interface is the one holding Ray's node IP
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    ctx = torch.multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_gloo_rank, args=(r, port, collective, q)) for r in (0, 1)]
    for p in procs:
        p.start()
    got = dict(q.get(timeout=180) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    errors = [v for v in got.values() if isinstance(v, str)]
    assert errors == [] and [p.exitcode for p in procs] == [0, 0]
    for r in (0, 1):
        assert got[r]["wrong"] == [0, 0] and all(t > 0 for t in got[r]["time_us"])
    assert got[0]["time_us"] == got[1]["time_us"]  # the slowest rank's time, all-reduced (MAX)


@pytest.mark.gpu
@pytest.mark.timeout(HANG_GUARD_S)
@pytest.mark.parametrize("collective", [Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER])
def test_nccl_worker_on_a_gpu_without_ray(collective: Collective) -> None:
    """On a GPU machine, without Ray: the actor body itself (NCCL group through a TCPStore, validation pass,
    CUDA-event timing, the MAX reduction of times) on a one-rank group, for each collective the probe runs. One
    rank moves no data between GPUs: busbw is 0 by definition (factors (n-1)/n, 2(n-1)/n), algbw is the local
    copy's, and the validation must find nothing wrong."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    spec = SweepSpec(collective=collective, sizes=[1 << 20, 64 << 20], iters=5)
    res = CollectiveWorker("gpu", Backend.NCCL, 0).run(0, 1, "127.0.0.1", port, spec, timeout_s=120)
    assert res.wrong == [0, 0] and res.sizes == [1 << 20, 64 << 20]
    assert all(t > 0 and math.isfinite(t) for t in res.time_us)
    curve = curve_of(collective, Backend.NCCL, ["gpu"], res)
    assert [p.busbw_gbps for p in curve.points] == [0.0, 0.0] and all(p.algbw_gbps > 0 for p in curve.points)


def test_cli_sizes_read_like_nccl_tests() -> None:
    from fleetdx.orchestrator.preflight.bandwidth_job import parse_sizes
    from fleetdx.probes.errors import ConfigError

    assert parse_sizes("64M,4M,16M") == [4 << 20, 16 << 20, 64 << 20]
    assert parse_sizes("1G,512K,8") == [8, 512 << 10, 1 << 30]
    with pytest.raises(ConfigError, match="4Q"):
        parse_sizes("4Q")


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(HANG_GUARD_S)
def test_cli_json_is_the_run_report_and_its_curves_go_to_the_store(
    sim_cluster: list[str], tmp_path: Path
) -> None:
    import json

    from typer.testing import CliRunner

    from fleetdx.orchestrator.cli.main import _register, app
    from fleetdx.orchestrator.store import Store

    url = f"sqlite:///{tmp_path / 'fleetdx.db'}"
    _register()
    res = CliRunner().invoke(
        app,
        [
            "bandwidth",
            "--nodes",
            "sim[0-3]",
            "--schedule",
            "quick",
            "--sizes",
            "1M",
            "--iters",
            "2",
            "--backend",
            "gloo",
            "--db",
            url,
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    rep = RunReport.model_validate(json.loads(res.stdout))
    assert rep.kind.value == "bandwidth" and rep.schedule == "quick" and rep.level is None
    assert sorted(tuple(c.nodes) for c in rep.curves) == [("sim0", "sim1"), ("sim2", "sim3")]
    assert [n.host for n in rep.nodes] == ["sim0", "sim1", "sim2", "sim3"]
    with Store.open(url) as store:
        (past,) = store.recent_busbw("sim2", "all_reduce")
    assert past.run_id == rep.run_id and past.nodes == ["sim2", "sim3"] and past.backend == "gloo"
    pair = next(c for c in rep.curves if c.nodes == ["sim2", "sim3"])
    assert past.peak_busbw_gbps == pytest.approx(pair.points[-1].busbw_gbps)


def test_heat_map_colours_use_the_detection_policy_cut_offs() -> None:
    from fleetdx.orchestrator.cli.bandwidth_cmd import _heat_map
    from fleetdx.orchestrator.report import BusbwCurve, BusbwPoint

    def pair(a: str, b: str, bw: float) -> BusbwCurve:
        p = BusbwPoint(size=1 << 20, time_us=100.0, algbw_gbps=bw, busbw_gbps=bw)
        return BusbwCurve(collective="all_reduce", nodes=[a, b], nranks=2, backend="gloo", points=[p])

    # pairs at 10, 10 and 9.7 GB/s: median 10, so the a-c cell reads 0.97
    rep = RunReport(
        run_id="r",
        kind="bandwidth",
        started_at=0.0,
        finished_at=1.0,
        verdict="OK",
        exit_code=0,
        nodes=[],
        findings=[],
        curves=[pair("a", "b", 10.0), pair("b", "c", 10.0), pair("a", "c", 9.7)],
    )

    def a_c_cell(policy: DetectionPolicy) -> str:
        t = _heat_map(rep, policy)
        assert t is not None
        return str(list(t.columns[3].cells)[0])  # row a, column c

    assert a_c_cell(DetectionPolicy()) == "[green]0.97[/]"  # defaults: green from 0.9
    assert a_c_cell(DetectionPolicy(reference_ratio=0.99, critical_ratio=0.95)) == "[yellow]0.97[/]"
    assert a_c_cell(DetectionPolicy(reference_ratio=0.995, critical_ratio=0.98)) == "[bold red]0.97[/]"


def test_history_keeps_only_comparable_measurements() -> None:
    from fleetdx.orchestrator.preflight.bandwidth_job import history_values
    from fleetdx.orchestrator.store import BusbwHistoryPoint

    def pt(backend: str, nranks: int, bw: float | None) -> BusbwHistoryPoint:
        return BusbwHistoryPoint(
            run_id="r",
            started_at=0.0,
            collective="all_reduce",
            backend=backend,
            nodes=["a", "b"][:nranks],
            nranks=nranks,
            peak_busbw_gbps=bw,
            peak_size=1,
        )

    pts = [pt("nccl", 2, 40.0), pt("gloo", 2, 1.0), pt("nccl", 16, 300.0), pt("nccl", 2, None)]
    assert history_values(pts, "nccl") == [40.0]


def test_host_names_prefer_label_resource_unique_hostname_then_ip() -> None:
    from fleetdx.orchestrator.cluster.collective import host_names

    nodes: list[dict[str, Any]] = [
        {"Labels": {"fleetdx.host": "sim0"}, "NodeManagerHostname": "box", "NodeManagerAddress": "10.0.0.1"},
        {
            "Resources": {"fleetdx-host:h1": 1.0, "CPU": 1.0},
            "NodeManagerHostname": "box",
            "NodeManagerAddress": "10.0.0.2",
        },
        {"NodeManagerHostname": "gpu017", "NodeManagerAddress": "10.0.0.3"},
        {"NodeManagerHostname": "box", "NodeManagerAddress": "10.0.0.4"},
    ]
    assert host_names(nodes) == ["sim0", "h1", "gpu017", "10.0.0.4"]  # "box" is shared: not a name
