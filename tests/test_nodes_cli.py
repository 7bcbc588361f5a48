"""``fleetdx nodes``: a node a local pre-flight just stored is listed with its state (issue 23's done-when), a
person returns a node, its history is kept; and the periodic check's decisions (``fleetdx nodes check``,
:class:`~fleetdx.orchestrator.preflight.periodic.SlurmCheck`) against a STAND-IN ``scontrol`` (a runner that
answers from a dict and records what it was asked) and REPLAYED real bundles (the busy H100: a foreign process
on GPU0, CRITICAL; the idle one, OK). The real-Slurm test of the same path is tests/test_slurm_healthcheck.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetdx.orchestrator.cli.main import app
from fleetdx.orchestrator.diagnosis.node_states import DrainEvent, NodeState, RetestResult
from fleetdx.orchestrator.preflight.periodic import Action, SlurmCheck, retest_level
from fleetdx.orchestrator.preflight.run import NodeJob, PreflightResult, run_local_preflight
from fleetdx.orchestrator.scheduler.slurm_drain import drain_reason
from fleetdx.orchestrator.store import Store, states
from fleetdx.probes.contracts import Level, RunStatus
from fleetdx.probes.runner import RunResult

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"
runner = CliRunner()


def test_nodes_lists_a_node_a_local_preflight_just_stored(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'fleet.db'}"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    pf = subprocess.run(
        [sys.executable, "-m", "fleetdx", "preflight", "--json", "--db", db],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    report = json.loads(pf.stdout)
    host = socket.gethostname()
    assert report["nodes"][0]["host"] == host
    listed = subprocess.run(
        [sys.executable, "-m", "fleetdx", "nodes", "--json", "--db", db],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    (node,) = json.loads(listed.stdout)
    verdict = report["nodes"][0]["verdict"]
    want = "ok" if verdict in ("OK", "WARNING") else "suspect"  # no GPU here: UNKNOWN, not judged
    assert node["status"]["host"] == host and node["status"]["state"] == want, (verdict, node)
    assert node["status"]["run_id"] == report["run_id"] and node["lemon_score"] == 0
    assert listed.returncode == (0 if want == "ok" else 1)


def test_return_and_history(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'fleet.db'}"
    with Store.open(db) as store:
        states.record(store, "gpu07", DrainEvent(at=time.time(), reason="fleetdx: GPU_FOREIGN_PROCESS GPU0"))
    r = runner.invoke(app, ["nodes", "--db", db])
    assert r.exit_code == 2 and "quarantined" in r.output  # a quarantined node: CRITICAL
    r = runner.invoke(app, ["nodes", "return", "gpu07", "--reason", "GPU reseated, ticket 4711", "--db", db])
    assert r.exit_code == 0 and "gpu07: quarantined -> returned" in r.output
    r = runner.invoke(app, ["nodes", "history", "gpu07", "--json", "--db", db])
    hist = json.loads(r.output)
    assert [(t["to_state"], t["by"]) for t in hist] == [("returned", "admin"), ("quarantined", "fleetdx")]
    assert hist[0]["reason"] == "GPU reseated, ticket 4711"
    assert runner.invoke(app, ["nodes", "--db", db]).exit_code == 0
    r = runner.invoke(app, ["nodes", "return", "gpu99", "--reason", "x", "--db", db])
    assert r.exit_code == 3 and "unknown to the store" in r.output


class StandinScontrol:
    """STAND-IN for ``scontrol``: ``show node`` answers one node line of the given state and reason; ``update``
    changes them and is recorded."""

    def __init__(self, node: str, state: str, reason: str | None = None) -> None:
        self.node, self.state, self.reason = node, state, reason
        self.updates: list[list[str]] = []

    def run(self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult:
        argv = list(argv)
        if argv[:3] == ["scontrol", "show", "node"]:
            line = f"NodeName={self.node} Arch=x86_64 CoresPerSocket=1 Gres=gpu:1 State={self.state} Partitions=debug"
            if self.reason:
                line += f" Reason={self.reason} [root@2026-11-27T12:00:00]"
            return RunResult(argv=argv, status=RunStatus.OK, returncode=0, stdout=line + "\n")
        assert argv[:2] == ["scontrol", "update"], argv
        self.updates.append(argv[2:])
        if "State=DRAIN" in argv:
            self.state, self.reason = "IDLE+DRAIN", argv[-1].removeprefix("Reason=")
        elif "State=RESUME" in argv:
            self.state, self.reason = "IDLE", None
        return RunResult(argv=argv, status=RunStatus.OK, returncode=0)


def replay(bundle: str, levels: list[Level]) -> object:
    """A check that REPLAYS a real bundle as node sim1, recording the levels it was asked for."""

    def check(level: Level, run_timeout_s: float) -> PreflightResult:
        levels.append(level)
        job = NodeJob(host="sim1", level=Level.QUICK, bundle_dir=BUNDLES / bundle)
        result = run_local_preflight(job, run_timeout_s=run_timeout_s, expected_gpus=1)
        return result.model_copy(update={"report": result.report.model_copy(update={"level": level})})

    return check


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fleet.db'}"


def sc(slurm: StandinScontrol, db: str, bundle: str, levels: list[Level], level: Level = Level.QUICK) -> SlurmCheck:
    return SlurmCheck(node="sim1", host="sim1", runner=slurm, db=db, level=level, check=replay(bundle, levels))  # type: ignore[arg-type]


def test_critical_drains_then_a_clean_retest_resumes(db: str) -> None:
    slurm, levels = StandinScontrol("sim1", "IDLE"), []
    out = sc(slurm, db, "h100-busy", levels).run()
    assert out.action is Action.DRAINED and out.state is NodeState.QUARANTINED
    assert slurm.reason is not None and slurm.reason.startswith("fleetdx: GPU_FOREIGN_PROCESS GPU0")
    kept = sc(slurm, db, "h100-busy", levels).run()  # still busy: retest fails, stays drained
    assert kept.action is Action.KEPT_OUT and "retest failed" in kept.message and "DRAIN" in slurm.state
    back = sc(slurm, db, "h100-idle", levels).run()  # the stand-in GPU is idle now: clean retest, resumed
    assert back.action is Action.RESUMED and back.state is NodeState.RETURNED and slurm.state == "IDLE"
    assert slurm.updates[-1] == ["NodeName=sim1", "State=RESUME"]
    with Store.open(db) as store:
        assert states.retest_counts(store)[RetestResult.FAIL] == 1


def test_an_administrators_drain_is_never_touched(db: str) -> None:
    slurm, levels = StandinScontrol("sim1", "IDLE+DRAIN", "disk replaced, do not use"), []
    out = sc(slurm, db, "h100-idle", levels).run()
    assert out.action is Action.NOT_OURS and levels == [] and slurm.updates == []
    down = StandinScontrol("sim1", "DOWN", "Not responding")
    assert sc(down, db, "h100-idle", levels).run().action is Action.NOT_OURS and down.updates == []


class DrainedDuringCheck(StandinScontrol):
    """STAND-IN ``scontrol`` whose node an administrator drains while fleetdx's check runs: the first ``show
    node`` answers IDLE, every later one IDLE+DRAIN with the administrator's reason."""

    def run(self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult:
        out = super().run(argv, timeout_s, env)
        if list(argv)[:3] == ["scontrol", "show", "node"] and self.state == "IDLE":
            self.state, self.reason = "IDLE+DRAIN", "DIMM replacement, ticket 77"
        return out


def test_an_administrators_drain_during_the_check_is_not_replaced(db: str) -> None:
    """The check takes seconds; a drain an administrator sets meanwhile keeps its reason (the CI flake of
    tests/test_slurm_healthcheck.py: fleetdx drained sim2 over 'DIMM replacement, ticket 77')."""
    slurm, levels = DrainedDuringCheck("sim1", "IDLE"), []
    out = sc(slurm, db, "h100-busy", levels).run()
    assert out.action is Action.NOT_OURS and "set during the check (CRITICAL)" in out.message, out.message
    assert slurm.updates == [] and slurm.reason == "DIMM replacement, ticket 77" and levels == [Level.QUICK]


def test_a_fleetdx_reason_alone_resumes_nothing(db: str) -> None:
    # the prefix is there but the store never saw the node fail: untouched
    slurm, levels = StandinScontrol("sim1", "IDLE+DRAIN", "fleetdx: GPU_FOREIGN_PROCESS GPU0"), []
    out = sc(slurm, db, "h100-idle", levels).run()
    assert out.action is Action.UNCONFIRMED and levels == [] and slurm.updates == []


def test_a_prolog_drain_is_adopted_and_retested_at_the_failed_level(db: str) -> None:
    levels: list[Level] = []
    slurm = StandinScontrol("sim1", "IDLE")
    # a standard pre-flight found it critical (stored: suspect); then the prolog drained it
    assert sc(slurm, db, "h100-busy", levels, Level.STANDARD).run().action is Action.DRAINED
    with Store.open(db) as store:
        assert (s := states.get(store, "sim1")) is not None and s.level is Level.STANDARD
    out = sc(slurm, db, "h100-idle", levels).run()  # asked for quick: the retest runs at standard
    assert out.action is Action.RESUMED and levels[-1] is Level.STANDARD
    assert retest_level(Level.QUICK, Level.FULL) is Level.STANDARD and retest_level(Level.QUICK, None) is Level.QUICK


def test_prolog_reason_adoption(db: str) -> None:
    levels: list[Level] = []
    with Store.open(db) as store:  # the prolog's pre-flight was stored (suspect), then it drained the node
        result = replay("h100-busy", levels)(Level.QUICK, 60)  # type: ignore[operator]
        store.save_report(result.report)
    slurm = StandinScontrol("sim1", "IDLE+DRAIN", "fleetdx preflight: GPU_FOREIGN_PROCESS GPU0 (pid 1); report X")
    out = sc(slurm, db, "h100-idle", levels).run()
    assert out.action is Action.RESUMED
    with Store.open(db) as store:
        hist = [(t.from_state, t.to_state) for t in reversed(states.transitions(store, "sim1"))]
    assert hist == [
        (None, NodeState.SUSPECT),
        (NodeState.SUSPECT, NodeState.QUARANTINED),
        (NodeState.QUARANTINED, NodeState.RETESTING),
        (NodeState.RETESTING, NodeState.RETURNED),
    ]


def test_a_hand_resumed_node_is_recorded_returned(db: str) -> None:
    levels: list[Level] = []
    slurm = StandinScontrol("sim1", "IDLE")
    sc(slurm, db, "h100-busy", levels).run()
    slurm.state, slurm.reason = "IDLE", None  # an administrator ran scontrol update State=RESUME
    out = sc(slurm, db, "h100-idle", levels).run()
    assert out.action is Action.CHECKED
    with Store.open(db) as store:
        (last, *_) = states.transitions(store, "sim1")
    assert last.to_state is NodeState.RETURNED and last.by.value == "admin" and "outside fleetdx" in last.reason


def test_drain_reason_fits_slurm() -> None:
    assert drain_reason("GPU_FOREIGN_PROCESS GPU0") == "fleetdx: GPU_FOREIGN_PROCESS GPU0"
    long = drain_reason("X " + "é" * 300)
    assert len(long.encode()) <= 255 and long.endswith("...")


def test_a_running_jobs_gpu_process_does_not_drain_a_mixed_node(db: str) -> None:
    # the busy bundle's GPU0 process, on a node that runs jobs: the job's own process, not a fault
    slurm, levels = StandinScontrol("sim1", "MIXED"), []
    out = sc(slurm, db, "h100-busy", levels).run()
    assert out.action is Action.CHECKED and out.verdict is not None and out.verdict.name != "CRITICAL"
    assert slurm.updates == [] and out.state is NodeState.OK
    with Store.open(db) as store:
        (run,) = store.list_runs()
        report = store.get_run(run.run_id)
    (f,) = [f for f in report.findings if f.code.value == "GPU_FOREIGN_PROCESS"]
    assert f.severity.value == "info" and "jobs run on this node: Slurm state MIXED" in f.message
