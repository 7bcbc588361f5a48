"""fleetdx's node writer against a STAND-IN Kubernetes API server (tests/k8s_standin.py: only the endpoints the
writer calls; no real cluster can run here). The report is a real pre-flight judgement of the busy-H100
bundle (another process holds GPU0), replayed through the local path, with its host renamed to a node name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetdx.orchestrator.cli.main import _register, app
from fleetdx.orchestrator.preflight.run import NodeJob, run_local_preflight
from fleetdx.orchestrator.report import RunReport
from fleetdx.orchestrator.scheduler.k8s_nodes import (
    CONDITION_TYPE,
    LABEL_VERDICT,
    STRATEGIC_MERGE,
    TAINT_KEY,
    apply_marks,
    core_api,
    marks_of,
)
from fleetdx.probes.contracts import Verdict
from tests.k8s_standin import StandInApiServer, node_doc

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"


@pytest.fixture(scope="module")
def busy_report() -> RunReport:
    busy = run_local_preflight(
        NodeJob(host="gke-a3-node-1", level="quick", bundle_dir=BUNDLES / "h100-busy"), run_timeout_s=60
    ).report
    idle = run_local_preflight(
        NodeJob(host="gke-a3-node-2", level="quick", bundle_dir=BUNDLES / "h100-idle"), run_timeout_s=60
    ).report
    assert busy.verdict is Verdict.CRITICAL and idle.verdict is not Verdict.CRITICAL
    return busy.model_copy(update={"nodes": busy.nodes + idle.nodes, "findings": busy.findings + idle.findings})


def _node(server: StandInApiServer, name: str) -> dict:
    return server.nodes[name]


def test_marks_label_condition_and_taint(busy_report: RunReport) -> None:
    other_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    nodes = [node_doc("gke-a3-node-1", taints=[other_taint]), node_doc("gke-a3-node-2")]
    with StandInApiServer(nodes) as server:
        results = apply_marks(marks_of(busy_report, taint_critical=True), core_api(host=server.url))
        assert [r.error for r in results] == [None, None]
        busy, idle = _node(server, "gke-a3-node-1"), _node(server, "gke-a3-node-2")
        assert busy["metadata"]["labels"][LABEL_VERDICT] == "CRITICAL"
        assert busy["metadata"]["labels"]["kubernetes.io/hostname"] == "gke-a3-node-1"  # merged, not replaced
        cond = {c["type"]: c for c in busy["status"]["conditions"]}
        assert cond[CONDITION_TYPE]["status"] == "True" and cond[CONDITION_TYPE]["reason"] == "GpuForeignProcess"
        assert cond["Ready"]["status"] == "True"  # the kubelet's condition is untouched
        assert other_taint in busy["spec"]["taints"]
        assert {"key": TAINT_KEY, "value": "GPU_FOREIGN_PROCESS", "effect": "NoSchedule"} in busy["spec"]["taints"]
        idle_cond = {c["type"]: c for c in idle["status"]["conditions"]}[CONDITION_TYPE]
        assert idle["spec"]["taints"] == [] and idle_cond["status"] in ("False", "Unknown")
        assert all(ct == STRATEGIC_MERGE for m, _, ct in server.requests if m == "PATCH")

        # a later clean verdict on the busy node removes fleetdx's taint and keeps the other one
        clean = busy_report.model_copy(update={"findings": [], "nodes": [
            n.model_copy(update={"verdict": Verdict.OK}) for n in busy_report.nodes]})
        apply_marks(marks_of(clean, taint_critical=True), core_api(host=server.url))
        busy = _node(server, "gke-a3-node-1")
        assert busy["spec"]["taints"] == [other_taint] and busy["metadata"]["labels"][LABEL_VERDICT] == "OK"
        cond = {c["type"]: c for c in busy["status"]["conditions"]}[CONDITION_TYPE]
        assert (cond["status"], cond["reason"]) == ("False", "NoCriticalFinding")


def test_taints_are_left_alone_unless_asked(busy_report: RunReport) -> None:
    with StandInApiServer([node_doc("gke-a3-node-1"), node_doc("gke-a3-node-2")]) as server:
        results = apply_marks(marks_of(busy_report), core_api(host=server.url))
        assert all(r.tainted is None for r in results)
        assert _node(server, "gke-a3-node-1")["spec"]["taints"] == []


def test_an_absent_node_fails_alone(busy_report: RunReport) -> None:
    with StandInApiServer([node_doc("gke-a3-node-2")]) as server:
        results = apply_marks(marks_of(busy_report), core_api(host=server.url))
        assert results[0].error is not None and "404" in results[0].error
        assert results[1].error is None and _node(server, "gke-a3-node-2")["metadata"]["labels"][LABEL_VERDICT]


def test_cli_mark_and_unreachable_server(busy_report: RunReport, tmp_path: Path) -> None:
    _register()
    path = tmp_path / "report.json"
    path.write_text(busy_report.model_dump_json())
    runner = CliRunner()
    with StandInApiServer([node_doc("gke-a3-node-1"), node_doc("gke-a3-node-2")]) as server:
        res = runner.invoke(app, ["k8s", "mark", "--report", str(path), "--server", server.url, "--json",
                                  "--taint-critical"])
        assert res.exit_code == 0, res.output
        assert [r["tainted"] for r in json.loads(res.output)] == [True, False]
    dead = runner.invoke(app, ["k8s", "mark", "--report", str(path), "--server", "http://127.0.0.1:9", "--json"])
    assert dead.exit_code == 3
    assert all(r["error"] for r in json.loads(dead.stdout))
