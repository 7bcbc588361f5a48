"""End to end on a real Slurm (tests/slurmcluster.py: four slurmd on this machine, each with its own hostname):
a batch job whose rank 5 dies on SIGSEGV ends; ``fleetdx postmortem --job ID --logs slurm-ID.out`` names that
rank and its node, from the job's own output (``srun -l`` task ids mapped to ranks by the ``N: [rankR]:``
lines the job printed) and the job model Slurm gives for the id."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurmcluster import slurm_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(300)]

PROGRAM = """
import os, signal, socket, time
r = int(os.environ["SLURM_PROCID"])
print(f"[rank{r}]: host {socket.gethostname()} step 1", flush=True)
time.sleep(2)
if r == 5:
    os.kill(os.getpid(), signal.SIGSEGV)
time.sleep(60)
"""


def test_a_segfaulting_rank_is_named_with_its_node(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    (out / "prog.py").write_text(PROGRAM)
    script = out / "job.sh"
    script.write_text(f"#!/bin/bash\nsrun -l --kill-on-bad-exit=1 {sys.executable} {out / 'prog.py'}\n")
    with slurm_cluster(nodes=4, gpus=1) as c:
        sub = c.run("sbatch", "--parsable", "-N4", "--ntasks-per-node=2", f"--output={out}/slurm-%j.out", str(script))
        job_id = sub.stdout.strip().split(";")[0]
        state = c.wait_job(job_id, 120)
        assert state == "FAILED", (out / f"slurm-{job_id}.out").read_text()
        log = out / f"slurm-{job_id}.out"
        res = subprocess.run(
            [sys.executable, "-m", "fleetdx", "postmortem", "--job", job_id, "--logs", str(log), "--json"],
            env=c.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert res.returncode == 2, res.stderr + log.read_text()
    doc = json.loads(res.stdout)
    assert doc["job"]["job_id"] == job_id and doc["job"]["state"] == "FAILED"
    assert doc["job"]["nodes"] == ["sim1", "sim2", "sim3", "sim4"]
    first = doc["causes"][0]
    assert (first["code"], first["rank"], first["host"]) == ("PROCESS_CRASH", 5, "sim3"), log.read_text()
    assert "Segmentation fault" in first["evidence"][0]["text"]
