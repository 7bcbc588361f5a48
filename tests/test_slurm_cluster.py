"""The throwaway Slurm of the ``slurm`` tests (tests/slurmcluster.py, .ci/slurm-cluster.sh) is real and loads
what fleetdx writes for it.

* Four slurmd, each in its own UTS namespace: a job step on ``simK`` sees hostname ``simK``; the GPUs are
  STAND-INS (gres.conf over character devices): Slurm hands out ``CUDA_VISIBLE_DEVICES``, nothing behind it.
* ``fleetdx topo slurm-conf`` output is the topology.conf slurmctld loads (``scontrol show topology``) and
  schedules by (``sbatch --switches=1`` lands under one leaf).
* Every daemon the fixture started is gone after it stops them by PID.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.slurmcluster import slurm_cluster, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(300)]

FIX = Path(__file__).parent / "fixtures"


def test_four_nodes_with_distinct_hostnames_and_standin_gpus() -> None:
    with slurm_cluster(nodes=4, gpus=8) as c:
        pids = c.pids()
        r = c.run(
            "srun",
            "-N4",
            "--ntasks-per-node=1",
            "--gpus-per-node=8",
            "-l",
            "sh",
            "-c",
            "echo $(hostname) $CUDA_VISIBLE_DEVICES",
        )
        seen = sorted(line.split(": ", 1)[1] for line in r.stdout.splitlines())
        assert seen == [f"sim{i} 0,1,2,3,4,5,6,7" for i in range(1, 5)]
        bad = c.run("srun", "-N1", "--gpus-per-node=9", "true", check=False)
        assert bad.returncode != 0  # only 8 (stand-in) GPUs are declared per node
    assert set(pids) == {"munged", "slurmctld", "slurmd-sim1", "slurmd-sim2", "slurmd-sim3", "slurmd-sim4"}
    assert [n for n, pid in pids.items() if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"] == []


def test_fleetdx_topology_conf_loads_in_slurmctld() -> None:
    switchmap = FIX / "topology" / "switchmap.yaml"  # leaf1 = gpu[001-004], leaf2 = gpu[005-008], spine1 over both
    conf = subprocess.run(
        [sys.executable, "-m", "fleetdx", "topo", "slurm-conf", str(switchmap)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    with slurm_cluster(nodes=8, prefix="gpu00", gpus=1, topology_conf=conf) as c:
        topo = c.run("scontrol", "show", "topology").stdout
        lines = {ln.split()[0]: ln for ln in topo.splitlines() if ln.startswith("SwitchName=")}
        assert set(lines) == {"SwitchName=leaf1", "SwitchName=leaf2", "SwitchName=spine1"}
        assert "Nodes=gpu[001-004]" in lines["SwitchName=leaf1"]
        assert "Nodes=gpu[005-008]" in lines["SwitchName=leaf2"]
        assert "Switches=leaf[1-2]" in lines["SwitchName=spine1"]
        # the scheduler uses it: 4 nodes under one switch can only be one whole leaf
        job = c.run(
            "sbatch", "--parsable", "-N4", "--switches=1", "-o", "/dev/null", "--wrap", "sleep 30"
        ).stdout.strip()
        wait_for(lambda: c.job_field(job, "JobState") == "RUNNING", 60, f"job {job} to run")
        assert c.job_field(job, "NodeList") in ("gpu[001-004]", "gpu[005-008]")
        c.run("scancel", job)
