"""How a stored run moves its nodes' states, inside the transaction that stores it (the store's write path:
:meth:`~fleetdx.orchestrator.store.Store.save_report` and ``save_reports``), and how any event is applied:
read the node's row, :func:`~fleetdx.orchestrator.diagnosis.node_states.step`, write the new row and the
transition; a node newly quarantined sends a ``node.quarantined`` webhook event once the transaction commits.
The reads and events of the rest of fleetdx are in :mod:`fleetdx.orchestrator.store.states`.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetdx.orchestrator.diagnosis.node_states import (
    CheckEvent,
    Event,
    NodeState,
    NodeStatus,
    StepResult,
    Transition,
    step,
)
from fleetdx.orchestrator.report import RunKind, RunReport
from fleetdx.orchestrator.store.models import NodeStateRow, NodeTransitionRow
from fleetdx.probes.contracts import Severity, Verdict


def _status_of(row: NodeStateRow) -> NodeStatus:
    return NodeStatus(
        host=row.host,
        state=row.state,
        since=row.since,
        reason=row.reason,
        by=row.by,
        run_id=row.run_id,
        code=row.code,
        level=row.level,
        held=row.held,
        returned_at=row.returned_at,
    )


def _cause(report: RunReport, host: str, verdict: Verdict, unjudged: str | None) -> tuple[str | None, str | None]:
    """The first finding naming ``host`` at the node's verdict's severity, as ``"CODE subject"``, and its code;
    for a node with no verdict, why (``NodeReport.unjudged``) when no UNKNOWN finding says it."""
    want = {Verdict.CRITICAL: Severity.CRITICAL, Verdict.UNKNOWN: Severity.UNKNOWN}.get(verdict)
    for f in report.findings:
        if want is not None and f.severity is want and host in f.nodes:
            subject = f.subject if f.subject not in ("", "node") else ""
            return f"{f.code.value} {subject}".strip(), f.code.value
    if verdict is Verdict.UNKNOWN:
        return f"no verdict: {unjudged}" if unjudged else "no verdict", None
    return None, None


def apply(session: Session, host: str, event: Event, flap_window_s: float) -> StepResult:
    """Move ``host`` by ``event`` inside ``session``'s transaction: read its state (locked on PostgreSQL),
    :func:`step`, write the new state and the transition. Returns what :func:`step` decided."""
    row = session.scalars(select(NodeStateRow).where(NodeStateRow.host == host).with_for_update()).one_or_none()
    result = step(None if row is None else _status_of(row), host, event, flap_window_s=flap_window_s)
    t, new = result.transition, result.status
    if t is None or new is None:
        return result
    values = new.model_dump(exclude={"host"})
    if row is None:
        session.add(NodeStateRow(host=host, **values))
    else:
        for key, value in values.items():
            setattr(row, key, value)
    session.add(NodeTransitionRow(**t.model_dump()))
    if t.to_state is NodeState.QUARANTINED and t.from_state is not NodeState.QUARANTINED:
        _notify_after_commit(session, t, new)
    return result


def _notify_after_commit(session: Session, t: Transition, status: NodeStatus) -> None:
    """Send a ``node.quarantined`` webhook event (:mod:`fleetdx.orchestrator.notify`) once the transaction that
    quarantines the node commits: never for a transaction rolled back, once for a write that was retried."""
    from sqlalchemy import event as sa_event

    from fleetdx.orchestrator.notify import Event, EventKind, notify

    pending = session.info.setdefault("fleetdx_notify", [])
    if not pending:

        @sa_event.listens_for(session, "after_commit", once=True)
        def _send(committed: Session) -> None:
            for e in committed.info.pop("fleetdx_notify", []):
                notify(e)

    pending.append(
        Event(
            kind=EventKind.NODE_QUARANTINED,
            summary=f"{t.host} quarantined by {t.by.value}: {t.reason}",
            hosts=[t.host],
            codes=[status.code] if status.code else [],
            run_id=t.run_id,
            time=t.at,
            details={"from_state": t.from_state.value if t.from_state else None, "held": status.held},
        )
    )


def apply_run(session: Session, report: RunReport, flap_window_s: float) -> None:
    """Move every node of a stored pre-flight by its verdict (nothing for another kind, or a simulated run)."""
    if report.kind is not RunKind.PREFLIGHT or report.simulated:
        return
    for node in report.nodes:
        cause, code = _cause(report, node.host, node.verdict, node.unjudged)
        event = CheckEvent(
            at=report.finished_at,
            run_id=report.run_id,
            verdict=node.verdict,
            level=report.level,
            cause=cause,
            code=code,
        )
        apply(session, node.host, event, flap_window_s)
