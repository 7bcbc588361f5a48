"""The alert rules and the Grafana dashboard of k8s/ (issue 23 item 7).

- ``promtool check rules`` and ``promtool test rules`` pass on k8s/alerts/ (Debian's ``prometheus`` package;
  skipped, with the reason, where promtool is not installed);
- k8s/prometheus-rules.yaml, k8s/grafana-dashboard.json and its ConfigMap are what bench/monitoring.py makes of
  the one rules file and the dashboard code (grafana-foundation-sdk), so they cannot drift apart;
- every PromQL expression (rules, annotations, dashboard) names only series that fleetdx's ``GET /metrics``
  exposes, with their label names and values (finding codes from the code catalog, node states, retest
  results): read off a real exposition of the metrics module, not a list kept by hand;
- every alert tells an on-call person what happened and what to do, and points at the README's runbook.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from fleetdx.orchestrator.diagnosis.node_states import NodeState, RetestResult
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.probes.contracts import Severity

ROOT = Path(__file__).resolve().parents[1]
ALERTS = ROOT / "k8s" / "alerts"
RULES = ALERTS / "fleetdx-rules.yml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")


def _monitoring() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_monitoring", ROOT / "bench" / "monitoring.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def _dashboard_exprs() -> list[str]:
    board = json.loads((ROOT / "k8s" / "grafana-dashboard.json").read_text())
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    assert PROMTOOL is not None
    res = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in res.stdout


@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    """Each alert fires on its case at the time its ``for`` allows and not before, nor on the healthy series
    beside it (k8s/alerts/fleetdx-rules.test.yml)."""
    assert PROMTOOL is not None
    res = subprocess.run([PROMTOOL, "test", "rules", "fleetdx-rules.test.yml"], cwd=ALERTS, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    tested = set(re.findall(r"alertname: (\w+)", (ALERTS / "fleetdx-rules.test.yml").read_text()))
    assert tested == {r["alert"] for r in _rules()}, "every alert has a promtool test case"


@needs_promtool
def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    """The dashboard's queries as recording rules: promtool parses each PromQL expression."""
    assert PROMTOOL is not None
    rules = [{"record": f"fleetdx:dashboard_query_{i}", "expr": e} for i, e in enumerate(_dashboard_exprs())]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    res = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


@needs_promtool
def test_promtool_rejects_a_broken_rule(tmp_path: Path) -> None:
    """The checks above can fail: an unbalanced parenthesis is refused."""
    assert PROMTOOL is not None
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [
        {"alert": "Broken", "expr": "max by (node) (fleetdx_node_verdict == 2"}]}]}))
    res = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode != 0


def test_prometheus_rule_carries_the_rules_file() -> None:
    """One source of truth: the PrometheusRule is generated from k8s/alerts/fleetdx-rules.yml."""
    committed = (ROOT / "k8s" / "prometheus-rules.yaml").read_text()
    assert committed == _monitoring().prometheus_rule(RULES.read_text()), "run python bench/monitoring.py"
    doc = yaml.safe_load(committed)
    assert doc["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


#: the fields the PrometheusRule CRD (monitoring.coreos.com/v1, prometheus-operator) defines for a group and a
#: rule; the CRD prunes unknown ones silently, so a misspelt field would be lost without an error
_GROUP_FIELDS = {"name", "interval", "labels", "limit", "partial_response_strategy", "query_offset", "rules"}
_RULE_FIELDS = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}
_DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")


def test_prometheus_rule_fields_are_the_crd_s() -> None:
    doc = yaml.safe_load((ROOT / "k8s" / "prometheus-rules.yaml").read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"} and set(doc["spec"]) == {"groups"}
    for group in doc["spec"]["groups"]:
        assert set(group) <= _GROUP_FIELDS and group["name"]
        for rule in group["rules"]:
            assert set(rule) <= _RULE_FIELDS and "expr" in rule and ("alert" in rule) != ("record" in rule)
            assert _DURATION.match(rule.get("for", "0")), rule["for"]
            assert all(isinstance(v, str) for v in {**rule.get("labels", {}), **rule.get("annotations", {})}.values())


def test_dashboard_files_are_generated() -> None:
    pytest.importorskip("grafana_foundation_sdk", reason="grafana-foundation-sdk not installed (the test extra)")
    for path, text in _monitoring().outputs().items():
        assert path.read_text() == text, f"{path.name} is stale: run python bench/monitoring.py"


def _exposed() -> dict[str, set[str]]:
    """Each series name of a real ``GET /metrics`` exposition with one sample of everything, and its labels."""
    from prometheus_client.parser import text_string_to_metric_families

    from fleetdx.orchestrator.report import RunKind
    from fleetdx.orchestrator.service.metrics import RequestMetrics, exposition
    from fleetdx.orchestrator.store.fleet import FindingCount, FleetState, NodeFindingCount, NodeLatest, NodeStateNow

    state = FleetState(
        nodes=[NodeLatest(host="n1", verdict="CRITICAL", run_id="r", kind=RunKind.PREFLIGHT, finished_at=1.0)],
        last_preflight={"n1": 1.0},
        open_findings=[NodeFindingCount(host="n1", code=FindingCode.GPU_XID, severity=Severity.CRITICAL, count=1)],
        findings=[FindingCount(code=FindingCode.GPU_XID, severity=Severity.CRITICAL, count=1)],
        states=[NodeStateNow(host="n1", state=NodeState.QUARANTINED, since=1.0)],
        retests={RetestResult.FAIL: 1},
    )
    requests = RequestMetrics()
    requests.observe("GET", "/healthz", 200, 0.001)
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(exposition(state, requests).decode()):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


#: the values a label of the fleetdx series can take, from the code that writes them
_LABEL_VALUES = {
    "code": {c.value for c in FindingCode},
    "severity": {s.value for s in Severity},
    "state": {s.value for s in NodeState},
    "result": {r.value for r in RetestResult},
}


def _all_expressions() -> list[str]:
    """Every PromQL text: rule expressions, the queries annotations suggest, the dashboard's."""
    texts = [r["expr"] for r in _rules()] + _dashboard_exprs()
    texts += [v for r in _rules() for v in r["annotations"].values()]
    return texts


def test_every_query_reads_only_series_that_metrics_exposes() -> None:
    exposed = _exposed()
    assert {"fleetdx_node_state", "fleetdx_retests_total", "fleetdx_findings_total"} <= set(exposed)
    for text in _all_expressions():
        for name in re.findall(r"\bfleetdx_\w+", text):
            assert name in exposed, f"{name} is not exposed by GET /metrics: {text}"
        for labels in re.findall(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)", text):
            for label in filter(None, (s.strip() for s in labels.split(","))):
                assert any(label in ls for ls in exposed.values()), (label, text)
        for label, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', text):
            assert any(label in ls for ls in exposed.values()), (label, text)
            if label not in _LABEL_VALUES or "{{" in value:
                continue
            alternatives = value.split("|") if op in ("=~", "!~") else [value]
            for alt in alternatives:
                if re.fullmatch(r"[A-Za-z0-9_]+", alt):
                    assert alt in _LABEL_VALUES[label], f"{label}={alt!r} is never written: {text}"
                else:  # a pattern: it must match some value
                    assert any(re.fullmatch(alt, v) for v in _LABEL_VALUES[label]), (alt, text)


def test_the_series_check_catches_a_wrong_name() -> None:
    exposed = _exposed()
    assert "fleetdx_node_states" not in exposed and "fleetdx_retests" not in exposed  # the _total is there
    assert "fleetdx_node_verdict" in exposed and {"node"} <= exposed["fleetdx_node_verdict"]


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def test_every_alert_is_actionable_and_has_its_runbook() -> None:
    readme = (ROOT / "README.md").read_text()
    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", readme, flags=re.MULTILINE)}
    for rule in _rules():
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook_url"}, rule["alert"]
        assert "{{" in notes["summary"] or rule["labels"]["severity"] == "critical", rule["alert"]
        assert "`fleetdx " in notes["description"], f"{rule['alert']}: say which command shows more"
        page, _, anchor = notes["runbook_url"].partition("#")
        assert page == "README.md" and anchor in anchors, notes["runbook_url"]
        assert rule["alert"] in readme, f"{rule['alert']} is not in the README's runbook"
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
