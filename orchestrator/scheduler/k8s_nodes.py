"""fleetdx's verdict on Kubernetes nodes: a label, a node condition and, opt-in, a ``NoSchedule`` taint.

What is written on each node a report names (through the official ``kubernetes`` client, CoreV1 API):

* label ``fleetdx.io/verdict`` = ``OK`` | ``WARNING`` | ``CRITICAL`` | ``UNKNOWN`` (for node selectors and
  affinity: ``NotIn [CRITICAL]``), and ``fleetdx.io/run`` = the run id it came from;
* node condition ``FleetdxCritical`` in the node-problem-detector convention (a condition names a problem;
  ``True`` means it is present): ``True`` for a CRITICAL verdict, ``False`` for OK or WARNING, ``Unknown`` for
  UNKNOWN; ``reason`` is the first critical finding's code in UpperCamelCase (``GpuForeignProcess``), as
  Kubernetes API conventions ask of reasons; ``message`` lists the findings (at most 1,000 characters);
  ``lastTransitionTime`` changes only when the status does (kubernetes.io/docs/reference/node/node-status);
* with ``taint_critical``: taint ``fleetdx.io/critical=<CODE>:NoSchedule`` on a CRITICAL node, removed from a
  node that is no longer CRITICAL. Only fleetdx's own taint is touched: every other taint is kept.

Labels go in a strategic-merge patch of the node; the condition in a strategic-merge patch of its ``status``
subresource (conditions merge by ``type``, so the kubelet's own conditions are untouched); the taint list has no
merge key, so it is read, changed and written back whole with the node's ``resourceVersion`` (a concurrent
change makes the write fail with 409 rather than lose the other writer's taint).

RBAC: ``get`` and ``patch`` on ``nodes`` and ``patch`` on ``nodes/status`` (k8s/fleetdx-node-writer-rbac.yaml).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from fleetdx.orchestrator.judgement import Finding, sort_findings
from fleetdx.orchestrator.report import RunReport
from fleetdx.probes.contracts import Contract, Severity, Verdict

LABEL_VERDICT = "fleetdx.io/verdict"
LABEL_RUN = "fleetdx.io/run"
CONDITION_TYPE = "FleetdxCritical"
TAINT_KEY = "fleetdx.io/critical"
#: Kubernetes caps a label value at 63 characters
_LABEL_MAX = 63
_MESSAGE_MAX = 1000
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class NodeMark(Contract):
    """What fleetdx writes on one Kubernetes node. ``taint`` is the taint's value (the first critical code) to
    set, ``None`` to remove fleetdx's taint, and ``manage_taint`` false when taints are left alone."""

    node: str
    verdict: str
    run_id: str
    condition_status: str  #: "True" | "False" | "Unknown"
    reason: str
    message: str
    manage_taint: bool = False
    taint: str | None = None


class MarkResult(Contract):
    """How writing one node went: ``error`` is ``None`` when every write succeeded."""

    node: str
    verdict: str
    tainted: bool | None = None  #: whether fleetdx's taint is on the node now (None: taints not managed)
    error: str | None = None


def _camel(code: str) -> str:
    return "".join(w.capitalize() for w in code.split("_"))


def _summary(findings: Sequence[Finding]) -> str:
    text = "; ".join(f"{f.severity.value} {f.code.value} {f.subject}: {f.message}" for f in findings)
    return text if len(text) <= _MESSAGE_MAX else text[: _MESSAGE_MAX - 3] + "..."


def marks_of(report: RunReport, taint_critical: bool = False) -> list[NodeMark]:
    """One :class:`NodeMark` per node of ``report``; a node's findings are those that name it (alone or in a
    group). Pure."""
    status = {Verdict.CRITICAL: "True", Verdict.OK: "False", Verdict.WARNING: "False", Verdict.UNKNOWN: "Unknown"}
    marks = []
    for node in report.nodes:
        mine = sort_findings(f for f in report.findings if node.host in f.nodes)
        critical = [f for f in mine if f.severity is Severity.CRITICAL]
        if critical:
            reason = _camel(critical[0].code.value)
        elif node.verdict is Verdict.UNKNOWN:
            reason = "NotJudged"
        else:
            reason = "NoCriticalFinding"
        message = _summary(mine) or node.unjudged or "no findings"
        marks.append(
            NodeMark(
                node=node.host,
                verdict=node.verdict.name,
                run_id=report.run_id[:_LABEL_MAX],
                condition_status=status[node.verdict],
                reason=reason,
                message=message,
                manage_taint=taint_critical,
                taint=critical[0].code.value[:_LABEL_MAX] if critical and taint_critical else None,
            )
        )
    return marks


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(mark: NodeMark, current: Any) -> dict[str, str]:
    """The condition to write; its transition time is kept when the status does not change."""
    now = _now()
    transition = now
    for c in getattr(getattr(current, "status", None), "conditions", None) or []:
        if c.type == CONDITION_TYPE and c.status == mark.condition_status and c.last_transition_time:
            t = c.last_transition_time
            transition = t.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(t, datetime) else str(t)
    return {
        "type": CONDITION_TYPE,
        "status": mark.condition_status,
        "reason": mark.reason,
        "message": mark.message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": transition,
    }


def _taints(mark: NodeMark, current: Any) -> list[dict[str, Any]] | None:
    """The node's whole taint list after the change, or ``None`` when nothing changes."""
    existing = getattr(getattr(current, "spec", None), "taints", None) or []
    others = [
        {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v is not None}
        for t in existing
        if t.key != TAINT_KEY
    ]
    ours = [t for t in existing if t.key == TAINT_KEY]
    if mark.taint is None:
        return others if ours else None
    if len(ours) == 1 and ours[0].value == mark.taint and ours[0].effect == "NoSchedule":
        return None
    return [*others, {"key": TAINT_KEY, "value": mark.taint, "effect": "NoSchedule"}]


def apply_marks(marks: Sequence[NodeMark], api: Any) -> list[MarkResult]:
    """Write each mark through ``api`` (a ``kubernetes.client.CoreV1Api``). A node that fails (absent, no
    permission, a conflict) gets its error in its result; the other nodes are still written. Never raises for
    an API error."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    results = []
    for mark in marks:
        try:
            current = api.read_node(mark.node)
            meta: dict[str, Any] = {"labels": {LABEL_VERDICT: mark.verdict, LABEL_RUN: mark.run_id}}
            body: dict[str, Any] = {"metadata": meta}
            tainted: bool | None = None
            if mark.manage_taint:
                taints = _taints(mark, current)
                if taints is not None:
                    meta["resourceVersion"] = current.metadata.resource_version
                    body["spec"] = {"taints": taints}
                tainted = mark.taint is not None
            api.patch_node(mark.node, body, _content_type=STRATEGIC_MERGE)
            status = {"status": {"conditions": [_condition(mark, current)]}}
            api.patch_node_status(mark.node, status, _content_type=STRATEGIC_MERGE)
            results.append(MarkResult(node=mark.node, verdict=mark.verdict, tainted=tainted))
        except ApiException as e:
            why = f"HTTP {e.status} {e.reason}".strip()
            results.append(MarkResult(node=mark.node, verdict=mark.verdict, error=why))
        except (HTTPError, OSError) as e:  # the API server cannot be reached (urllib3 retries exhausted)
            results.append(MarkResult(node=mark.node, verdict=mark.verdict, error=f"{type(e).__name__}: {e}"))
    return results


def core_api(kubeconfig: str | None = None, in_cluster: bool = False, host: str | None = None) -> Any:
    """A ``CoreV1Api``: in-cluster service-account credentials, else ``kubeconfig`` (default
    ``$KUBECONFIG`` / ``~/.kube/config``); ``host`` overrides the API server address.

    Raises:
        kubernetes.config.ConfigException: no usable configuration.
    """
    from kubernetes import client, config

    if in_cluster:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        cfg = client.Configuration.get_default_copy()
    elif host is not None and kubeconfig is None:
        cfg = client.Configuration()
    else:
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    if host is not None:
        cfg.host = host
    cfg.retries = 1
    return client.CoreV1Api(client.ApiClient(cfg))
