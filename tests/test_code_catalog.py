"""The judgement model (issue 19): one code catalog as data, one finding shape, one report envelope.

The catalog's own honesty is checked in two more places: tests/conftest.py fails any test that makes a finding
at a severity its catalog row does not list, and fails a run of the whole suite when a row was never emitted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleetdx.orchestrator.judgement import Finding, FindingCode, Scope
from fleetdx.orchestrator.judgement.catalog import (
    JobKind,
    Placement,
    catalog,
    gpu_excluding,
    group_only_codes,
    markdown,
    node_unfit_codes,
    spec,
)
from fleetdx.orchestrator.judgement.envelope import FINDING_KEYS, judge
from fleetdx.orchestrator.placement.health import GPU_EXCLUDING
from fleetdx.orchestrator.placement.policy import NODE_UNFIT_CODES
from fleetdx.probes.contracts import Severity, Verdict

ROOT = Path(__file__).resolve().parent.parent


def test_every_code_has_one_row_with_its_source_and_action() -> None:
    rows = catalog().codes
    assert [r.code for r in rows] == list(FindingCode)
    for r in rows:
        assert r.severity in r.severities and r.description and r.action and r.source, r.code


def test_the_readme_tables_are_the_catalog() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    begin = readme.index("<!-- codes:begin")
    body = readme[readme.index("\n", begin) + 1 : readme.index("<!-- codes:end -->")]
    assert body == markdown(), "README's codes table is stale: paste `fleetdx codes --markdown` between the markers"
    for code in FindingCode:  # and nowhere else in the README is a code left undocumented
        assert f"`{code.value}`" in body


def test_placement_reads_the_catalog() -> None:
    assert NODE_UNFIT_CODES == node_unfit_codes()
    assert GPU_EXCLUDING == gpu_excluding()
    assert group_only_codes() == {FindingCode.NCCL_BUSBW_LOW}
    assert spec(FindingCode.GPU_XID).placement is Placement.EXCLUDE_GPU
    assert GPU_EXCLUDING[FindingCode.GPU_XID] == frozenset({Severity.CRITICAL})
    assert GPU_EXCLUDING[FindingCode.GPU_FOREIGN_PROCESS] is None  # every severity


def test_a_finding_takes_scope_and_action_from_its_row_unless_given() -> None:
    f = Finding(code=FindingCode.IB_PORT_DOWN, severity=Severity.CRITICAL, nodes=["n1"], message="m")
    assert f.scope is Scope.NIC and f.action == spec(FindingCode.IB_PORT_DOWN).action
    g = Finding(code=FindingCode.IB_PORT_DOWN, severity=Severity.CRITICAL, scope="node", action="mine", message="m")
    assert g.scope is Scope.NODE and g.action == "mine"
    # a version-2 finding (figures in evidence, one node) upgrades
    old = Finding.model_validate(
        {"code": "GPU_XID", "severity": "critical", "node": "n1", "subject": "GPU0", "message": "m",
         "evidence": {"xid": 79}}
    )
    assert old.nodes == ["n1"] and old.details == {"xid": 79} and old.evidence == []
    with pytest.raises(ValueError):
        Finding.model_validate({"code": "NO_SUCH_CODE", "severity": "critical", "message": "m"})


def test_judge_is_the_one_verdict() -> None:
    crit = Finding(code=FindingCode.GPU_LOST, severity=Severity.CRITICAL, nodes=["a"], message="m")
    pair = Finding(code=FindingCode.NCCL_BUSBW_LOW, severity=Severity.CRITICAL, nodes=["b", "c"], message="m")
    j = judge([crit, pair], hosts=["a", "b", "c", "d"], unjudged={"d": "no GPU inventory"})
    assert j.node_verdicts == {"a": Verdict.CRITICAL, "b": Verdict.OK, "c": Verdict.OK, "d": Verdict.UNKNOWN}
    assert j.verdict is Verdict.CRITICAL and j.exit_code == 2 and j.exclude == "a"
    assert judge([]).verdict is Verdict.OK
    assert judge([], floor=[Verdict.UNKNOWN]).exit_code == 3


def _json(*args: str) -> tuple[int, dict[str, object]]:
    r = subprocess.run([sys.executable, "-m", "fleetdx.orchestrator.cli.main", *args], capture_output=True, text=True)
    assert r.stdout.strip(), f"fleetdx {' '.join(args)}: exit {r.returncode}, no JSON; stderr: {r.stderr[-2000:]}"
    return r.returncode, json.loads(r.stdout)


def test_codes_json_lists_every_code() -> None:
    rc, doc = _json("codes", "--json")
    assert rc == 0 and doc["schema_version"] == 3
    assert [c["code"] for c in doc["codes"]] == [c.value for c in FindingCode]  # type: ignore[union-attr,index]
    rc, doc = _json("codes", "--json", "--kind", "steps")
    assert {c["job"] for c in doc["codes"]} == {JobKind.STEPS.value}  # type: ignore[union-attr,index]


def test_every_job_json_has_the_envelope_and_one_finding_shape(tmp_path: Path) -> None:
    """analyze, postmortem and steps: schema_version, verdict, exit_code, findings; one key set per finding."""
    fx = ROOT / "tests" / "fixtures"
    envelope = {"schema_version", "kind", "verdict", "exit_code", "job", "findings", "missing_evidence"}
    log22 = fx / "joblogs" / "22_nccl-ib-local-catastrophic-error_mpirun-timestamp-rank-stdout-prefix.log"
    db = f"sqlite:///{tmp_path}/fleetdx.db"
    docs = {
        "analyze": _json("analyze", str(fx / "bundles" / "h100-lent-busy"), "--json"),
        "postmortem": _json("postmortem", "--logs", str(log22), "--json", "--db", db),
        "steps": _json("steps", str(fx / "traces" / "cpu-gloo-slow-data-rank2"), "--json", "-j", "1"),
    }
    for kind, (rc, doc) in docs.items():
        assert envelope <= set(doc), kind
        assert doc["kind"] == kind and doc["schema_version"] == 3 and rc == doc["exit_code"], kind
        findings = doc["findings"]
        assert isinstance(findings, list) and findings, kind
        for f in findings:
            assert set(f) == FINDING_KEYS, kind
            FindingCode(f["code"])  # every code emitted is in the catalog
