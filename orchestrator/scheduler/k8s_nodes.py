"""fleetdx's verdict on Kubernetes nodes: a label, a node condition and, opt-in, a ``NoSchedule`` taint.

What is written on each node a report names (through the official ``kubernetes`` client, CoreV1 API):

* label ``fleetdx.io/verdict`` = ``OK`` | ``WARNING`` | ``CRITICAL`` | ``UNKNOWN`` (for node selectors and
  affinity: ``NotIn [CRITICAL]``), and ``fleetdx.io/run`` = the run id it came from;
* node condition ``FleetdxCritical`` in the node-problem-detector convention (a condition names a problem;
  ``True`` means it is present): ``True`` for a CRITICAL verdict, ``False`` for OK or WARNING, ``Unknown`` for
  UNKNOWN; ``reason`` is the first critical finding's code in UpperCamelCase (``GpuForeignProcess``), as
  Kubernetes API conventions ask of reasons; ``message`` lists the findings (at most 1,000 characters);
  ``lastTransitionTime`` changes only when the status does (kubernetes.io/docs/reference/node/node-status);
* with ``taint_critical``: taint ``fleetdx.io/critical=<CODE>:NoSchedule`` on a CRITICAL node, removed after a
  clean retest (a judged OK or WARNING verdict) at the level that put it or a higher one (quick < standard <
  full: a retest must include the check that failed). fleetdx records each taint it puts in two annotations,
  ``fleetdx.io/taint-code`` (the taint's value) and ``fleetdx.io/taint-level``, written in the same patch, and
  removes only a taint that they match: a ``fleetdx.io/critical`` taint put by someone else (an administrator
  holding a node out under fleetdx's key) is never changed or removed, nor is any other taint. An UNKNOWN
  verdict (the node could not be judged) leaves taints as they are. The same rule as Slurm's NHC, which undoes
  only the drains it made.
* flap damping, as :mod:`fleetdx.orchestrator.diagnosis.node_states` does for the store's node states: when
  fleetdx removes its taint it writes the time in ``fleetdx.io/returned-at``; a node found CRITICAL again within
  the flap window of that return (24 h, ``FLEETDX_FLAP_WINDOW_S``) is tainted with ``fleetdx.io/taint-held``
  saying why, and no clean retest removes that taint: a person returns the node (``kubectl taint nodes NODE
  fleetdx.io/critical-``), so a flapping node is not cycled in and out of service.

Labels go in a strategic-merge patch of the node; the condition in a strategic-merge patch of its ``status``
subresource (conditions merge by ``type``, so the kubelet's own conditions are untouched); the taint list has no
merge key, so it is read, changed and written back whole with the node's ``resourceVersion`` (a concurrent
change makes the write fail with 409 rather than lose the other writer's taint).

:func:`watch` repeats a check and the marking at an interval: what ``fleetdx k8s watch`` runs in the DaemonSet of
k8s/healthcheck-daemonset.yaml.

RBAC: ``get`` and ``patch`` on ``nodes`` and ``patch`` on ``nodes/status`` (k8s/node-writer-rbac.yaml; the
DaemonSet of k8s/healthcheck-daemonset.yaml is also held to its own node by the admission policy of
k8s/healthcheck-rbac.yaml).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from fleetdx.orchestrator.diagnosis.node_states import DEFAULT_FLAP_WINDOW_S
from fleetdx.orchestrator.judgement import Finding, sort_findings
from fleetdx.orchestrator.report import RunReport
from fleetdx.probes.contracts import Contract, Severity, Verdict

LABEL_VERDICT = "fleetdx.io/verdict"
LABEL_RUN = "fleetdx.io/run"
CONDITION_TYPE = "FleetdxCritical"
TAINT_KEY = "fleetdx.io/critical"
#: the value of the taint fleetdx put, and the level of the run that put it: fleetdx's proof of ownership
ANNOTATION_TAINT_CODE = "fleetdx.io/taint-code"
ANNOTATION_TAINT_LEVEL = "fleetdx.io/taint-level"
#: Unix time (s) fleetdx last removed its taint; why a taint put again within the flap window is held
ANNOTATION_RETURNED_AT = "fleetdx.io/returned-at"
ANNOTATION_HELD = "fleetdx.io/taint-held"
_OURS = (ANNOTATION_TAINT_CODE, ANNOTATION_TAINT_LEVEL, ANNOTATION_HELD)
#: a retest at a level removes a taint put at that level or a lower one
_LEVEL_RANK = {"quick": 0, "standard": 1, "full": 2}
#: Kubernetes caps a label value at 63 characters
_LABEL_MAX = 63
_MESSAGE_MAX = 1000
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class NodeMark(Contract):
    """What fleetdx writes on one Kubernetes node. ``taint`` is the taint's value (the first critical code) to
    set, ``None`` to remove fleetdx's own taint, and ``manage_taint`` false when taints are left alone (not
    asked for, or an UNKNOWN verdict); ``level`` is the run's level (``quick`` | ``standard`` | ``full``; empty
    for a report without one), which a removal must reach; ``at`` the check's Unix time (s) and
    ``flap_window_s`` the flap window (s) of the module doc."""

    node: str
    verdict: str
    run_id: str
    condition_status: str  #: "True" | "False" | "Unknown"
    reason: str
    message: str
    manage_taint: bool = False
    taint: str | None = None
    level: str = ""
    at: float = 0.0
    flap_window_s: float = DEFAULT_FLAP_WINDOW_S


class MarkResult(Contract):
    """How writing one node went: ``error`` is ``None`` when every write succeeded; ``note`` says why a
    ``fleetdx.io/critical`` taint was kept (put by someone else, by a run of a higher level, or held by flap
    damping)."""

    node: str
    verdict: str
    tainted: bool | None = None  #: whether a fleetdx.io/critical taint is on the node now (None: not managed)
    error: str | None = None
    note: str | None = None


def _camel(code: str) -> str:
    return "".join(w.capitalize() for w in code.split("_"))


def _summary(findings: Sequence[Finding]) -> str:
    text = "; ".join(f"{f.severity.value} {f.code.value} {f.subject}: {f.message}" for f in findings)
    return text if len(text) <= _MESSAGE_MAX else text[: _MESSAGE_MAX - 3] + "..."


def marks_of(
    report: RunReport, taint_critical: bool = False, flap_window_s: float = DEFAULT_FLAP_WINDOW_S
) -> list[NodeMark]:
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
                manage_taint=taint_critical and node.verdict is not Verdict.UNKNOWN,
                taint=critical[0].code.value[:_LABEL_MAX] if critical and taint_critical else None,
                level=report.level.value if report.level is not None else "",
                at=report.finished_at,
                flap_window_s=flap_window_s,
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


class TaintChange(Contract):
    """What happens to a node's taints: ``taints`` is the whole new list (``None``: unchanged), ``annotations``
    the fleetdx.io/taint-* annotations to set (a ``None`` value deletes one), ``tainted`` whether a
    ``fleetdx.io/critical`` taint is on the node afterwards, ``note`` why one was kept."""

    taints: list[dict[str, str]] | None = None
    annotations: dict[str, str | None] = {}
    tainted: bool
    note: str | None = None


def _taints(mark: NodeMark, current: Any) -> TaintChange:
    """The change to ``current``'s taints that ``mark`` asks for, touching only a taint that fleetdx's
    annotations say it put (module doc)."""
    existing = getattr(getattr(current, "spec", None), "taints", None) or []
    annotations = getattr(getattr(current, "metadata", None), "annotations", None) or {}
    others = [
        {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v is not None}
        for t in existing
        if t.key != TAINT_KEY
    ]
    ours = [t for t in existing if t.key == TAINT_KEY]
    owned_code = annotations.get(ANNOTATION_TAINT_CODE)
    owned = len(ours) == 1 and ours[0].effect == "NoSchedule" and ours[0].value == owned_code
    # annotations left behind by a taint someone else removed or replaced are dropped
    forget: dict[str, str | None] = {k: None for k in _OURS if k in annotations}
    if ours and not owned:
        note = f"kept the {TAINT_KEY} taint: not put by fleetdx (no matching {ANNOTATION_TAINT_CODE} annotation)"
        return TaintChange(annotations=forget, tainted=True, note=note)
    if mark.taint is not None:
        if owned and ours[0].value == mark.taint:
            return TaintChange(tainted=True)
        return _put(mark, others, annotations)
    if not owned:
        return TaintChange(annotations=forget, tainted=False)
    return _lift(mark, others, annotations, forget)


def _put(mark: NodeMark, others: list[dict[str, str]], annotations: dict[str, str]) -> TaintChange:
    """fleetdx's taint put on the node, held when the node was returned within the flap window."""
    assert mark.taint is not None
    put: dict[str, str | None] = {ANNOTATION_TAINT_CODE: mark.taint, ANNOTATION_TAINT_LEVEL: mark.level}
    try:
        since_return = mark.at - float(annotations.get(ANNOTATION_RETURNED_AT, "nan"))
    except ValueError:  # not a number: no return fleetdx knows of
        since_return = float("nan")
    if 0 <= since_return < mark.flap_window_s:
        put[ANNOTATION_HELD] = (
            f"CRITICAL again {since_return:.0f} s after fleetdx returned it (flap window {mark.flap_window_s:.0f} s)"
        )
    taints = [*others, {"key": TAINT_KEY, "value": mark.taint, "effect": "NoSchedule"}]
    return TaintChange(taints=taints, annotations=put, tainted=True)


def _lift(
    mark: NodeMark, others: list[dict[str, str]], annotations: dict[str, str], forget: dict[str, str | None]
) -> TaintChange:
    """fleetdx's own taint after a clean check: removed, unless put at a higher level or held."""
    put_at = annotations.get(ANNOTATION_TAINT_LEVEL) or "quick"
    if _LEVEL_RANK.get(mark.level, -1) < _LEVEL_RANK.get(put_at, len(_LEVEL_RANK)):
        note = f"kept fleetdx's {TAINT_KEY} taint: put at level {put_at}, retested at {mark.level or 'no level'}"
        return TaintChange(tainted=True, note=note)
    held = annotations.get(ANNOTATION_HELD)
    if held:
        back = f"kubectl taint nodes {mark.node} {TAINT_KEY}-"
        note = f"kept fleetdx's {TAINT_KEY} taint, held: {held}; a person returns the node: {back}"
        return TaintChange(tainted=True, note=note)
    return TaintChange(taints=others, annotations={**forget, ANNOTATION_RETURNED_AT: f"{mark.at:.0f}"}, tainted=False)


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
            change = _taints(mark, current) if mark.manage_taint else None
            if change is not None:
                if change.taints is not None:
                    meta["resourceVersion"] = current.metadata.resource_version
                    body["spec"] = {"taints": change.taints}
                if change.annotations:
                    meta["annotations"] = change.annotations
            api.patch_node(mark.node, body, _content_type=STRATEGIC_MERGE)
            status = {"status": {"conditions": [_condition(mark, current)]}}
            api.patch_node_status(mark.node, status, _content_type=STRATEGIC_MERGE)
            results.append(
                MarkResult(
                    node=mark.node,
                    verdict=mark.verdict,
                    tainted=None if change is None else change.tainted,
                    note=None if change is None else change.note,
                )
            )
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


class WatchRound(Contract):
    """One round of :func:`watch`: the check's run id and verdict and each node's :class:`MarkResult`, or
    ``error`` when the check itself raised (then nothing was written)."""

    started_at: float  #: Unix time, s
    run_id: str | None = None
    verdict: str | None = None
    results: list[MarkResult] = []
    error: str | None = None


def watch(
    check: Callable[[], RunReport],
    mark: Callable[[RunReport], list[MarkResult]],
    *,
    interval_s: float,
    rounds: int | None = None,
    on_round: Callable[[WatchRound], None] = lambda r: None,
) -> list[WatchRound]:
    """Run ``check`` and ``mark`` its report every ``interval_s`` seconds, ``rounds`` times (``None``: until the
    process is stopped), calling ``on_round`` after each. ``mark`` is typically ``lambda r:
    apply_marks(marks_of(r, taint_critical), api)``. A check that raises is reported in its round and tried
    again at the next; an API error is in the node's result. The interval runs from the start of one round to
    the start of the next (a round longer than it starts the next at once).

    Returns:
        The rounds done (only when ``rounds`` is given; the loop does not keep them otherwise).
    """
    done: list[WatchRound] = []
    n = 0
    while rounds is None or n < rounds:
        started = time.monotonic()
        this = WatchRound(started_at=time.time())
        try:
            report = check()
        except Exception as e:  # noqa: BLE001 - a periodic check must outlive one failed round
            this = this.model_copy(update={"error": f"{type(e).__name__}: {e}"})
        else:
            update = {"run_id": report.run_id, "verdict": report.verdict.name, "results": mark(report)}
            this = this.model_copy(update=update)
        on_round(this)
        if rounds is not None:
            done.append(this)
        n += 1
        if rounds is None or n < rounds:
            time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
    return done
