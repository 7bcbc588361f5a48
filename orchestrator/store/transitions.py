"""How a stored run moves its nodes' states, inside the transaction that stores it (the store's write path:
:meth:`~fleetdx.orchestrator.store.Store.save_report` and ``save_reports``), and how any event is applied:
read the node's row, :func:`~fleetdx.orchestrator.diagnosis.node_states.step`, write the new row and the
transition; a node newly quarantined sends a ``node.quarantined`` webhook event once the transaction commits.
The writer itself is :func:`fleetdx.orchestrator.store.rows.apply_events` (one for every sink); the reads and
events of the rest of fleetdx are in :mod:`fleetdx.orchestrator.store.states`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetdx.orchestrator.diagnosis.node_states import Event, NodeStatus, StepResult
from fleetdx.orchestrator.store.rows import apply_events, apply_runs

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from fleetdx.orchestrator.store.models import NodeStateRow

__all__ = ["apply", "apply_runs"]


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


def apply(session: Session, host: str, event: Event, flap_window_s: float) -> StepResult:
    """Move ``host`` by ``event`` inside ``session``'s transaction: read its state (locked on PostgreSQL),
    :func:`step`, write the new state and the transition. Returns what :func:`step` decided."""
    from fleetdx.orchestrator.store.store import CoreSink

    return apply_events(CoreSink(session), [(host, event)], flap_window_s)[0]
