"""Ray on a Slurm allocation (fleetdx.orchestrator.cluster.allocation), the parts that need no cluster: when
fleetdx starts Ray itself, how a node that did not join is reported, and what a failed worker step says.
The whole path on a real Slurm is tests/test_slurm_preflight.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fleetdx.orchestrator.cluster.allocation import _Launched, in_allocation, ray_executable
from fleetdx.orchestrator.cluster.fanout import NodeOutcome, OutcomeKind
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.preflight.run import NodeJob, run_preflight
from fleetdx.probes.contracts import Level, Severity, Verdict
from fleetdx.probes.runner import Background


def test_in_allocation_needs_a_job_its_nodes_and_srun(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    job = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "gpu[01-04]"}
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    assert in_allocation(job)
    assert not in_allocation({"SLURM_JOB_ID": "42"})
    assert not in_allocation({})
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert not in_allocation(job)  # no srun to start the workers with


def test_ray_executable_is_the_one_beside_this_python() -> None:
    assert ray_executable() == str(Path(sys.executable).parent / "ray")


def test_a_node_that_did_not_join_is_unreachable_with_the_reason() -> None:
    """Hosts handed to run_preflight as lost are not fanned out to (no Ray is needed here: none is left)."""
    lost = {
        "gpu04": NodeOutcome(
            host="gpu04",
            kind=OutcomeKind.UNREACHABLE,
            error="did not join Ray within 20 s",
            elapsed_s=20.1,
            ray_state="absent",
        )
    }
    result = run_preflight({"gpu04": NodeJob(host="gpu04", level=Level.QUICK)}, {}, run_timeout_s=60, lost=lost)
    report = result.report
    [f] = report.findings
    assert (f.code, f.severity, f.nodes) == (FindingCode.NODE_UNREACHABLE, Severity.CRITICAL, ["gpu04"])
    assert "did not join Ray within 20 s" in f.message
    assert f.details["ray_state"] == "absent"
    assert report.verdict is Verdict.CRITICAL and report.exclude == "gpu04"


def test_a_failed_worker_step_says_why_not_srun_s_summary(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    with open(log, "w+b") as f:
        f.write(b"Exception: The current node timed out during startup.\n")
        f.write(b"srun: error: sim4: task 0: Exited with exit code 1\n")
        step = _Launched(host="sim4", run=Background(["true"], dict(os.environ), f))
        step.run.wait()
        assert step.last_line() == "Exception: The current node timed out during startup."
