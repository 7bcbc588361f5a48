"""Node states in the database: each stored pre-flight moves its nodes through the state machine of
:mod:`fleetdx.orchestrator.diagnosis.node_states` (in the transaction that stores the run, whichever way it
came: a local pre-flight, a spool import or a push to the service; :mod:`fleetdx.orchestrator.store.transitions`),
and the periodic checks record here what they did to a node (drained it, started a retest) and a person's
return. The store only persists what :func:`~fleetdx.orchestrator.diagnosis.node_states.step` decides.

Simulated runs and runs other than pre-flights (analyze, bandwidth) move no node: their hosts may be bundle
names, and a bandwidth run judges links, not nodes.
"""

from __future__ import annotations

import time

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetdx.orchestrator.diagnosis.node_states import (
    LEMON_WINDOW_S,
    Event,
    NodeState,
    NodeStatus,
    RetestResult,
    StepResult,
    Transition,
)
from fleetdx.orchestrator.store.models import NodeStateRow, NodeTransitionRow
from fleetdx.orchestrator.store.store import Store
from fleetdx.orchestrator.store.transitions import _status_of as _status_of  # re-exported: store.jobs reads it
from fleetdx.orchestrator.store.transitions import apply
from fleetdx.probes.contracts import Contract


class NodeRecord(Contract):
    """A node's current state with its lemon score: the times it was quarantined in the last 30 days
    (:data:`~fleetdx.orchestrator.diagnosis.node_states.LEMON_WINDOW_S`; the module doc there defines it)."""

    status: NodeStatus
    lemon_score: int


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
