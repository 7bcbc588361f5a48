"""Node states in the database: each stored pre-flight moves its nodes through the state machine of
:mod:`fleetdx.orchestrator.diagnosis.node_states` (in the transaction that stores the run, whichever way it
came: a local pre-flight, a spool import or a push to the service), and the periodic checks record what they
did to a node (drained it, started a retest) and a person's return. This module only persists what
:func:`~fleetdx.orchestrator.diagnosis.node_states.step` decides.

Simulated runs and runs other than pre-flights (analyze, bandwidth) move no node: their hosts may be bundle
names, and a bandwidth run judges links, not nodes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetdx.orchestrator.diagnosis.node_states import (
    LEMON_WINDOW_S,
    CheckEvent,
    Event,
    NodeState,
    NodeStatus,
    RetestResult,
    StepResult,
    Transition,
    step,
)
from fleetdx.orchestrator.report import RunKind, RunReport
from fleetdx.orchestrator.store.models import NodeStateRow, NodeTransitionRow
from fleetdx.probes.contracts import Contract, Severity, Verdict

if TYPE_CHECKING:
    from fleetdx.orchestrator.store.store import Store


class NodeRecord(Contract):
    """A node's current state with its lemon score: the times it was quarantined in the last 30 days
    (:data:`~fleetdx.orchestrator.diagnosis.node_states.LEMON_WINDOW_S`; the module doc there defines it)."""

    status: NodeStatus
    lemon_score: int


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


def record(store: Store, host: str, event: Event) -> StepResult:
    """Record an event about ``host`` (a drain, a retest starting, a person's return) in one write transaction;
    returns what the state machine decided (``transition`` ``None``: nothing changed). Raises
    :class:`~fleetdx.orchestrator.store.DatabaseUnreachable` / ``StoreError`` as every store write does."""
    return store._write(lambda session: apply(session, host, event, store.flap_window_s))


def get(store: Store, host: str) -> NodeStatus | None:
    """``host``'s current state, ``None`` for a node no stored pre-flight or event named."""
    with store._errors(), Session(store.engine) as session:
        row = session.get(NodeStateRow, host)
        return None if row is None else _status_of(row)


def list_nodes(store: Store, now: float | None = None) -> list[NodeRecord]:
    """Every known node's state and lemon score, sorted by host (two queries)."""
    now = time.time() if now is None else now
    lemon = (
        select(NodeTransitionRow.host, func.count())
        .where(
            NodeTransitionRow.to_state == NodeState.QUARANTINED,
            NodeTransitionRow.at >= now - LEMON_WINDOW_S,
            # a failed or inconclusive retest is the same episode; a new node's first state counts
            func.coalesce(NodeTransitionRow.from_state, "") != NodeState.RETESTING.value,
        )
        .group_by(NodeTransitionRow.host)
    )
    with store._errors(), Session(store.engine) as session:
        scores = {h: int(n) for h, n in session.execute(lemon)}
        rows = session.scalars(select(NodeStateRow).order_by(NodeStateRow.host))
        return [NodeRecord(status=_status_of(r), lemon_score=scores.get(r.host, 0)) for r in rows]


def transitions(store: Store, host: str, limit: int = 50) -> list[Transition]:
    """``host``'s ``limit`` newest transitions, newest first."""
    stmt = (
        select(NodeTransitionRow)
        .where(NodeTransitionRow.host == host)
        .order_by(NodeTransitionRow.at.desc(), NodeTransitionRow.id.desc())
        .limit(limit)
    )
    with store._errors(), Session(store.engine) as session:
        return [
            Transition(
                host=r.host,
                from_state=r.from_state,
                to_state=r.to_state,
                at=r.at,
                reason=r.reason,
                by=r.by,
                run_id=r.run_id,
                retest=r.retest,
            )
            for r in session.scalars(stmt)
        ]


def retest_counts(store: Store) -> dict[RetestResult, int]:
    """How many retests passed and failed, over the whole history (inconclusive ones are neither)."""
    stmt = (
        select(NodeTransitionRow.retest, func.count())
        .where(NodeTransitionRow.retest.is_not(None))
        .group_by(NodeTransitionRow.retest)
    )
    with store._errors(), Session(store.engine) as session:
        counts = {RetestResult(r): int(n) for r, n in session.execute(stmt)}
    return {r: counts.get(r, 0) for r in RetestResult}
