"""End to end on a real Slurm (tests/slurmcluster.py: four slurmd on this machine, each with its own hostname):
a batch job whose rank 5 dies on SIGSEGV ends; ``fleetdx postmortem --job ID --logs slurm-ID.out`` names that
rank and its node, from the job's own output (``srun -l`` task ids mapped to ranks by the ``N: [rankR]:``
lines the job printed) and the job model Slurm gives for the id; given sim3's bundle, whose kernel log is a
stand-in replaying a real XID 79 capture, the lost GPU of sim3 is named first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurmcluster import slurm_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(300)]

FIX = Path(__file__).parent / "fixtures" / "joblogs"
XID79 = "05_dmesg-aer-surprise-down-then-xid79_gpu-burn.log"

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
        argv = [sys.executable, "-m", "fleetdx", "postmortem", "--job", job_id, "--logs", str(log), "--json"]
        res = subprocess.run(argv, env=c.env, capture_output=True, text=True, timeout=120)
        # sim3's bundle: a STAND-IN kernel log replaying the real XID 79 capture of tests/fixtures/joblogs/05
        standin = tmp_path / "bundles" / "sim3"
        standin.mkdir(parents=True)
        (standin / "dmesg.txt").write_text((FIX / XID79).read_text())
        with_kernel = subprocess.run(
            [*argv, "--bundles", str(standin)], env=c.env, capture_output=True, text=True, timeout=120
        )
    assert res.returncode == 2, res.stderr + log.read_text()
    doc = json.loads(res.stdout)
    assert doc["job"]["job_id"] == job_id and doc["job"]["state"] == "FAILED"
    assert doc["job"]["nodes"] == ["sim1", "sim2", "sim3", "sim4"]
    first = doc["causes"][0]
    assert (first["code"], first["rank"], first["nodes"][:1]) == ("PROCESS_CRASH", 5, ["sim3"]), log.read_text()
    assert "Segmentation fault" in first["evidence"][0]["text"]
    # with the node's kernel log the lost GPU of sim3 comes first, the crash of its rank 5 after it
    doc = json.loads(with_kernel.stdout)
    got = [(c["code"], c["rank"], (c["nodes"] or [None])[0]) for c in doc["causes"][:2]]
    assert got == [("GPU_HW_FAULT", None, "sim3"), ("PROCESS_CRASH", 5, "sim3")]
    assert doc["causes"][0]["evidence"][0]["text"].endswith("79, GPU has fallen off the bus.")
