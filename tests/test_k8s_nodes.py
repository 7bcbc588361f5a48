"""fleetdx's node writer against a STAND-IN Kubernetes API server (tests/k8s_standin.py: only the endpoints the
writer calls; no real cluster can run here). The report is a real pre-flight judgement of the busy-H100
bundle (another process holds GPU0), replayed through the local path, with its host renamed to a node name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetdx.orchestrator.cli.main import _register, app
from fleetdx.orchestrator.preflight.run import NodeJob, run_local_preflight
from fleetdx.orchestrator.report import RunReport
from fleetdx.orchestrator.scheduler.k8s_nodes import (
    ANNOTATION_HELD,
    ANNOTATION_RETURNED_AT,
    ANNOTATION_TAINT_CODE,
    ANNOTATION_TAINT_LEVEL,
    CONDITION_TYPE,
    LABEL_VERDICT,
    STRATEGIC_MERGE,
    TAINT_KEY,
    MarkResult,
    WatchRound,
    apply_marks,
    core_api,
    marks_of,
    watch,
)
from fleetdx.probes.contracts import Level, Verdict
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


def _clean(report: RunReport, level: Level = Level.QUICK) -> RunReport:
    """``report`` retested clean: no findings, every node OK (as a passing retest of the same nodes reports)."""
    nodes = [n.model_copy(update={"verdict": Verdict.OK}) for n in report.nodes]
    return report.model_copy(update={"findings": [], "nodes": nodes, "level": level, "verdict": Verdict.OK})


def _our_taints(server: StandInApiServer, name: str) -> list[dict[str, str]]:
    return [t for t in _node(server, name)["spec"]["taints"] if t["key"] == TAINT_KEY]


def test_a_taint_fleetdx_did_not_put_is_never_touched(busy_report: RunReport) -> None:
    """An administrator holding a node out under fleetdx's key: neither a CRITICAL nor a clean verdict changes
    that taint (NHC undoes only its own drains)."""
    held = {"key": TAINT_KEY, "value": "held-by-admin", "effect": "NoSchedule"}
    with StandInApiServer([node_doc("gke-a3-node-1", taints=[held]), node_doc("gke-a3-node-2")]) as server:
        api = core_api(host=server.url)
        first = apply_marks(marks_of(busy_report, taint_critical=True), api)[0]
        assert first.error is None and first.tainted is True and "not put by fleetdx" in (first.note or "")
        assert _node(server, "gke-a3-node-1")["spec"]["taints"] == [held]
        assert _node(server, "gke-a3-node-1")["metadata"]["labels"][LABEL_VERDICT] == "CRITICAL"
        again = apply_marks(marks_of(_clean(busy_report), taint_critical=True), api)[0]
        assert again.tainted is True and again.note and _node(server, "gke-a3-node-1")["spec"]["taints"] == [held]


def test_only_a_judged_retest_at_the_taints_level_removes_it(busy_report: RunReport) -> None:
    """A taint put by a standard-level run stays after a clean quick retest (which does not rerun the
    micro-benchmarks) and after an UNKNOWN verdict; a clean standard retest removes it and its annotations."""
    standard = busy_report.model_copy(update={"level": Level.STANDARD})
    with StandInApiServer([node_doc("gke-a3-node-1"), node_doc("gke-a3-node-2")]) as server:
        api = core_api(host=server.url)
        apply_marks(marks_of(standard, taint_critical=True), api)
        notes = _node(server, "gke-a3-node-1")["metadata"]["annotations"]
        assert notes == {ANNOTATION_TAINT_CODE: "GPU_FOREIGN_PROCESS", ANNOTATION_TAINT_LEVEL: "standard"}

        quick = apply_marks(marks_of(_clean(busy_report), taint_critical=True), api)[0]
        assert quick.tainted is True and "level standard" in (quick.note or "")
        assert _our_taints(server, "gke-a3-node-1") != []

        unjudged = _clean(busy_report, Level.STANDARD)
        unjudged = unjudged.model_copy(update={"nodes": [
            n.model_copy(update={"verdict": Verdict.UNKNOWN}) for n in unjudged.nodes]})
        unknown = apply_marks(marks_of(unjudged, taint_critical=True), api)[0]
        assert unknown.tainted is None and _our_taints(server, "gke-a3-node-1") != []
        assert _node(server, "gke-a3-node-1")["metadata"]["labels"][LABEL_VERDICT] == "UNKNOWN"

        lifted = apply_marks(marks_of(_clean(busy_report, Level.STANDARD), taint_critical=True), api)[0]
        assert (lifted.tainted, lifted.note) == (False, None)
        assert _our_taints(server, "gke-a3-node-1") == []
        assert set(_node(server, "gke-a3-node-1")["metadata"]["annotations"]) == {ANNOTATION_RETURNED_AT}


def test_watch_taints_then_returns_the_node_after_a_clean_retest(busy_report: RunReport) -> None:
    """The DaemonSet's loop: a CRITICAL check taints the node, the next clean one removes fleetdx's taint and
    keeps the GPU operator's; a check that raises is one failed round, not the end of the loop."""
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    checks: Iterator[RunReport | Exception] = iter([busy_report, RuntimeError("nvidia-smi hung"),
                                                    _clean(busy_report)])
    seen: list[tuple[str | None, list[dict[str, str]]]] = []

    def check() -> RunReport:
        step = next(checks)
        if isinstance(step, Exception):
            raise step
        return step

    with StandInApiServer([node_doc("gke-a3-node-1", taints=[gpu_taint]), node_doc("gke-a3-node-2")]) as server:
        api = core_api(host=server.url)

        def mark(report: RunReport) -> list[MarkResult]:
            return apply_marks(marks_of(report, taint_critical=True), api)

        def after(r: WatchRound) -> None:
            seen.append((r.error, _node(server, "gke-a3-node-1")["spec"]["taints"]))

        rounds = watch(check, mark, interval_s=0.01, rounds=3, on_round=after)
    assert [r.verdict for r in rounds] == ["CRITICAL", None, "OK"]
    assert seen[0] == (None, [gpu_taint, {"key": TAINT_KEY, "value": "GPU_FOREIGN_PROCESS", "effect": "NoSchedule"}])
    assert seen[1][0] == "RuntimeError: nvidia-smi hung" and rounds[1].results == []
    assert seen[2] == (None, [gpu_taint])
    assert [m.tainted for m in rounds[2].results] == [False, False]


def test_cli_watch_checks_this_node_live(monkeypatch: pytest.MonkeyPatch) -> None:
    """``k8s watch --rounds 1`` runs the real quick check on this machine (no GPU here: whatever it judges)
    and writes that verdict on the node named by $FLEETDX_K8S_NODE_NAME; without that variable it is a usage
    error."""
    _register()
    runner = CliRunner()
    monkeypatch.delenv("FLEETDX_K8S_NODE_NAME", raising=False)
    with StandInApiServer([node_doc("gke-a3-node-7")]) as server:
        missing = runner.invoke(app, ["k8s", "watch", "--rounds", "1", "--server", server.url])
        assert missing.exit_code == 3 and "FLEETDX_K8S_NODE_NAME" in missing.output
        monkeypatch.setenv("FLEETDX_K8S_NODE_NAME", "gke-a3-node-7")
        res = runner.invoke(app, ["k8s", "watch", "--rounds", "1", "--interval", "1", "--server", server.url,
                                  "--json", "--taint-critical", "--timeout", "60"])
        assert res.exit_code == 0, res.output
        (line,) = res.stdout.splitlines()
        done = json.loads(line)
        assert done["error"] is None and [m["node"] for m in done["results"]] == ["gke-a3-node-7"]
        assert _node(server, "gke-a3-node-7")["metadata"]["labels"][LABEL_VERDICT] == done["verdict"]


def test_a_node_critical_again_soon_after_its_return_stays_out_for_a_person(busy_report: RunReport) -> None:
    """Flap damping: tainted, returned by a clean retest, CRITICAL again within the flap window: the new taint is
    held and clean retests keep it; once a person removes it, fleetdx forgets the hold, and a failure after the
    window is an ordinary one again."""
    t0 = busy_report.finished_at
    window = 3600.0

    def at(report: RunReport, t: float) -> list[MarkResult]:
        marks = marks_of(report.model_copy(update={"finished_at": t}), taint_critical=True, flap_window_s=window)
        return apply_marks(marks, api)

    with StandInApiServer([node_doc("gke-a3-node-1"), node_doc("gke-a3-node-2")]) as server:
        api = core_api(host=server.url)
        notes = lambda: _node(server, "gke-a3-node-1")["metadata"].get("annotations", {})  # noqa: E731
        at(busy_report, t0)
        assert at(_clean(busy_report), t0 + 100)[0].tainted is False
        assert notes()[ANNOTATION_RETURNED_AT] == f"{t0 + 100:.0f}"

        again = at(busy_report, t0 + 700)[0]
        assert again.tainted is True and "600 s after fleetdx returned it" in notes()[ANNOTATION_HELD]
        kept = at(_clean(busy_report), t0 + 800)[0]
        assert kept.tainted is True and "held" in (kept.note or "") and "kubectl taint nodes" in (kept.note or "")
        assert _our_taints(server, "gke-a3-node-1") != []

        # a person returns the node: the taint goes, and fleetdx drops its annotations at the next check
        server.nodes["gke-a3-node-1"]["spec"]["taints"] = []
        assert at(_clean(busy_report), t0 + 900)[0].tainted is False
        assert ANNOTATION_HELD not in notes() and ANNOTATION_TAINT_CODE not in notes()

        late = at(busy_report, t0 + 100 + window + 1)[0]
        assert late.tainted is True and ANNOTATION_HELD not in notes()
        assert at(_clean(busy_report), t0 + 2 * window)[0].tainted is False
