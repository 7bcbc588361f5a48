"""``sbatch $(fleetdx place --node-count 2 --gpus-per-node 1 --slurm-args) job.sh`` on a real Slurm: the job lands on
the advised nodes, a drained node is never advised, and a node the store holds as CRITICAL is left out.

The cluster is the shared throwaway Slurm 22.05 of ``tests/slurmcluster.py`` (``.ci/slurm-cluster.sh``: its own
munged, slurmctld and four slurmd in their own UTS namespaces, hostnames pl1..pl4, 8 GRES GPUs each over
character-device STAND-INS: Slurm counts them, no GPU exists), with ``TopologyPlugin=topology/tree`` and the
tree leaf1 = pl[1-2], leaf2 = pl[3-4] under a spine. Skipped, with the reason, where Slurm cannot start.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import RunKind, assemble_report
from fleetdx.orchestrator.store import Store
from fleetdx.probes.contracts import Level, Severity
from tests.slurmcluster import SlurmCluster, slurm_cluster, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

TREE = "SwitchName=leaf1 Nodes=pl[1-2]\nSwitchName=leaf2 Nodes=pl[3-4]\nSwitchName=spine Switches=leaf[1-2]\n"


@pytest.fixture(scope="module")
def slurm() -> Iterator[dict[str, str]]:
    with slurm_cluster(nodes=4, prefix="pl", topology_conf=TREE) as cluster:
        cluster.run("scontrol", "update", "NodeName=pl2", "State=DRAIN", "Reason=fleetdx test: drained")
        try:
            yield cluster.env
        finally:
            _end_jobs(cluster)


def _end_jobs(cluster: SlurmCluster) -> None:
    """Cancel the jobs and wait for them to end before the harness stops the daemons; SIGKILL, by pid, any job
    step daemon (slurmstepd) of this cluster still there (one outlived slurmd once and stayed behind)."""
    cluster.run("scancel", "--full", "-u", "root", check=False)
    try:
        wait_for(lambda: not cluster.run("squeue", "-h", check=False).stdout.strip(), 30, "cancelled jobs to end")
    except AssertionError:
        pass
    conf = f"SLURM_CONF={cluster.env['SLURM_CONF']}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            name = (proc / "comm").read_text().strip()
        except OSError:
            continue
        if name == "slurmstepd" and conf in environ:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _place(env: dict[str, str], db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetdx", "place", "-N", "2", "--gpus-per-node", "1", "--slurm-args", "--db", db],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _submit_and_locate(env: dict[str, str], args: list[str], tmp: Path) -> list[str]:
    job = tmp / "job.sh"
    job.write_text("#!/bin/sh\nsleep 30\n")
    r = subprocess.run(
        ["sbatch", "--parsable", *args, "--gpus-per-node=1", "-o", "/dev/null", str(job)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    job_id = r.stdout.strip().split(";")[0]
    nodes: list[str] = []

    def running() -> bool:
        q = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T %N"], env=env, capture_output=True, text=True)
        state, _, nodelist = q.stdout.strip().partition(" ")
        if state == "RUNNING":
            out = subprocess.run(["scontrol", "show", "hostnames", nodelist], env=env, capture_output=True, text=True)
            nodes.extend(out.stdout.split())
            return True
        return False

    wait_for(running, 60, f"job {job_id} to run")
    subprocess.run(["scancel", job_id], env=env, check=True)
    return nodes


def test_sbatch_lands_on_the_advised_nodes(slurm: dict[str, str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'fleetdx.db'}"
    r = _place(slurm, db)
    assert r.returncode == 0, r.stderr
    args = r.stdout.split()
    # pl2 is drained: leaf1 has one usable node, leaf2 two: the job goes under leaf2, one switch
    assert args == ["--nodes=2", "--nodelist=pl[3-4]", "--exclude=pl2", "--switches=1"]
    assert _submit_and_locate(slurm, args, tmp_path) == ["pl3", "pl4"]

    # pl3 fails a pre-flight: it is left out, the job spans both leaves, never the drained pl2
    crit = Finding(
        code=FindingCode.GPU_FOREIGN_PROCESS,
        severity=Severity.CRITICAL,
        nodes=["pl3"],
        subject="GPU0",
        message="pid 1929 (python3) holds GPU0 with 19948 MiB (the h100-busy finding, re-addressed)",
    )
    with Store.open(db) as store:
        store.save_report(
            assemble_report(RunKind.PREFLIGHT, ["pl3", "pl4"], [crit], started_at=time.time(), level=Level.QUICK)
        )
    r = _place(slurm, db)
    assert r.returncode == 0, r.stderr
    args = r.stdout.split()
    assert args == ["--nodes=2", "--nodelist=pl[1,4]", "--exclude=pl[2-3]", "--switches=2"]
    assert sorted(_submit_and_locate(slurm, args, tmp_path)) == ["pl1", "pl4"]
