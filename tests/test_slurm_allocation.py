"""Ray on a Slurm allocation (fleetdx.orchestrator.cluster.allocation), the parts that need no cluster: when
fleetdx starts Ray itself, how a node that did not join is reported, and what a failed worker step says.
The whole path on a real Slurm is tests/test_slurm_preflight.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fleetdx.orchestrator.cluster.allocation import _Launched, _token_auth, in_allocation, ray_executable
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


RAYLET_BLOCK = "(raylet) Raylet is terminated. Termination is unexpected. Possible reasons include: ..."


def _chatty_allocation(lost: list[str]):  # type: ignore[no-untyped-def]
    """A STAND-IN ray_on_allocation that prints what Ray's driver threads print (the raylet block, on stdout
    and stderr) while it is up; ``lost`` hosts did not join."""
    from collections.abc import Iterator
    from contextlib import contextmanager

    from fleetdx.orchestrator.cluster.allocation import AllocationRay

    @contextmanager
    def ray_on_allocation(hosts: list[str], join_timeout_s: float) -> Iterator[AllocationRay]:
        print(RAYLET_BLOCK)
        print("(raylet) [stderr] last log line", file=sys.stderr)
        outcomes = {
            h: NodeOutcome(host=h, kind=OutcomeKind.UNREACHABLE, error="did not join Ray within 1 s") for h in lost
        }
        yield AllocationRay(address="10.0.0.1:6379", nodes=dict.fromkeys(hosts), lost=outcomes, join_s=1.0)
        print("(raylet) stopping", file=sys.stderr)

    return ray_on_allocation


def _allocation_preflight(monkeypatch, tmp_path: Path, lost: list[str]) -> list[str]:  # type: ignore[no-untyped-def]
    import fleetdx.orchestrator.cluster.allocation as allocation
    from fleetdx.orchestrator.preflight import job
    from fleetdx.orchestrator.preflight.run import analyze_bundles
    from fleetdx.orchestrator.scheduler.targets import Targets, TargetSource

    monkeypatch.setenv("FLEETDX_RAY_LOG_DIR", str(tmp_path / "ray"))
    monkeypatch.setattr(allocation, "ray_on_allocation", _chatty_allocation(lost))
    bundle = Path(__file__).parent / "fixtures" / "bundles" / "h100-idle"
    monkeypatch.setattr(job, "run_preflight", lambda *a, **k: analyze_bundles([bundle]))
    said: list[str] = []
    hosts = ["sim1", "sim2"]
    job._on_allocation(job.PreflightRequest(), hosts, Targets(hosts=hosts, source=TargetSource.SLURM), said.append)
    return said


def test_ray_driver_output_goes_to_its_log_when_all_is_well(monkeypatch, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Issue 21 item 8: successful jobs' output carried 22-line '(raylet) Raylet is terminated' blocks."""
    said = _allocation_preflight(monkeypatch, tmp_path, lost=[])
    out, err = capsys.readouterr()
    assert "raylet" not in out + err
    assert not any("raylet" in line for line in said)
    log = (tmp_path / "ray" / "driver.log").read_text()
    assert RAYLET_BLOCK in log and "(raylet) [stderr] last log line" in log and "(raylet) stopping" in log
    assert said[-1].endswith(f"Ray stopped; its output in {tmp_path / 'ray'}")


def test_ray_driver_output_is_shown_when_a_node_did_not_join(monkeypatch, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    said = _allocation_preflight(monkeypatch, tmp_path, lost=["sim2"])
    out, err = capsys.readouterr()
    assert "raylet" not in out + err  # shown through say (stderr), never on stdout
    tail = said[said.index(f"fleetdx: Ray's driver output (last 3 lines of {tmp_path / 'ray' / 'driver.log'}):") :]
    assert tail[1:] == [RAYLET_BLOCK, "(raylet) [stderr] last log line", "(raylet) stopping"]


def test_a_retry_waits_until_slurm_has_let_go_of_the_previous_step(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 21 item 8: two `ray start` steps ran on one node after a retry. A STAND-IN squeue lists the
    previous step of sim2 for its first two answers."""
    from fleetdx.orchestrator.cluster.allocation import step_gone

    calls = tmp_path / "calls"
    squeue = tmp_path / "bin" / "squeue"
    squeue.parent.mkdir()
    squeue.write_text(
        "#!/bin/bash\n# STAND-IN squeue: the step is listed for the first two calls\n"
        f'echo x >> {calls}; [ "$(wc -l < {calls})" -le 2 ] && echo fleetdx-ray-sim2; echo fleetdx-ray-sim3\n'
    )
    squeue.chmod(0o755)
    monkeypatch.setenv("PATH", f"{squeue.parent}:{os.environ['PATH']}")
    env = dict(os.environ)
    assert step_gone("42", "sim2", env, wait_s=60)
    assert len(calls.read_text().split()) == 3
    assert not step_gone("42", "sim3", env, wait_s=0)  # still listed when the wait is over: no retry
    assert step_gone("nojob", "sim3", env)


def test_the_allocations_ray_gets_a_token_of_its_own_unless_one_is_given(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Ray 2.60's `ray start --head` refuses to start with token auth and no token (a fresh $HOME, as in a first
    job): the allocation's Ray gets a random token, in the env the ray processes and srun steps get and in this
    driver's. A token the user gave (RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH) is kept, and so is auth turned off."""
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.setenv(k, "")  # recorded, so that what _token_auth sets is undone after the test
        monkeypatch.delenv(k)
    env: dict[str, str] = {}
    _token_auth(env)
    assert env["RAY_AUTH_MODE"] == "token" and len(env["RAY_AUTH_TOKEN"]) == 64
    assert os.environ["RAY_AUTH_TOKEN"] == env["RAY_AUTH_TOKEN"]
    other: dict[str, str] = {}
    _token_auth(other)
    assert other["RAY_AUTH_TOKEN"] != env["RAY_AUTH_TOKEN"]  # one per allocation
    given = {"RAY_AUTH_TOKEN_PATH": "/shared/ray_token"}
    _token_auth(given)
    assert "RAY_AUTH_TOKEN" not in given
    off = {"RAY_AUTH_MODE": "disabled"}
    _token_auth(off)
    assert off == {"RAY_AUTH_MODE": "disabled"}
