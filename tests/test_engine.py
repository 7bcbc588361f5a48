"""The diagnosis engine: probe findings, verdicts (Nagios), the exclude hostlist, and whole bundles.

Bundles in tests/fixtures/bundles/ are real captured outputs (see its README); expected facts below were read
from those files by eye.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis import engine, rules_gpu, rules_nccl, rules_node, rules_topo
from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import diagnose, probe_findings, unjudged_reason
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.judgement.envelope import exclude_hostlist, node_verdict
from fleetdx.orchestrator.preflight.run import analyze_bundles, report_of
from fleetdx.orchestrator.report import RunKind
from fleetdx.probes.contracts import RunStatus, Severity, Verdict
from fleetdx.probes.facts import NodeFacts, ParseFailure, ProbeRecord

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"


def _finding(host: str, severity: Severity, code: FindingCode = FindingCode.GPU_XID) -> Finding:
    return Finding(code=code, severity=severity, node=host, subject="GPU0", message="test")


def _probe(name: str, status: RunStatus, error: str | None = None) -> ProbeRecord:
    return ProbeRecord(name=name, status=status, error=error, argv=["nvidia-smi", "-q", "-x"])


def test_engine_runs_every_rules_module() -> None:
    for module in (rules_gpu, rules_node, rules_nccl, rules_topo):
        assert set(module.RULES) <= set(engine.RULES)


def test_timeouts_failures_and_parse_failures_become_warnings() -> None:
    node = NodeFacts(
        host="n1",
        probes=[
            _probe("nvidia-smi_-q_-x.xml", RunStatus.TIMEOUT, "no exit within 30 s; process group killed"),
            _probe("numactl_-H.txt", RunStatus.FAILED, "exit code 1"),
            _probe("ibstat.txt", RunStatus.SKIPPED, "ibstat: not found on PATH"),
        ],
        parse_failures=[
            ParseFailure(file="lscpu_-J.json", kind="lscpu", line=3, message="lscpu: line 3: bad")
        ],
    )
    got = {(f.code, f.subject): f for f in probe_findings(node)}
    assert set(got) == {
        (FindingCode.PROBE_TIMEOUT, "nvidia-smi_-q_-x.xml"),
        (FindingCode.PROBE_FAILED, "numactl_-H.txt"),
        (FindingCode.PARSE_FAILED, "lscpu_-J.json"),
    }
    assert all(f.severity is Severity.WARNING and f.node == "n1" for f in got.values())
    timeout = got[(FindingCode.PROBE_TIMEOUT, "nvidia-smi_-q_-x.xml")]
    assert str(timeout.details["error"]).startswith("no exit")


def test_node_with_nothing_parsed_is_unjudged() -> None:
    node = NodeFacts(
        host="n1", probes=[_probe("nvidia-smi_-q_-x.xml", RunStatus.SKIPPED, "nvidia-smi: not found")]
    )
    assert unjudged_reason(node) == "no probe ran and parsed"


def test_node_without_gpu_inventory_is_unjudged_and_says_why() -> None:
    node = NodeFacts(
        host="n1",
        probes=[
            _probe("numactl_-H.txt", RunStatus.OK),
            _probe("nvidia-smi_-q_-x.xml", RunStatus.SKIPPED, "nvidia-smi: not found"),
        ],
    )
    reason = unjudged_reason(node)
    assert reason is not None and "nvidia-smi: not found" in reason


@pytest.mark.parametrize(
    ("severities", "unjudged", "expected"),
    [
        ([], False, Verdict.OK),
        ([Severity.INFO], False, Verdict.OK),
        ([], True, Verdict.UNKNOWN),
        ([Severity.WARNING], True, Verdict.UNKNOWN),  # unjudged: a warning does not judge the rest
        ([Severity.WARNING, Severity.CRITICAL], False, Verdict.CRITICAL),
    ],
)
def test_node_verdict_is_worst_severity(
    severities: list[Severity], unjudged: bool, expected: Verdict
) -> None:
    assert node_verdict([_finding("n", s) for s in severities], unjudged) is expected


def test_exclude_is_compressed_hostlist_of_critical_nodes_only() -> None:
    findings = [_finding(h, Severity.CRITICAL) for h in ("gpu07", "gpu01", "gpu02", "gpu03", "gpu02")]
    findings.append(_finding("gpu05", Severity.WARNING))
    assert exclude_hostlist(findings) == "gpu[01-03,07]"
    assert exclude_hostlist([_finding("gpu05", Severity.WARNING)]) == ""


def test_diagnose_with_injected_rule_and_a_lost_node() -> None:
    ok = NodeFacts(host="a1", probes=[_probe("numactl_-H.txt", RunStatus.OK)])

    def rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
        return [_finding(node.host, Severity.INFO)]

    lost = Finding(
        code=FindingCode.NODE_UNREACHABLE,
        severity=Severity.CRITICAL,
        node="a2",
        subject="node",
        message="no bundle",
    )
    d = report_of(
        RunKind.ANALYZE, diagnose(Fleet(nodes=[ok]), lost=[lost], rules=[rule]), started_at=0.0, level=None,
        simulated=False,
    )
    by_host = {n.host: n for n in d.nodes}
    assert by_host["a1"].verdict is Verdict.UNKNOWN  # no GPU inventory: cannot be called healthy
    assert by_host["a2"].verdict is Verdict.CRITICAL and by_host["a2"].probes == []
    assert d.verdict is Verdict.CRITICAL and d.exclude == "a2"
    assert d.findings[0].code is FindingCode.NODE_UNREACHABLE  # most severe first


def test_idle_h100_bundle_is_ok() -> None:
    report = analyze_bundles([BUNDLES / "h100-idle"]).report
    assert (report.verdict, report.exit_code, report.exclude) == (Verdict.OK, 0, "")
    assert report.nodes[0].host == "h100-idle"
    assert not [f for f in report.findings if f.severity is not Severity.INFO]


def test_failed_nccl_tests_output_is_critical_and_excluded() -> None:
    # the file's own text: "h100-4: Test NCCL failure common.cu:1057 'internal error / '"
    report = analyze_bundles([BUNDLES / "nccl-h100x16-fail", BUNDLES / "h100-idle"]).report
    assert report.verdict is Verdict.CRITICAL and report.exit_code == 2
    # the host the evidence names is excluded, not the bundle's folder (issue 10, item 22)
    assert report.exclude == "h100-4"
    failed = [f for f in report.findings if f.code is FindingCode.NCCL_TEST_FAILED]
    assert failed and failed[0].nodes == ["h100-4"]
    assert "common.cu:1057" in failed[0].message


def test_topo_only_bundle_warns_and_is_not_called_healthy() -> None:
    # Tesla P40 node: its one NIC mlx5_0 is SOC (legacy SYS) from all 8 GPUs in the raw topo -m matrix
    report = analyze_bundles([BUNDLES / "topo-11"]).report
    remote = {f.subject for f in report.findings if f.code is FindingCode.TOPO_GPU_NIC_REMOTE}
    assert remote == {f"GPU{i}-mlx5_0" for i in range(8)}
    # no GPU inventory in the bundle: UNKNOWN, as any node that cannot be judged (issue 10: not WARNING for one
    # unjudged node and UNKNOWN for another); the warnings are still reported
    assert report.nodes[0].verdict is Verdict.UNKNOWN and report.nodes[0].unjudged


def test_busy_h100_flags_the_foreign_process() -> None:
    # nvidia-smi_query-compute-apps.csv: "1929, python3, 19948 MiB, 00000000:00:06.0"
    report = analyze_bundles([BUNDLES / "h100-busy"]).report
    foreign = [f for f in report.findings if f.code is FindingCode.GPU_FOREIGN_PROCESS]
    assert foreign and "1929" in str(foreign[0].details)
    assert report.verdict in (Verdict.WARNING, Verdict.CRITICAL)


def test_gpu_count_mismatch_against_expected() -> None:
    # nvidia-smi -L of the H100 VM lists one GPU ("GPU 0: NVIDIA H100 80GB HBM3")
    report = analyze_bundles([BUNDLES / "h100-idle"], expected_gpus=8).report
    assert any(
        f.code is FindingCode.GPU_COUNT_MISMATCH and f.severity is Severity.CRITICAL for f in report.findings
    )
    assert report.exclude == "h100-idle" and report.exit_code == 2
