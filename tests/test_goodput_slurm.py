"""Issue 24, "Done when": the goodput ledger of a real job requeued once on a real Slurm 22.05 adds up to the
job's wall time (tests/slurmcluster.py: slurmd on this machine; no accounting, so the job is read from
``scontrol``).

The job: ``sbatch --requeue`` of a STAND-IN training loop (no GPU, no model: it sleeps 0.2 s a step) timed by
the real :class:`fleetdx.steps.StepTimer`, one rank, its log appended across attempts. It saves a checkpoint
(its step number in a file, the ``checkpoint`` stage) every 10 steps and resumes from it, giving StepTimer the
step's own number. Once it has passed step 25 the test runs ``scontrol requeue``: Slurm kills the attempt and
starts it again; the second attempt resumes from the checkpoint at step 20 and runs to step 60. Then
``fleetdx goodput DIR --job ID --json`` must find two attempts, the steps run twice counted as lost work, a
recovery gap between them, and a ledger whose parts add up to its wall time, which runs from the first
process's start to Slurm's EndTime.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.slurmcluster import SlurmCluster, slurm_cluster, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(600)]

#: the STAND-IN training loop (synthesised: sleeps stand for the work)
PROGRAM = r"""
import sys, time
from pathlib import Path
from fleetdx.steps import StepTimer

work = Path(sys.argv[1])
ckpt = work / "checkpoint"
start = int(ckpt.read_text()) + 1 if ckpt.exists() else 0
with StepTimer(work / "steps", rank=0, world_size=1, sync="none") as timer:
    for n in range(start, 61):
        with timer.step(n):
            with timer.stage("data"):
                time.sleep(0.02)
            with timer.stage("forward"):
                time.sleep(0.18)
            if n % 10 == 0 and n > 0:
                with timer.stage("checkpoint"):
                    time.sleep(0.1)
                    ckpt.write_text(str(n))
        (work / "progress").write_text(str(n))
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    with slurm_cluster(nodes=1, gpus=1) as c:
        yield c


def _slurm_time(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()  # scontrol prints local time without a zone


def test_requeued_job_ledger_adds_up(cluster: SlurmCluster, tmp_path: Path) -> None:
    c = cluster
    work = tmp_path / "job"
    work.mkdir()
    work.chmod(0o777)
    (work / "train.py").write_text(PROGRAM)
    script = work / "job.sh"
    script.write_text(f"#!/bin/bash\nexec {sys.executable} {work / 'train.py'} {work}\n")
    script.chmod(0o755)
    job = c.run("sbatch", "--parsable", "--requeue", "-N1", "-o", str(work / "out.txt"), str(script)).stdout.strip()

    def progress() -> int:
        p = work / "progress"
        return int(p.read_text() or -1) if p.exists() else -1

    wait_for(lambda: progress() >= 25, 240, "the first attempt to pass step 25")
    c.run("scontrol", "requeue", job)

    def started_again() -> bool:  # Slurm holds a requeued job for a while (BeginTime): release it now
        if c.job_field(job, "JobState") == "PENDING":
            c.run("scontrol", "update", f"JobId={job}", "StartTime=now", check=False)
        return c.job_field(job, "JobState") in ("RUNNING", "COMPLETED") and c.job_field(job, "Restarts") != "0"

    wait_for(started_again, 240, "the requeued job to start again", every_s=2)
    assert c.wait_job(job, 300) == "COMPLETED", (work / "out.txt").read_text()
    steps = [json.loads(x)["step"] for x in (work / "steps" / "steps-rank-0.jsonl").read_text().splitlines()]
    restart = next(i for i in range(1, len(steps)) if steps[i] <= steps[i - 1])
    assert steps[restart] == 21 and steps[-1] == 60, steps  # resumed after the checkpoint of step 20

    res = subprocess.run(
        [sys.executable, "-m", "fleetdx", "goodput", str(work / "steps"), "--job", job, "--json"],
        env=c.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    led = json.loads(res.stdout)
    print(json.dumps(led, indent=1))
    assert [a["index"] for a in led["attempts"]] == [0, 1]
    a0, a1 = led["attempts"]
    assert a0["lost_steps"] == steps[restart - 1] - 20  # steps 21.. run twice
    assert led["badput_s"]["lost_work"] > 0 and a1["badput_s"]["recovery"] > 0 and a1["badput_s"]["startup"] > 0
    parts = led["productive_s"] + sum(led["badput_s"].values())
    assert parts == pytest.approx(led["wall_s"], abs=0.05)
    end = _slurm_time(c.job_field(job, "EndTime"))
    assert led["end_unix_s"] == pytest.approx(end, abs=0.01)
    assert led["start_unix_s"] <= a0["first_step_unix_s"]
    assert led["productive_s"] > 0.5 * 61 * 0.18  # the kept steps' forward time at least
