"""Node states in the store, on SQLite and PostgreSQL: a stored pre-flight moves its nodes (one at a time or in
a batch of the service's uploads), the periodic checks' events are recorded with their history, a simulated or
bandwidth run moves nothing, and the lemon score counts quarantines in the last 30 days."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis.node_states import (
    LEMON_WINDOW_S,
    Actor,
    DrainEvent,
    NodeState,
    RetestEvent,
    RetestResult,
    ReturnEvent,
)
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import NodeReport, RunKind, RunReport
from fleetdx.orchestrator.store import Store, StoreError, import_spool_file, write_spool
from fleetdx.orchestrator.store import states as st
from fleetdx.probes.contracts import Level, Severity, Verdict
from tests.store_samples import bandwidth_raw, bandwidth_run

pytest_plugins = ["tests.pgfixtures"]

T0 = 1_800_000_000.0
H = "gpu07"


def run(run_id: str, at: float, verdict: Verdict, host: str = H, simulated: bool = False) -> RunReport:
    findings = []
    if verdict is Verdict.CRITICAL:
        findings.append(
            Finding(
                code=FindingCode.GPU_FOREIGN_PROCESS,
                severity=Severity.CRITICAL,
                nodes=[host],
                subject="GPU0",
                message="pid 4242 (python3) holds GPU0 with 1000 MiB",
            )
        )
    return RunReport(
        run_id=run_id,
        kind=RunKind.PREFLIGHT,
        started_at=at,
        finished_at=at + 2,
        level=Level.QUICK,
        verdict=verdict,
        exit_code=int(verdict),
        simulated=simulated,
        nodes=[NodeReport(host=host, verdict=verdict)],
        findings=findings,
    )


def test_a_stored_preflight_moves_its_node_and_keeps_the_history(store: Store) -> None:
    store.save_report(run("r1", T0, Verdict.OK))
    assert (s := st.get(store, H)) is not None and s.state is NodeState.OK and s.run_id == "r1"
    store.save_report(run("r2", T0 + 100, Verdict.CRITICAL))
    s = st.get(store, H)
    assert s is not None and s.state is NodeState.SUSPECT and s.since == T0 + 102
    assert s.reason == "GPU_FOREIGN_PROCESS GPU0 (run r2)" and s.code == "GPU_FOREIGN_PROCESS"
    assert s.level is Level.QUICK
    # the periodic check drains it, retests it, and the clean retest returns it
    st.record(store, H, DrainEvent(at=T0 + 110, reason="fleetdx: GPU_FOREIGN_PROCESS GPU0", run_id="r2"))
    st.record(store, H, RetestEvent(at=T0 + 200))
    assert (s := st.get(store, H)) is not None and s.state is NodeState.RETESTING
    store.save_report(run("r3", T0 + 201, Verdict.OK))
    s = st.get(store, H)
    assert s is not None and s.state is NodeState.RETURNED and s.returned_at == T0 + 203
    history = st.transitions(store, H)
    assert [(t.from_state, t.to_state) for t in reversed(history)] == [
        (None, NodeState.OK),
        (NodeState.OK, NodeState.SUSPECT),
        (NodeState.SUSPECT, NodeState.QUARANTINED),
        (NodeState.QUARANTINED, NodeState.RETESTING),
        (NodeState.RETESTING, NodeState.RETURNED),
    ]
    assert history[0].retest is RetestResult.PASS and history[0].run_id == "r3"
    assert st.retest_counts(store) == {RetestResult.PASS: 1, RetestResult.FAIL: 0}
    # saving the same run again moves nothing (saving is idempotent)
    assert store.save_report(run("r3", T0 + 201, Verdict.OK)) is False
    assert len(st.transitions(store, H)) == 5


def test_a_failed_retest_counts_and_the_lemon_score_counts_episodes(store: Store) -> None:
    now = T0 + 10_000
    # an old quarantine, outside the 30 days: not counted
    st.record(store, H, DrainEvent(at=now - LEMON_WINDOW_S - 60, reason="fleetdx: old"))
    st.record(store, H, ReturnEvent(at=now - LEMON_WINDOW_S - 30, reason="fixed"))
    for k in range(2):  # two episodes lately, the second with a failed retest (same episode)
        t = now - 5000 + 1000 * k
        store.save_report(run(f"c{k}", t, Verdict.CRITICAL))
        st.record(store, H, DrainEvent(at=t + 10, reason="fleetdx: GPU_FOREIGN_PROCESS GPU0"))
        st.record(store, H, RetestEvent(at=t + 20))
        store.save_report(run(f"t{k}", t + 21, Verdict.CRITICAL if k == 1 else Verdict.OK))
    (rec,) = st.list_nodes(store, now=now)
    assert rec.status.host == H and rec.status.state is NodeState.QUARANTINED and rec.lemon_score == 2
    assert st.retest_counts(store) == {RetestResult.PASS: 1, RetestResult.FAIL: 1}
    # the second episode came 1000 s after the first's clean retest returned it: within the flap window
    assert rec.status.held and rec.status.returned_at == now - 5000 + 23


def test_a_person_returns_a_held_node(store: Store) -> None:
    store.save_report(run("a", T0, Verdict.CRITICAL))
    st.record(store, H, DrainEvent(at=T0 + 5, reason="fleetdx: X"))
    st.record(store, H, RetestEvent(at=T0 + 6))
    store.save_report(run("b", T0 + 7, Verdict.OK))  # returned
    store.save_report(run("c", T0 + 3600, Verdict.CRITICAL))  # fails again within 24 h: held
    st.record(store, H, DrainEvent(at=T0 + 3605, reason="fleetdx: X"))
    st.record(store, H, RetestEvent(at=T0 + 3700))
    store.save_report(run("d", T0 + 3701, Verdict.OK))
    s = st.get(store, H)
    assert s is not None and s.state is NodeState.QUARANTINED and s.held
    r = st.record(store, H, ReturnEvent(at=T0 + 4000, reason="GPU reseated, ticket 123"))
    assert r.transition is not None and r.transition.by is Actor.ADMIN
    s = st.get(store, H)
    assert s is not None and s.state is NodeState.RETURNED and not s.held and s.reason == "GPU reseated, ticket 123"


def test_simulated_and_bandwidth_runs_move_no_node(store: Store) -> None:
    store.save_report(run("sim", T0, Verdict.CRITICAL, simulated=True))
    store.save_report(bandwidth_run("bw", T0, degraded=True), bandwidth_raw(True))
    assert st.list_nodes(store) == []


def test_a_batch_of_uploads_moves_nodes_in_order(store: Store) -> None:
    items = [
        (run("b1", T0, Verdict.CRITICAL), None),
        (run("b2", T0 + 10, Verdict.OK), None),
        (run("b1", T0, Verdict.CRITICAL), None),
    ]
    assert store.save_reports(items) == [True, True, False]
    s = st.get(store, H)
    assert s is not None and s.state is NodeState.OK and s.run_id == "b2"


def test_the_flap_window_is_a_setting(monkeypatch: pytest.MonkeyPatch, migrated_url: str) -> None:
    monkeypatch.setenv("FLEETDX_FLAP_WINDOW_S", "600")
    with Store.open(migrated_url) as s:
        assert s.flap_window_s == 600
    monkeypatch.setenv("FLEETDX_FLAP_WINDOW_S", "a day")
    with pytest.raises(StoreError, match="FLEETDX_FLAP_WINDOW_S='a day'"):
        Store.open(migrated_url)


def test_a_spooled_preflight_moves_its_node_when_imported(store: Store, tmp_path: Path) -> None:
    # a prolog's --spool report, loaded later by `fleetdx db import`: the same move as a direct save
    path = write_spool(run("sp", T0, Verdict.CRITICAL), None, tmp_path / "spool")
    assert st.get(store, H) is None
    result = import_spool_file(store, path)
    assert result is not None and result.inserted
    s = st.get(store, H)
    assert s is not None and s.state is NodeState.SUSPECT and s.run_id == "sp"
