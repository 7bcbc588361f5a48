"""The node state machine (:mod:`fleetdx.orchestrator.diagnosis.node_states`): every row of its table, flap
damping, and what a retest must include."""

from __future__ import annotations

import pytest

from fleetdx.orchestrator.diagnosis.node_states import (
    DEFAULT_FLAP_WINDOW_S,
    Actor,
    CheckEvent,
    DrainEvent,
    Event,
    NodeState,
    NodeStatus,
    RetestEvent,
    RetestResult,
    ReturnEvent,
    covers,
    step,
)
from fleetdx.probes.contracts import Level, Verdict

H = "gpu01"
T = 1_800_000_000.0
S = NodeState


def status(state: NodeState, **kw: object) -> NodeStatus:
    base: dict[str, object] = {"host": H, "state": state, "since": T - 100, "reason": "before", "by": Actor.FLEETDX}
    return NodeStatus.model_validate({**base, **kw})


def check(verdict: Verdict, level: Level = Level.QUICK, at: float = T, cause: str | None = None) -> CheckEvent:
    code = "GPU_FOREIGN_PROCESS" if verdict is Verdict.CRITICAL else None
    return CheckEvent(at=at, run_id="r1", verdict=verdict, level=level, cause=cause, code=code)


OK, WARN, CRIT, UNK = Verdict.OK, Verdict.WARNING, Verdict.CRITICAL, Verdict.UNKNOWN

# (from state or None, event, to state or None for "no change", retest result)
CASES: list[tuple[NodeState | None, Event, NodeState | None, RetestResult | None]] = [
    (None, check(OK), S.OK, None),
    (None, check(WARN), S.OK, None),
    (None, check(CRIT, cause="GPU_FOREIGN_PROCESS GPU0"), S.SUSPECT, None),
    (None, check(UNK, cause="no verdict: nvidia-smi missing"), S.SUSPECT, None),
    (S.OK, check(OK), None, None),
    (S.OK, check(CRIT), S.SUSPECT, None),
    (S.OK, check(UNK), S.SUSPECT, None),
    (S.SUSPECT, check(OK), S.OK, None),
    (S.SUSPECT, check(CRIT), None, None),
    (S.SUSPECT, check(UNK), None, None),
    (S.QUARANTINED, check(OK), None, None),
    (S.QUARANTINED, check(CRIT), None, None),
    (S.RETESTING, check(OK), S.RETURNED, RetestResult.PASS),
    (S.RETESTING, check(WARN), S.RETURNED, RetestResult.PASS),
    (S.RETESTING, check(CRIT), S.QUARANTINED, RetestResult.FAIL),
    (S.RETESTING, check(UNK), S.QUARANTINED, None),
    (S.RETURNED, check(CRIT), S.SUSPECT, None),
    (S.RETURNED, check(UNK), S.SUSPECT, None),
    (None, DrainEvent(at=T, reason="fleetdx: X"), S.QUARANTINED, None),
    (S.OK, DrainEvent(at=T, reason="fleetdx: X"), S.QUARANTINED, None),
    (S.SUSPECT, DrainEvent(at=T, reason="fleetdx: X"), S.QUARANTINED, None),
    (S.RETURNED, DrainEvent(at=T, reason="fleetdx: X"), S.QUARANTINED, None),
    (S.QUARANTINED, DrainEvent(at=T, reason="fleetdx: X"), None, None),
    (S.RETESTING, DrainEvent(at=T, reason="fleetdx: X"), None, None),
    (S.QUARANTINED, RetestEvent(at=T), S.RETESTING, None),
    (None, RetestEvent(at=T), None, None),
    (S.OK, RetestEvent(at=T), None, None),
    (S.SUSPECT, RetestEvent(at=T), None, None),
    (S.RETESTING, RetestEvent(at=T), None, None),
    (S.RETURNED, RetestEvent(at=T), None, None),
    (None, ReturnEvent(at=T, reason="fixed"), None, None),
    (S.OK, ReturnEvent(at=T, reason="fixed"), None, None),
    (S.SUSPECT, ReturnEvent(at=T, reason="fixed"), S.RETURNED, None),
    (S.QUARANTINED, ReturnEvent(at=T, reason="fixed"), S.RETURNED, None),
    (S.RETESTING, ReturnEvent(at=T, reason="fixed"), S.RETURNED, None),
    (S.RETURNED, ReturnEvent(at=T, reason="fixed"), S.RETURNED, None),
]


@pytest.mark.parametrize(("before", "event", "after", "retest"), CASES)
def test_every_transition(
    before: NodeState | None, event: Event, after: NodeState | None, retest: RetestResult | None
) -> None:
    current = None if before is None else status(before)
    result = step(current, H, event)
    if after is None:
        assert result.transition is None and result.status == current
        return
    t = result.transition
    assert t is not None and result.status is not None
    assert (t.from_state, t.to_state, t.retest, t.at) == (before, after, retest, T)
    assert result.status.state is after and result.status.since == T and result.status.reason == t.reason
    assert t.by is (Actor.ADMIN if isinstance(event, ReturnEvent) else Actor.FLEETDX)


def test_the_table_covers_every_state_and_event_kind() -> None:
    seen = {(b, type(e).__name__, e.verdict if isinstance(e, CheckEvent) else None) for b, e, _, _ in CASES}
    for before in (None, *NodeState):
        for kind in ("DrainEvent", "RetestEvent", "ReturnEvent"):
            assert (before, kind, None) in seen, (before, kind)
        verdicts = {v for b, k, v in seen if b == before and k == "CheckEvent"}
        assert {CRIT} <= verdicts and (verdicts & {OK, WARN}) or before is S.RETURNED, (before, verdicts)


def test_a_critical_check_keeps_its_code_level_and_reason() -> None:
    r = step(None, H, check(CRIT, Level.STANDARD, cause="GPU_FOREIGN_PROCESS GPU0"))
    assert r.status is not None and r.status.code == "GPU_FOREIGN_PROCESS" and r.status.level is Level.STANDARD
    assert r.status.reason == "GPU_FOREIGN_PROCESS GPU0 (run r1)" and r.status.run_id == "r1"


def test_a_retest_must_include_the_failed_check() -> None:
    assert covers(Level.STANDARD, Level.QUICK) and covers(Level.QUICK, None) and not covers(Level.QUICK, Level.STANDARD)
    retesting = status(S.RETESTING, level=Level.STANDARD, code="GPU_GEMM_SLOW")
    low = step(retesting, H, check(OK, Level.QUICK))
    assert low.status is not None and low.status.state is S.QUARANTINED
    assert low.transition is not None and low.transition.retest is None and "below" in low.transition.reason
    high = step(retesting, H, check(OK, Level.STANDARD))
    assert high.status is not None and high.status.state is S.RETURNED and high.status.returned_at == T


def test_returned_becomes_ok_only_after_the_flap_window() -> None:
    returned = status(S.RETURNED, returned_at=T)
    assert step(returned, H, check(OK, at=T + 3600)).transition is None  # within the window: still returned
    later = step(returned, H, check(OK, at=T + DEFAULT_FLAP_WINDOW_S + 1))
    assert later.status is not None and later.status.state is S.OK


def test_flap_damping_holds_a_node_until_a_person_returns_it() -> None:
    returned = status(S.RETURNED, returned_at=T)
    failed = step(returned, H, check(CRIT, at=T + 3600, cause="GPU_FOREIGN_PROCESS GPU0")).status
    assert failed is not None and failed.state is S.SUSPECT and failed.held and "flap window" in failed.reason
    drained = step(failed, H, DrainEvent(at=T + 3601, reason="fleetdx: GPU_FOREIGN_PROCESS GPU0")).status
    assert drained is not None and drained.state is S.QUARANTINED and drained.held
    retesting = step(drained, H, RetestEvent(at=T + 7200)).status
    passed = step(retesting, H, check(OK, at=T + 7201))
    assert passed.status is not None and passed.status.state is S.QUARANTINED  # clean, but held
    assert passed.transition is not None and passed.transition.retest is RetestResult.PASS
    back = step(passed.status, H, ReturnEvent(at=T + 9000, reason="GPU reseated")).status
    assert back is not None and back.state is S.RETURNED and not back.held and back.by is Actor.ADMIN


def test_a_failure_after_the_window_is_not_a_flap() -> None:
    returned = status(S.RETURNED, returned_at=T)
    failed = step(returned, H, check(CRIT, at=T + DEFAULT_FLAP_WINDOW_S + 1)).status
    assert failed is not None and not failed.held
    short = step(returned, H, check(CRIT, at=T + 600), flap_window_s=300).status  # the window is a setting
    assert short is not None and not short.held


def test_a_drain_soon_after_a_return_is_held_too() -> None:
    # the prolog drained it (no critical check recorded first): the drain itself is the second failure
    drained = step(status(S.RETURNED, returned_at=T), H, DrainEvent(at=T + 60, reason="fleetdx preflight: X")).status
    assert drained is not None and drained.held


def test_ok_clears_a_hold_but_a_drain_in_the_window_holds_again() -> None:
    held = status(S.SUSPECT, held=True, returned_at=T - 600)
    ok = step(held, H, check(OK)).status
    assert ok is not None and ok.state is S.OK and not ok.held
    again = step(ok, H, DrainEvent(at=T + 60, reason="fleetdx: X")).status
    assert again is not None and again.held  # still within the flap window of the return at T - 600
