"""A node's health over time: the state machine behind ``fleetdx nodes`` and the periodic checks
(``slurm/healthcheck.sh``). Pure: :func:`step` takes a node's current :class:`NodeStatus` and one event and
returns the next status and the :class:`Transition` to keep (``None`` when nothing changes). The store only
persists what it returns (``node_states``: the current state per host; ``node_transitions``: the history).

States (:class:`NodeState`)::

    ok            the newest check of the node was clean (OK or WARNING)
    suspect       a check found it CRITICAL, or gave no verdict (UNKNOWN); nothing was done to the node yet
    quarantined   fleetdx took it out of service (a Slurm drain, a Kubernetes taint) for a critical finding
    retesting     a retest of a quarantined node is running
    returned      back in service after a clean retest, or returned by a person (``fleetdx nodes return``)

Events: a stored pre-flight's verdict for the node (:class:`CheckEvent`; only pre-flights, never simulated
ones), fleetdx draining/tainting it (:class:`DrainEvent`), a retest starting (:class:`RetestEvent`), and a
person returning it (:class:`ReturnEvent`). "clean" is OK or WARNING; "critical" CRITICAL; "no verdict" UNKNOWN.

============  =======================================  ============  ===========================================
from          event                                    to            notes
============  =======================================  ============  ===========================================
(new)         check clean                              ok
(new)         check critical / no verdict              suspect       reason: the first critical finding, or why
                                                                     there is no verdict
ok            check clean                              (no change)
ok            check critical / no verdict              suspect
suspect       check clean                              ok
suspect       check critical / no verdict              (no change)
quarantined   any check that is not a retest           (no change)   only a retest (or a person) returns a node
retesting     check clean at the failed check's level  returned      retest ``pass``; but ``quarantined`` when
                                                                     the node is held (flapping, below)
retesting     check critical                           quarantined   retest ``fail``
retesting     no verdict, or a level below the failed  quarantined   inconclusive: neither pass nor fail
              check's (it would not include it)
returned      check clean                              ok            once ``flap_window_s`` has passed since
                                                                     the return; before that, no change
returned      check critical / no verdict              suspect       critical within ``flap_window_s`` of the
                                                                     return: the node is *held*
(any)         drain (fleetdx drained/tainted it)       quarantined   no change when quarantined or retesting
quarantined,  retest starts                            retesting     no change from any other state
retesting
(not ok)      a person returns it                      returned      clears *held*; ``ok``: no change
============  =======================================  ============  ===========================================

Flap damping: a node that is found critical within ``flap_window_s`` (:data:`DEFAULT_FLAP_WINDOW_S`, 24 h;
the setting ``FLEETDX_FLAP_WINDOW_S``) of being returned to service is *held*: once quarantined, a clean
retest no longer returns it; it stays ``quarantined`` until a person returns it (``fleetdx nodes return HOST
--reason TEXT``). A held node that comes back clean without being quarantined (``suspect`` -> ``ok``) is no
longer held; a drain within the flap window of its return still holds it. So a node that fails again soon
after coming back is not cycled in and out of service.

Lemon score: the number of times the node was quarantined (transitions into ``quarantined`` from ``ok``,
``suspect`` or ``returned``, or a new node; a failed retest is the same episode and does not count) in the last
:data:`LEMON_WINDOW_S` (30 days). 0 is a node never quarantined lately; 3 or more in 30 days is a lemon to
send back to the vendor rather than to retest again.

The retest "includes the check that failed" when its level is at least the level of the run that found the
node critical (``quick`` < ``standard`` < ``full``): a failure seen by a ``standard`` pre-flight is not cleared
by a ``quick`` one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from fleetdx.probes.contracts import Contract, Level, Verdict

#: default flap window (s): a node found critical this soon after being returned stays out for a person
DEFAULT_FLAP_WINDOW_S = 24 * 3600.0
#: the window of the lemon score (s): 30 days
LEMON_WINDOW_S = 30 * 24 * 3600.0
#: a lemon score at or above this is shown as a lemon (``fleetdx nodes``)
LEMON_THRESHOLD = 3

_LEVEL_ORDER = {Level.QUICK: 0, Level.STANDARD: 1, Level.FULL: 2}


class NodeState(str, Enum):
    """Where a node stands (module doc)."""

    OK = "ok"
    SUSPECT = "suspect"
    QUARANTINED = "quarantined"
    RETESTING = "retesting"
    RETURNED = "returned"


class Actor(str, Enum):
    """Who made a transition: fleetdx itself or a person (an administrator)."""

    FLEETDX = "fleetdx"
    ADMIN = "admin"


class RetestResult(str, Enum):
    """How a retest ended; an inconclusive retest has none."""

    PASS = "pass"
    FAIL = "fail"


class NodeStatus(Contract):
    """A node's current state: since when (Unix s), why, who, after which run. ``code``/``level``: the
    critical finding's code and the level of the run that found it (what a retest must include); ``held``:
    flap damping holds it out until a person returns it; ``returned_at``: when it was last returned."""

    host: str
    state: NodeState
    since: float
    reason: str
    by: Actor
    run_id: str | None = None
    code: str | None = None
    level: Level | None = None
    held: bool = False
    returned_at: float | None = None


class Transition(Contract):
    """One change of state, as kept in the history (``from_state`` ``None``: the node's first)."""

    host: str
    from_state: NodeState | None
    to_state: NodeState
    at: float
    reason: str
    by: Actor
    run_id: str | None = None
    retest: RetestResult | None = None


@dataclass(frozen=True)
class CheckEvent:
    """A stored pre-flight's verdict for the node: ``cause`` is its first critical finding naming it
    (``"CODE subject"``), or why it has no verdict; ``code`` that finding's code."""

    at: float
    run_id: str
    verdict: Verdict
    level: Level | None
    cause: str | None = None
    code: str | None = None


@dataclass(frozen=True)
class DrainEvent:
    """fleetdx drained (Slurm) or tainted (Kubernetes) the node, with this reason."""

    at: float
    reason: str
    run_id: str | None = None


@dataclass(frozen=True)
class RetestEvent:
    """A retest of the node starts."""

    at: float


@dataclass(frozen=True)
class ReturnEvent:
    """A person returns the node to service."""

    at: float
    reason: str


Event = CheckEvent | DrainEvent | RetestEvent | ReturnEvent


class StepResult(Contract):
    """What :func:`step` decided: the node's status after the event, and the transition (``None``: none)."""

    status: NodeStatus | None
    transition: Transition | None = None


def covers(retest: Level | None, failed: Level | None) -> bool:
    """Whether a run at level ``retest`` includes the checks of a run at level ``failed`` (``None``: quick)."""
    return _LEVEL_ORDER[retest or Level.QUICK] >= _LEVEL_ORDER[failed or Level.QUICK]


def _flapped(status: NodeStatus | None, at: float, window_s: float) -> bool:
    return status is not None and status.returned_at is not None and at - status.returned_at < window_s


@dataclass(frozen=True)
class _Why:
    """The record of one move: when, why, who, after which run, and a retest's result."""

    at: float
    reason: str
    by: Actor = Actor.FLEETDX
    run_id: str | None = None
    retest: RetestResult | None = None


def _move(status: NodeStatus | None, host: str, to: NodeState, why: _Why, **changes: object) -> StepResult:
    base = status or NodeStatus(host=host, state=to, since=why.at, reason=why.reason, by=why.by)
    update = {"state": to, "since": why.at, "reason": why.reason, "by": why.by, "run_id": why.run_id, **changes}
    t = Transition(
        host=host,
        from_state=None if status is None else status.state,
        to_state=to,
        at=why.at,
        reason=why.reason,
        by=why.by,
        run_id=why.run_id,
        retest=why.retest,
    )
    return StepResult(status=base.model_copy(update=update), transition=t)


def _retest_result(status: NodeStatus, host: str, e: CheckEvent) -> StepResult:
    """A check of a node being retested: pass, fail or inconclusive (module doc)."""
    out = NodeState.QUARANTINED
    if e.verdict is Verdict.CRITICAL:
        failed = f"retest failed: {e.cause or 'CRITICAL'} (run {e.run_id})"
        return _move(status, host, out, _Why(e.at, failed, run_id=e.run_id, retest=RetestResult.FAIL))
    if e.verdict not in (Verdict.OK, Verdict.WARNING) or not covers(e.level, status.level):
        level = (e.level or Level.QUICK).value
        what = "no verdict" if e.verdict is Verdict.UNKNOWN else f"level {level} is below the failed check's"
        return _move(status, host, out, _Why(e.at, f"retest inconclusive ({what}; run {e.run_id})", run_id=e.run_id))
    passed = _Why(e.at, "", run_id=e.run_id, retest=RetestResult.PASS)
    if status.held:
        held = f"retest passed (run {e.run_id}) but held: critical again within the flap window; a person returns it"
        return _move(status, host, out, replace(passed, reason=held))
    clean = f"clean retest (run {e.run_id}, level {(e.level or Level.QUICK).value})"
    return _move(status, host, NodeState.RETURNED, replace(passed, reason=clean), returned_at=e.at)


def _check(status: NodeStatus | None, host: str, e: CheckEvent, window_s: float) -> StepResult | None:
    state = None if status is None else status.state
    if state is NodeState.RETESTING:
        assert status is not None
        return _retest_result(status, host, e)
    if state is NodeState.QUARANTINED:
        return None
    if e.verdict in (Verdict.OK, Verdict.WARNING):
        if state is NodeState.OK or (state is NodeState.RETURNED and _flapped(status, e.at, window_s)):
            return None
        first = "first pre-flight clean" if state is None else "clean pre-flight"
        cleared = _Why(e.at, f"{first} (run {e.run_id})", run_id=e.run_id)
        # ok clears a hold (it was never drained); a drain soon after is weighed against returned_at again
        return _move(status, host, NodeState.OK, cleared, held=False)
    if state is NodeState.SUSPECT:
        return None
    critical = e.verdict is Verdict.CRITICAL
    why = f"{e.cause or ('CRITICAL' if critical else 'no verdict')} (run {e.run_id})"
    held = critical and _flapped(status, e.at, window_s)
    if held:
        why += ": critical again within the flap window after its return; held until a person returns it"
    changes: dict[str, object] = {"held": held or (status is not None and status.held)}
    if critical:
        changes.update(code=e.code, level=e.level)
    return _move(status, host, NodeState.SUSPECT, _Why(e.at, why, run_id=e.run_id), **changes)


def step(
    status: NodeStatus | None, host: str, event: Event, *, flap_window_s: float = DEFAULT_FLAP_WINDOW_S
) -> StepResult:
    """The node's status after ``event`` and the transition to record (the table of the module doc).
    ``status`` is ``None`` for a node never seen. Never raises: an event that changes nothing returns the
    status unchanged (``None`` for an unknown node) and no transition."""
    result: StepResult | None = None
    if isinstance(event, CheckEvent):
        result = _check(status, host, event, flap_window_s)
    elif isinstance(event, DrainEvent):
        if status is None or status.state not in (NodeState.QUARANTINED, NodeState.RETESTING):
            held = (status is not None and status.held) or _flapped(status, event.at, flap_window_s)
            why = _Why(event.at, event.reason, run_id=event.run_id)
            result = _move(status, host, NodeState.QUARANTINED, why, held=held)
    elif isinstance(event, RetestEvent):
        if status is not None and status.state is NodeState.QUARANTINED:
            why = _Why(event.at, f"retest started (quarantined for: {status.reason})", run_id=status.run_id)
            result = _move(status, host, NodeState.RETESTING, why)
    elif status is not None and status.state is not NodeState.OK:
        why = _Why(event.at, event.reason, by=Actor.ADMIN)
        result = _move(status, host, NodeState.RETURNED, why, held=False, returned_at=event.at)
    return result if result is not None else StepResult(status=status)
