"""The whole pre-flight path on simulated Ray clusters: fan-out -> replayed bundles -> facts -> diagnosis.

Every simulated node replays a real bundle from tests/fixtures/bundles/ (README there says where each file
comes from). Reports are labelled ``simulated``. Deadline checks use generous margins.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from fleetdx.orchestrator.cluster.fanout import match_hosts, ray_node_hosts
from fleetdx.orchestrator.cluster.simulate import SimCluster, SimNode, sim_nodes, simulated_cluster
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.preflight.run import NodeJob, PreflightResult, run_preflight
from fleetdx.probes.contracts import Level, Severity, Verdict
from tests.straggler import HANG_GUARD_S

pytestmark = [pytest.mark.ray, pytest.mark.timeout(HANG_GUARD_S)]

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"
SIM_BUNDLES = ["h100-idle", "h100-busy", "topo-01", "topo-03", "topo-06", "topo-11", "topo-21"]
HANG_MARK = "3599.25"  # the stand-in nvidia-smi's child is `sleep 3599.25`: unique, findable with psutil


def _jobs(
    nodes: list[SimNode], level: Level = Level.QUICK, delay: dict[str, float] | None = None
) -> dict[str, NodeJob]:
    delay = delay or {}
    return {
        n.host: NodeJob(host=n.host, level=level, bundle_dir=n.bundle_dir, delay_s=delay.get(n.host, 0.0))
        for n in nodes
    }


def _run(jobs: dict[str, NodeJob], timeout_s: float, **kw: object) -> PreflightResult:
    nodes = match_hosts(list(jobs), ray_node_hosts(include_real=False))
    return run_preflight(jobs, nodes, run_timeout_s=timeout_s, simulated=True, **kw)  # type: ignore[arg-type]


def test_hung_probe_is_killed_with_no_orphan(tmp_path: Path) -> None:
    """A live node whose nvidia-smi hangs (a stand-in script that sleeps in a child): every nvidia-smi probe
    times out at the per-probe cap, is reported PROBE_TIMEOUT, and no process of it survives."""
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nsleep {HANG_MARK} &\nwait\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {"env_vars": {"PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}}
    with simulated_cluster([SimNode(host="hang1", bundle_dir=tmp_path)]):
        jobs = {"hang1": NodeJob(host="hang1", level=Level.QUICK, probe_timeout_s=1.0)}
        result = _run(jobs, 90.0, runtime_env=env)
    report = result.report
    timeouts = {f.subject for f in report.findings if f.code is FindingCode.PROBE_TIMEOUT}
    assert {"nvidia-smi_-L.txt", "nvidia-smi_-q_-x.xml", "nvidia-smi_topo_-m.txt"} <= timeouts
    # PROBE_TIMEOUT is a warning (issue 4), but with nvidia-smi timed out there is no GPU inventory: the node
    # cannot be judged, so UNKNOWN (issue 10: never WARNING on missing evidence)
    assert report.nodes[0].verdict is Verdict.UNKNOWN
    assert report.verdict is Verdict.UNKNOWN
    survivors = [
        p for p in psutil.process_iter(["cmdline"]) if HANG_MARK in " ".join(p.info["cmdline"] or [])
    ]
    assert survivors == []


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    with simulated_cluster(sim_nodes([BUNDLES / b for b in SIM_BUNDLES])) as sim:
        yield sim


def test_seven_node_simulated_preflight(cluster: SimCluster) -> None:
    result = _run(_jobs(cluster.nodes), 120.0)
    report = result.report
    assert report.simulated and report.kind.value == "preflight"
    by_host = {n.host: n for n in report.nodes}
    assert sorted(by_host) == sorted(SIM_BUNDLES)
    assert set(result.bundles) == set(SIM_BUNDLES) and all(b.replayed for b in result.bundles.values())
    # the five topo-only nodes show 8 GPUs in their `nvidia-smi topo -m` matrices; both H100 VMs list one GPU
    # ("GPU 0: NVIDIA H100 80GB HBM3" in nvidia-smi_-L.txt): against the fleet's majority they are short
    mismatch = {f.node for f in report.findings if f.code is FindingCode.GPU_COUNT_MISMATCH}
    assert mismatch == {"h100-idle", "h100-busy"}
    # the busy VM's nvidia-smi_query-compute-apps.csv: "1929, python3, 19948 MiB, 00000000:00:06.0"
    foreign = [f for f in report.findings if f.code is FindingCode.GPU_FOREIGN_PROCESS]
    assert [f.node for f in foreign] == ["h100-busy"] and "1929" in foreign[0].message
    # topo-only nodes: no GPU inventory in the bundle, so never OK; the DGX-1 (topo-01) has SYS GPU pairs
    # (GPU0-GPU5 is SYS in its matrix) and the P40 node's only NIC is SOC from every GPU
    # (their warnings are reported, their verdict is UNKNOWN like any node that cannot be judged)
    for host in ("topo-06", "topo-21", "topo-01", "topo-03", "topo-11"):
        assert by_host[host].verdict is Verdict.UNKNOWN
    codes = {(f.node, f.code) for f in report.findings}
    assert ("topo-01", FindingCode.TOPO_GPU_PAIR_SYS) in codes
    assert ("topo-11", FindingCode.TOPO_GPU_NIC_REMOTE) in codes
    skipped = {p.name: p.error for p in by_host["topo-11"].probes if p.status.value == "skipped"}
    assert "not in bundle" in (skipped["nvidia-smi_-q_-x.xml"] or "")
    assert by_host["h100-idle"].verdict is Verdict.CRITICAL
    assert (report.verdict, report.exit_code) == (Verdict.CRITICAL, 2)
    assert report.exclude == "h100-busy,h100-idle"


def test_node_killed_mid_run_is_unreachable_and_excluded(cluster: SimCluster) -> None:
    """Runs last: removes topo-06's Ray node while its (slowed) replay runs."""
    jobs = _jobs(cluster.nodes, delay={"topo-06": 5.0})
    killer = threading.Timer(2.0, cluster.kill, args=("topo-06",))
    killer.start()
    t0 = time.monotonic()
    report = _run(jobs, 60.0).report
    elapsed = time.monotonic() - t0
    killer.join()
    lost = [f for f in report.findings if f.code is FindingCode.NODE_UNREACHABLE]
    assert [f.node for f in lost] == ["topo-06"]
    assert lost[0].severity is Severity.CRITICAL and lost[0].details["ray_state"] == "DEAD"
    assert report.verdict is Verdict.CRITICAL and report.exit_code == 2
    assert report.exclude == "h100-busy,h100-idle,topo-06"
    assert {n.host for n in report.nodes} == set(SIM_BUNDLES)
    assert elapsed < 60.0  # ended on the node's death, well before the run deadline


def test_cli_analyze_json_exit_code_and_exclude_file(tmp_path: Path) -> None:
    import json

    import typer
    from typer.testing import CliRunner

    from fleetdx.orchestrator.cli import preflight_cmd

    app = typer.Typer()
    preflight_cmd.register(app)
    exclude = tmp_path / "exclude.txt"
    res = CliRunner().invoke(
        app,
        [
            "analyze",
            str(BUNDLES / "nccl-h100x16-fail"),
            str(BUNDLES / "h100-idle"),
            "--json",
            "--exclude-file",
            str(exclude),
        ],
    )
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert {"verdict", "exit_code", "simulated", "nodes", "findings", "exclude"} <= set(doc)
    assert (doc["verdict"], doc["exit_code"], doc["simulated"]) == ("CRITICAL", 2, False)
    idle = next(n for n in doc["nodes"] if n["host"] == "h100-idle")
    assert {"name", "status", "duration_s", "error"} <= set(idle["probes"][0])
    assert {"code", "severity", "nodes", "subject", "message", "evidence"} <= set(doc["findings"][0])
    # the failure lines name h100-4, the host excluded (not the bundle's folder name: issue 10, item 22)
    assert exclude.read_text() == "h100-4\n"


def test_cli_preflight_simulate_is_labelled(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("fleetdx")
    res = subprocess.run(
        [
            str(exe),
            "preflight",
            "--simulate",
            str(BUNDLES / "h100-idle"),
            str(BUNDLES / "topo-11"),
            "--json",
            "--no-save",
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    doc = json.loads(res.stdout)
    assert doc["simulated"] is True and doc["kind"] == "preflight"
    # h100-idle: OK; topo-11: warnings (remote NIC), but no GPU inventory -> UNKNOWN, and so the run
    assert {n["host"]: n["verdict"] for n in doc["nodes"]} == {"h100-idle": "OK", "topo-11": "UNKNOWN"}
    assert res.returncode == doc["exit_code"] == 3
