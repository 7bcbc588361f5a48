"""DCGM diagnostics: the dcgmi diag (text, JSON) and dcgmi health parsers on public captures (goldens), and the
opt-in probe run through the runner against a STAND-IN dcgmi (tests/fixtures/dcgm/standin/dcgmi, not
dcgmi) that replays those captures: findings DCGM_DIAG_FAILED and DCGM_HEALTH, a hung dcgmi cut by the hard
deadline (PROBE_TIMEOUT, raw output kept), and ``skipped`` with the reason where no dcgmi is on PATH.

Fixture origins: tests/fixtures/dcgm/SOURCES (the health outputs are rebuilt from DCGM's own unit test, not
captured: it says so).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import diagnose
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes import catalog
from fleetdx.probes.bundle import BundleData, collect, read_bundle, write_bundle
from fleetdx.probes.catalog import DCGM_HEALTH_FILE, dcgm_probes
from fleetdx.probes.contracts import Level, RunStatus, Severity
from fleetdx.probes.errors import ParseError
from fleetdx.probes.facts import NodeFacts, node_facts
from fleetdx.probes.parsers.dcgm import (
    DcgmHealthResult,
    DcgmStatus,
    parse_dcgm_diag,
    parse_dcgm_health,
    status_of,
)
from fleetdx.probes.runner import RunResult, SubprocessRunner

FIX = Path(__file__).parent / "fixtures" / "dcgm"
STANDIN = FIX / "standin"
GOLDEN = FIX / "golden"
DIAG = sorted(p.name for p in FIX.glob("diag_*"))
HEALTH = sorted(p.name for p in FIX.glob("health_*"))


def _golden(name: str, got: object) -> None:
    """Compare with tests/fixtures/dcgm/golden/NAME.json; FLEETDX_REGEN_GOLDENS=1 rewrites it (review the diff)."""
    path = GOLDEN / f"{name}.json"
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if os.environ.get("FLEETDX_REGEN_GOLDENS") == "1":
        path.write_text(text)
    assert json.loads(path.read_text()) == json.loads(text), f"{name} differs from its golden"


@pytest.mark.parametrize("name", DIAG)
def test_diag_matches_golden(name: str) -> None:
    _golden(name, parse_dcgm_diag((FIX / name).read_text()).model_dump(mode="json"))


@pytest.mark.parametrize("name", HEALTH)
def test_health_matches_golden(name: str) -> None:
    _golden(name, parse_dcgm_health((FIX / name).read_text()).model_dump(mode="json"))


def test_dcgm4_fail_with_wrapped_warning() -> None:
    """DCGM 4.4.1 (issue #254): pcie Fail, the warning wrapped mid-word over five rows, joined back."""
    d = parse_dcgm_diag((FIX / "diag_r2_4.4.1_pcie_fail_dcgm_issue254.txt").read_text())
    assert (d.version, d.driver_version) == ("4.4.1", "580.65.06")
    (t,) = d.failed
    assert (t.category, t.name, t.status) == ("Integration", "pcie", DcgmStatus.FAIL)
    assert t.warnings == [
        "There was an internal error during the test: 'A child process (2378806) exited with non-zero status 1' "
        "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."
    ]


def test_dcgm4_per_gpu_rows_and_dcgm3_skips() -> None:
    d4 = parse_dcgm_diag((FIX / "diag_r2_4.4.2_pass_dcgm_issue124.txt").read_text())
    assert [(t.name, t.status, t.gpus) for t in d4.tests] == [
        ("software", DcgmStatus.PASS, [0]),
        ("memory", DcgmStatus.PASS, [0]),
        ("pcie", DcgmStatus.PASS, [0]),
    ]
    d3 = parse_dcgm_diag((FIX / "diag_r3_3.3.9_skip_slurm-on-aws.txt").read_text())
    assert len(d3.tests) == 15  # the table printed twice (two srun tasks): one test each
    assert {t.name for t in d3.tests if t.status is DcgmStatus.SKIP} == {
        "PCIe",
        "GPU Memory",
        "Targeted Stress",
        "Targeted Power",
        "Memory Bandwidth",
        "EUD Test",
    }


def test_dcgm3_json_with_nulls() -> None:
    d = parse_dcgm_diag((FIX / "diag_j_3.1.0_dcgm_jsonresult_test.json").read_text())
    assert d.format == "json" and d.version == "3.1.0"
    assert len(d.tests) == 10 and all(t.status is DcgmStatus.PASS for t in d.tests)
    software = d.tests[-1]
    assert (software.category, [r.gpus for r in software.results]) == ("Custom", [[g] for g in range(8)])


def test_dcgm4_json_shape() -> None:
    """The 4.x shape (testing/python3/dcgm_diag_schema.json): entity results, warning objects, metadata."""
    doc = {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "memory",
                            "results": [
                                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
                                {
                                    "entity_group": "GPU",
                                    "entity_group_id": 1,
                                    "entity_id": 3,
                                    "status": "Fail",
                                    "warnings": [{"warning": "DBE error", "error_id": 27}],
                                },
                            ],
                            "test_summary": {"status": "Fail"},
                        }
                    ],
                }
            ]
        },
        "metadata": {"version": "4.2.3", "Driver Version Detected": "570.148.08"},
    }
    d = parse_dcgm_diag(json.dumps(doc))
    (t,) = d.failed
    assert (t.gpus, t.warnings, d.version, d.driver_version) == ([3], ["DBE error"], "4.2.3", "570.148.08")


def test_statuses_are_never_a_pass_by_default() -> None:
    assert status_of("Skip - All") is DcgmStatus.SKIP
    assert status_of("Fail - GPU: 0") is DcgmStatus.FAIL
    assert status_of("PASS") is DcgmStatus.PASS
    assert status_of("Incomplete") is DcgmStatus.NOT_RUN
    assert status_of("") is DcgmStatus.NOT_RUN


def test_health_incidents() -> None:
    h = parse_dcgm_health((FIX / "health_c_reconstructed_from_dcgm_healthtests.txt").read_text())
    assert h.overall is DcgmHealthResult.FAILURE
    assert [(i.entity, i.system, i.health.value) for i in h.incidents] == [
        ("GPU 0", "Memory system", "Warning"),
        ("GPU 1", "Memory system", "Failure"),
        ("GPU 1", "SM system", "Warning"),
    ]
    assert h.incidents[0].message == "The car is red? Are you sure because that doesn't seem like the color I ordered."


@pytest.mark.parametrize("text", ["", "dcgmi: command not found\n", "{not json", '{"x": 1}', "[1, 2]"])
def test_bad_diag_input_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_dcgm_diag(text)


def test_bad_health_input_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_dcgm_health("Health monitor systems set successfully.\n")


# ---------------------------------------------------------------------------------- the probe, stand-in dcgmi
class _OnlyDcgmi:
    """Runs ``dcgmi`` for real (the stand-in, found on PATH) and records every other command ``skipped``: the
    test exercises the DCGM probe, not the node's other tools."""

    def __init__(self) -> None:
        self.real = SubprocessRunner()

    def run(self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult:
        if argv[0] == "dcgmi":
            return self.real.run(argv, timeout_s, env)
        return RunResult(argv=list(argv), status=RunStatus.SKIPPED, reason=f"{argv[0]}: not run in this test")


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: int, **env: str) -> tuple[BundleData, NodeFacts]:
    monkeypatch.setenv("PATH", f"{STANDIN}{os.pathsep}{os.environ['PATH']}")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    data = collect(_OnlyDcgmi(), Level.QUICK, "gpu-node", sysfs_root=None, dcgm_level=level)
    bundle = write_bundle(data, tmp_path / "bundle")
    return data, node_facts(read_bundle(bundle))


def _codes(findings: list[Finding], *codes: FindingCode) -> list[Finding]:
    return [f for f in findings if f.code in codes]


def test_standin_fail_and_health_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, node = _run(
        tmp_path,
        monkeypatch,
        2,
        FLEETDX_DCGMI_DIAG=str(FIX / "diag_r2_4.4.1_pcie_fail_dcgm_issue254.txt"),
        FLEETDX_DCGMI_RC="1",  # a non-zero exit: the output is still read (the stand-in's choice, not DCGM's)
        FLEETDX_DCGMI_HEALTH=str(FIX / "health_c_reconstructed_from_dcgm_healthtests.txt"),
    )
    probe = next(p for p in node.probes if p.name == "dcgmi_diag_-r2_-j.json")
    assert probe.argv == ["dcgmi", "diag", "-r", "2", "-j"]
    findings = diagnose(Fleet(nodes=[node])).findings
    (diag,) = _codes(findings, FindingCode.DCGM_DIAG_FAILED)
    assert (diag.severity, diag.subject, diag.details["category"]) == (Severity.CRITICAL, "pcie", "Integration")
    assert "non-zero status 1" in diag.message
    (health,) = _codes(findings, FindingCode.DCGM_HEALTH)
    assert health.severity is Severity.CRITICAL
    assert "GPU 1 Memory system: Failure" in health.message


def test_standin_json_pass_gives_no_dcgm_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, node = _run(
        tmp_path,
        monkeypatch,
        1,
        FLEETDX_DCGMI_DIAG=str(FIX / "diag_j_3.1.0_dcgm_jsonresult_test.json"),
        FLEETDX_DCGMI_HEALTH=str(FIX / "health_c_healthy_reconstructed.txt"),
    )
    assert len(node.dcgm_diag) == 1 and len(node.dcgm_health) == 1
    findings = diagnose(Fleet(nodes=[node])).findings
    assert _codes(findings, FindingCode.DCGM_DIAG_FAILED, FindingCode.DCGM_HEALTH, FindingCode.PROBE_FAILED) == []


def test_standin_diag_that_could_not_run_is_not_a_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plugins missing (issue #254's second output) and health watches not set: two warnings, no pass."""
    _, node = _run(
        tmp_path,
        monkeypatch,
        3,
        FLEETDX_DCGMI_DIAG=str(FIX / "diag_r3_4.4.1_plugin_error_dcgm_issue254.txt"),
        FLEETDX_DCGMI_RC="226",
    )
    findings = diagnose(Fleet(nodes=[node])).findings
    (diag,) = _codes(findings, FindingCode.DCGM_DIAG_FAILED)
    assert diag.severity is Severity.WARNING and "did not run" in diag.message and "Cannot load plugins" in str(
        diag.details["errors"]
    )
    (health,) = _codes(findings, FindingCode.DCGM_HEALTH)
    assert health.severity is Severity.WARNING and "Health watches not enabled" in health.message


def test_hung_dcgmi_is_cut_by_the_deadline_and_its_output_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(catalog.DCGM_DIAG_TIMEOUT_S, 1, 2.0)
    data, node = _run(
        tmp_path,
        monkeypatch,
        1,
        FLEETDX_DCGMI_DIAG=str(FIX / "diag_r2_4.4.2_pass_dcgm_issue124.txt"),
        FLEETDX_STANDIN_HANG="1",
    )
    meta = next(c for c in data.commands if c.file == "dcgmi_diag_-r1_-j.json")
    assert meta.status is RunStatus.TIMEOUT
    assert meta.duration_s is not None and meta.duration_s < 60  # cut by the deadline, not the 3600 s sleep
    raw = (tmp_path / "bundle" / "dcgmi_diag_-r1_-j.json").read_text()
    assert raw.startswith("Successfully ran diagnostic for group.")  # the partial output is kept
    findings = diagnose(Fleet(nodes=[node])).findings
    (timeout,) = _codes(findings, FindingCode.PROBE_TIMEOUT)
    assert timeout.subject == "dcgmi_diag_-r1_-j.json"
    # the partial table holds no result: a parse failure, never a pass
    assert node.dcgm_diag == []
    assert [f.subject for f in _codes(findings, FindingCode.PARSE_FAILED)] == ["dcgmi_diag_-r1_-j.json"]


def test_without_dcgmi_the_probe_is_skipped_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "nobin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    data = collect(_OnlyDcgmi(), Level.QUICK, "cpu-node", sysfs_root=None, dcgm_level=1)
    metas = {c.file: c for c in data.commands if c.file.startswith("dcgmi")}
    assert set(metas) == {"dcgmi_diag_-r1_-j.json", DCGM_HEALTH_FILE}
    assert all(m.status is RunStatus.SKIPPED and "dcgmi: not found on PATH" in (m.reason or "") for m in metas.values())
    node = node_facts(data)
    findings = diagnose(Fleet(nodes=[node])).findings
    assert _codes(findings, FindingCode.DCGM_DIAG_FAILED, FindingCode.DCGM_HEALTH) == []
    assert not any(f.subject.startswith("dcgmi") for f in findings)


def test_dcgm_levels() -> None:
    assert [s.argv for s in dcgm_probes(3)] == [("dcgmi", "diag", "-r", "3", "-j"), ("dcgmi", "health", "-c")]
    assert dcgm_probes(3)[0].timeout_s > dcgm_probes(1)[0].timeout_s
    with pytest.raises(ValueError, match="run level"):
        dcgm_probes(4)
    with pytest.raises(ValueError, match="run level"):
        collect(_OnlyDcgmi(), Level.QUICK, "x", sysfs_root=None, dcgm_level=0)


def test_the_retest_path_runs_dcgm_through_the_local_preflight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NodeJob.dcgm_level: the in-process pre-flight (the periodic check's retest) runs the stand-in dcgmi and
    its report carries DCGM_DIAG_FAILED; a NodeJob without it runs no dcgmi (the prolog)."""
    from fleetdx.orchestrator.preflight.run import NodeJob, run_local_preflight

    monkeypatch.setenv("PATH", f"{STANDIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FLEETDX_DCGMI_DIAG", str(FIX / "diag_r2_4.4.1_pcie_fail_dcgm_issue254.txt"))
    monkeypatch.setenv("FLEETDX_DCGMI_HEALTH", str(FIX / "health_c_healthy_reconstructed.txt"))
    host = "retest-node"
    result = run_local_preflight(NodeJob(host=host, level=Level.QUICK, dcgm_level=1), run_timeout_s=120)
    assert "dcgmi_diag_-r1_-j.json" in result.bundles[host].files
    (diag,) = [f for f in result.report.findings if f.code is FindingCode.DCGM_DIAG_FAILED]
    assert diag.severity is Severity.CRITICAL and diag.nodes == [host]
    prolog = run_local_preflight(NodeJob(host=host, level=Level.QUICK), run_timeout_s=120)
    assert not any(c.file.startswith("dcgmi") for c in prolog.bundles[host].commands)


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_dcgm_diag, "|-----  Deployment  --------+----|\n| pcie |" + " " * 100_000 + "x\n"),
        (parse_dcgm_health, "| Overall Health |" + " " * 100_000 + "x\n"),
    ],
)
def test_hostile_long_rows_take_linear_time(parse: Callable[[str], object], text: str) -> None:
    """A 100 KB row that once made the row pattern backtrack quadratically (minutes): now skipped in
    milliseconds of CPU (the bound, 5 CPU seconds, is far from both)."""
    t0 = time.process_time()
    try:
        parse(text)
    except ParseError:
        pass
    assert time.process_time() - t0 < 5.0


def test_health_severity_follows_dcgm_result() -> None:
    """Warning -> warning, Failure -> critical, an unnamed result ("Internal error") -> warning, Healthy -> none."""
    from fleetdx.probes.catalog import NamedDcgmHealth
    from fleetdx.probes.parsers.dcgm import DcgmHealth

    def sev(word: str) -> list[Severity]:
        text = f"| Overall Health            | {word:<56} |\n"
        node = NodeFacts(host="n", dcgm_health=[NamedDcgmHealth(file=DCGM_HEALTH_FILE, health=parse_dcgm_health(text))])
        return [f.severity for f in diagnose(Fleet(nodes=[node])).findings if f.code is FindingCode.DCGM_HEALTH]

    assert sev("Warning") == [Severity.WARNING]
    assert sev("Failure") == [Severity.CRITICAL]
    assert sev("Bogus") == [Severity.WARNING]
    assert sev("Healthy") == []
    assert isinstance(parse_dcgm_health("| Overall Health | Healthy |\n"), DcgmHealth)
