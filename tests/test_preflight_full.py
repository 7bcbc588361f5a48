"""``--level full``: the node probes, then the cross-node bandwidth step, merged into one pre-flight report;
and ``--level standard``'s nccl-tests binary looked up on the node, not on the driver.

One simulated cluster for the module (fleetdx.orchestrator.cluster.simulate): ``gpu01``-``gpu04`` replay byte-exact
copies of
the idle H100 VM's bundle (tests/fixtures/bundles/h100-idle; node verdict OK on its own), ``gpu05`` a copy of
the busy one (h100-busy: a foreign process holds the GPU, GPU_FOREIGN_PROCESS, critical). The node figures
are replayed; the bandwidth curves are measured for real, by gloo between the local Ray nodes. The slow node
is an *injected straggler* (its rank sleeps before each operation, ``inject_delay_s``), as in
tests/test_collective.py. Assertions are on structure and on the injected effect, never on absolute GB/s.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdx.orchestrator.cluster.fanout import match_hosts, ray_node_hosts
from fleetdx.orchestrator.cluster.simulate import SimCluster, sim_nodes, simulated_cluster
from fleetdx.orchestrator.diagnosis.robust import DetectionPolicy
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.preflight.run import (
    BANDWIDTH_PROBE,
    BandwidthStep,
    NodeJob,
    PreflightResult,
    bandwidth_candidates,
    merge_bandwidth,
    run_preflight,
)
from fleetdx.orchestrator.report import BusbwCurve, NodeReport, ProbeSummary, RunKind, RunReport
from fleetdx.probes.contracts import Level, RunStatus, Severity, Verdict
from fleetdx.probes.facts import node_facts
from tests.straggler import (
    HANG_GUARD_S,
    STRAGGLER_DELAY_S,
    STRAGGLER_ITERS,
    STRAGGLER_POLICY_ARGS,
    STRAGGLER_SIZES,
)
from tests.test_standard_level import LARGEST_ROW, STANDIN, STANDIN_BIN, SWEEP_FILE, fake_nvidia_smi

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"
COPIES = {"gpu01": "h100-idle", "gpu02": "h100-idle", "gpu03": "h100-idle", "gpu04": "h100-idle"}
COPIES["gpu05"] = "h100-busy"


def short_step(inject_delay_s: dict[str, float] | None = None) -> BandwidthStep:
    """A short gloo sweep (tests/straggler.py), as tests/test_collective.py's run_small."""
    return BandwidthStep(
        sizes=STRAGGLER_SIZES,
        iters=STRAGGLER_ITERS,
        warmup_iters=1,
        timeout_s=60.0,
        inject_delay_s=inject_delay_s or {},
        policy=DetectionPolicy(**STRAGGLER_POLICY_ARGS),
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    root = tmp_path_factory.mktemp("bundles")
    for host, src in COPIES.items():
        shutil.copytree(BUNDLES / src, root / host)  # byte-exact; the host is the directory name
    with simulated_cluster(sim_nodes([root / h for h in COPIES])) as sim:
        yield sim


def _run(
    cluster: SimCluster,
    hosts: list[str],
    level: Level,
    step: BandwidthStep | None = None,
) -> PreflightResult:
    by_host = {n.host: n for n in cluster.nodes}
    jobs = {h: NodeJob(host=h, level=level, bundle_dir=by_host[h].bundle_dir) for h in hosts}
    nodes = match_hosts(hosts, ray_node_hosts(include_real=False))
    return run_preflight(jobs, nodes, run_timeout_s=120.0, simulated=True, bandwidth=step)


def _bw(node: NodeReport) -> ProbeSummary:
    (p,) = [p for p in node.probes if p.name == BANDWIDTH_PROBE]
    return p


@pytest.mark.ray
@pytest.mark.timeout(HANG_GUARD_S)
def test_full_level_names_the_injected_straggler_and_skips_the_critical_node(cluster: SimCluster) -> None:
    report = _run(cluster, sorted(COPIES), Level.FULL, short_step({"gpu03": STRAGGLER_DELAY_S})).report
    by_host = {n.host: n for n in report.nodes}
    # gpu05 was critical after the node probes: not paired, and the report says why
    assert _bw(by_host["gpu05"]).status is RunStatus.SKIPPED
    assert "critical findings" in (_bw(by_host["gpu05"]).error or "")
    assert all(_bw(by_host[h]).status is RunStatus.OK for h in ("gpu01", "gpu02", "gpu03", "gpu04"))
    # 4 nodes (< min_nodes_for_screen) are measured round-robin: every pair once, never with gpu05
    pairs = sorted(tuple(c.nodes) for c in report.curves)
    assert len(pairs) == 6 and len(set(pairs)) == 6, [(f.code.value, f.message) for f in report.findings]
    assert all("gpu05" not in p for p in pairs)
    assert {c.backend for c in report.curves} == {"gloo"}
    stragglers = [f.node for f in report.findings if f.code is FindingCode.STRAGGLER_NODE]
    assert stragglers == ["gpu03"]
    assert {(f.node, f.code) for f in report.findings if f.node == "gpu05"} >= {
        ("gpu05", FindingCode.GPU_FOREIGN_PROCESS)
    }
    # exclude recomputed from both steps' critical findings; verdict the worst of both
    assert report.exclude == "gpu[03,05]"
    assert (report.verdict, report.exit_code) == (Verdict.CRITICAL, 2)
    assert by_host["gpu03"].verdict is Verdict.CRITICAL and by_host["gpu01"].verdict is Verdict.OK
    assert report.simulated and report.level == "full" and report.kind.value == "preflight"


@pytest.mark.ray
@pytest.mark.timeout(HANG_GUARD_S)
def test_full_level_with_one_node_to_pair_is_skipped_with_the_reason(cluster: SimCluster) -> None:
    report = _run(cluster, ["gpu01", "gpu05"], Level.FULL).report
    by_host = {n.host: n for n in report.nodes}
    alone = _bw(by_host["gpu01"])
    assert alone.status is RunStatus.SKIPPED and "needs at least 2" in (alone.error or "")
    assert alone.duration_s is None
    assert "critical findings" in (_bw(by_host["gpu05"]).error or "")
    assert report.curves == []
    assert not [f for f in report.findings if f.code is FindingCode.STRAGGLER_NODE]
    assert by_host["gpu01"].verdict is Verdict.OK
    assert report.exclude == "gpu05" and report.verdict is Verdict.CRITICAL


@pytest.mark.ray
@pytest.mark.timeout(HANG_GUARD_S)
def test_quick_and_standard_levels_run_no_bandwidth_step(cluster: SimCluster) -> None:
    report = _run(cluster, ["gpu01", "gpu02"], Level.STANDARD).report
    assert report.curves == []
    assert all(p.name != BANDWIDTH_PROBE for n in report.nodes for p in n.probes)


@pytest.mark.ray
@pytest.mark.timeout(HANG_GUARD_S)
def test_standard_level_finds_the_nccl_tests_binary_on_the_node(
    cluster: SimCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live job (no bundle: real commands on the node): NCCL_TESTS_HOME and the stand-in nvidia-smi exist
    only in the node task's environment (runtime_env), not in the driver's, so the sweep can only run if the
    binary was looked up on the node."""
    monkeypatch.delenv("NCCL_TESTS_HOME", raising=False)
    smi = fake_nvidia_smi(tmp_path / "smi-bin")
    env = {"env_vars": {"NCCL_TESTS_HOME": str(STANDIN_BIN), "PATH": f"{smi}{os.pathsep}{os.environ['PATH']}"}}
    jobs = {"gpu04": NodeJob(host="gpu04", level=Level.STANDARD, probe_timeout_s=60.0)}
    nodes = match_hosts(["gpu04"], ray_node_hosts(include_real=False))
    result = run_preflight(jobs, nodes, run_timeout_s=120.0, runtime_env=env)
    bundle = result.bundles["gpu04"]
    (sweep,) = [c for c in bundle.commands if c.file == SWEEP_FILE]
    assert sweep.status is RunStatus.OK and sweep.argv is not None and sweep.argv[0] == str(STANDIN)
    assert LARGEST_ROW in bundle.files[SWEEP_FILE]
    facts = node_facts(bundle)
    assert SWEEP_FILE not in {f.file for f in facts.parse_failures}
    assert not [f for f in result.report.findings if f.code.value.startswith("NCCL_")]


@pytest.mark.ray
@pytest.mark.timeout(HANG_GUARD_S)
def test_cli_prints_the_bandwidth_step(
    cluster: SimCluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The human report of a full run (one healthy pair measured, gpu05 left out) lists the curve and why
    gpu05 was not paired."""
    from fleetdx.orchestrator.cli import common, preflight_cmd

    report = _run(cluster, ["gpu01", "gpu02", "gpu05"], Level.FULL, short_step()).report
    assert [c.nodes for c in report.curves] == [["gpu01", "gpu02"]]
    assert not [f for f in report.findings if f.code is FindingCode.STRAGGLER_NODE]  # one pair: no verdict
    monkeypatch.setattr(common.console, "width", 200)
    preflight_cmd._print_report(report, None)
    out = capsys.readouterr().out
    assert "bandwidth curves" in out and "gpu01,gpu02" in out
    assert "gpu05: cross-node-bandwidth skipped: not paired" in out


# ------------------------------------------------------------------------------------ merge, without Ray
def _node_report(host: str, verdict: Verdict) -> NodeReport:
    return NodeReport(host=host, verdict=verdict)


def test_candidates_leave_out_critical_and_silent_nodes() -> None:
    pair, why = bandwidth_candidates(["n1", "n2", "n3", "n4"], answered=["n1", "n2", "n4"], exclude="n[2,9]")
    assert pair == ["n1", "n4"]
    assert why == {
        "n2": "not paired: excluded by critical findings of the node probes",
        "n3": "not paired: no bundle from the node probes",
    }


def test_merge_takes_the_worst_verdicts_and_recomputes_exclude() -> None:
    node_finding = Finding(
        code=FindingCode.GPU_FOREIGN_PROCESS, severity=Severity.CRITICAL, node="n3", subject="GPU0", message="x"
    )
    straggler = Finding(
        code=FindingCode.STRAGGLER_NODE, severity=Severity.CRITICAL, node="n2", subject="n2", message="slow"
    )
    base = RunReport(
        run_id="r",
        kind=RunKind.PREFLIGHT,
        started_at=0.0,
        finished_at=1.0,
        verdict=Verdict.CRITICAL,
        exit_code=2,
        nodes=[_node_report(h, v) for h, v in (("n1", Verdict.OK), ("n2", Verdict.WARNING), ("n3", Verdict.CRITICAL))],
        findings=[node_finding],
        exclude="n3",
    )
    curve = BusbwCurve(collective="all_reduce", nodes=["n1", "n2"], nranks=2, backend="gloo", points=[])
    bw = base.model_copy(
        update={
            "kind": RunKind.BANDWIDTH,
            "nodes": [_node_report("n1", Verdict.OK), _node_report("n2", Verdict.CRITICAL)],
            "findings": [straggler],
            "exclude": "n2",
            "curves": [curve],
        }
    )
    ok = ProbeSummary(name=BANDWIDTH_PROBE, status=RunStatus.OK)
    merged = merge_bandwidth(base, bw, {"n3": "not paired: critical"}, {"n1": ok, "n2": ok})
    assert [(n.host, n.verdict) for n in merged.nodes] == [
        ("n1", Verdict.OK),
        ("n2", Verdict.CRITICAL),
        ("n3", Verdict.CRITICAL),
    ]
    assert [_bw(n).status for n in merged.nodes] == [RunStatus.OK, RunStatus.OK, RunStatus.SKIPPED]
    assert _bw(merged.nodes[2]).error == "not paired: critical"
    # sorted as the engine sorts: severity, then node (both critical: n2 before n3)
    assert merged.findings == [straggler, node_finding] and merged.curves == [curve]
    assert (merged.exclude, merged.verdict, merged.exit_code) == ("n[2-3]", Verdict.CRITICAL, 2)


def test_merge_puts_a_critical_bandwidth_finding_before_a_node_warning() -> None:
    warning = Finding(
        code=FindingCode.GPU_FOREIGN_PROCESS, severity=Severity.WARNING, node="n1", subject="GPU0", message="x"
    )
    straggler = Finding(
        code=FindingCode.STRAGGLER_NODE, severity=Severity.CRITICAL, node="n2", subject="n2", message="slow"
    )
    base = RunReport(
        run_id="r",
        kind=RunKind.PREFLIGHT,
        started_at=0.0,
        finished_at=1.0,
        verdict=Verdict.WARNING,
        exit_code=1,
        nodes=[_node_report("n1", Verdict.WARNING), _node_report("n2", Verdict.OK)],
        findings=[warning],
    )
    bw = base.model_copy(
        update={"kind": RunKind.BANDWIDTH, "verdict": Verdict.CRITICAL, "exit_code": 2, "findings": [straggler]}
    )
    ok = ProbeSummary(name=BANDWIDTH_PROBE, status=RunStatus.OK)
    merged = merge_bandwidth(base, bw, {}, {"n1": ok, "n2": ok})
    assert merged.findings == [straggler, warning]
    assert (merged.exclude, merged.verdict) == ("n2", Verdict.CRITICAL)
