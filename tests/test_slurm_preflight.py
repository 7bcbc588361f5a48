"""slurm/preflight.sbatch on a real Slurm 22.05 (tests/slurmcluster.py: slurmctld and five slurmd on this
machine, each node its own hostname sim1..sim5, one STAND-IN GPU each through gres.conf).

* ``sbatch -N3 ... slurm/preflight.sbatch srun ... python train_allreduce.py``: fleetdx starts Ray on the
  allocation itself, and finds sim3 CRITICAL: its ``nvidia-smi`` is a STAND-IN REPLAYING the real busy-H100
  bundle (a foreign process holds GPU0; tests/slurmreplay.py), the others replay the idle H100. The job exits 2
  without training and resubmits itself without sim3, with the options given on the sbatch command line; the
  resubmitted job's pre-flight passes and its training step (a real gloo all-reduce over the 3 nodes) runs.
* The epilog (slurm/epilog.sh) leaves one bundle per node under the job id.
* Ray's output goes to FLEETDX_RAY_LOG_DIR (the script's ``fleetdx-JOBID/ray``), not the job's output.
* A node whose slurmd hangs (SIGSTOP) never joins Ray: NODE_UNREACHABLE "did not join Ray within 60 s".

Deadlines are generous (a loaded 2-core machine); nothing here asserts a duration.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import hostlist
import pytest

from tests.slurmcluster import ROOT, SlurmCluster, slurm_cluster, wait_for
from tests.slurmreplay import FLEETDX, VENV_BIN, free_port, install_node_scripts, write_replay_bin

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(1500)]

SBATCH = ROOT / "slurm" / "preflight.sbatch"
TRAIN = Path(__file__).parent / "fixtures" / "slurm" / "train_allreduce.py"
BUSY = "sim3"
JOB_S = 900  # a job's deadline here: three Ray nodes start on a 2-core machine shared with other work
#: the join deadline of the never-joins case: the Ray head and the node that does join must be up within it on a
#: loaded machine (20 s was too short at load average 8: "the Ray head ... was not up within the join deadline")
JOIN_S = 60


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slurm-preflight")


@pytest.fixture(scope="module")
def cluster(work: Path) -> Iterator[SlurmCluster]:
    replay = write_replay_bin(work, [BUSY])
    scripts = install_node_scripts(work, replay)
    with slurm_cluster(nodes=5, gpus=1, extra_conf=f"Epilog={scripts / 'epilog.sh'}") as c:
        c.env.update(
            PATH=f"{replay}:{VENV_BIN}:{os.environ['PATH']}",
            FLEETDX=str(FLEETDX),
            FLEETDX_DB_URL=f"sqlite:///{work / 'fleetdx.db'}",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(free_port()),
            GLOO_SOCKET_IFNAME="lo",
            # three Ray nodes starting at once on two shared cores: Ray gives each raylet 30 s to register, and
            # fleetdx starts a worker again when it gives up, so the join deadline is generous
            FLEETDX_PREFLIGHT_ARGS="--join-timeout 400",
        )
        yield c


def _critical(report: dict) -> list[tuple[str, list[str], str]]:  # type: ignore[type-arg]
    return [(f["code"], f["nodes"], f["subject"]) for f in report["findings"] if f["severity"] == "critical"]


def test_busy_node_excluded_resubmitted_with_original_options_and_trains(cluster: SlurmCluster, work: Path) -> None:
    c = cluster
    out = work / "out"
    out.mkdir()
    submit = ["sbatch", "--parsable", "-N3", "--gpus-per-node=1", "--time=30", f"--chdir={out}"]
    submit += ["-o", f"{out}/slurm-%j.out", str(SBATCH), "srun", "--ntasks-per-node=1", sys.executable, str(TRAIN)]
    first = c.run(*submit).stdout.strip()
    assert c.wait_job(first, JOB_S) == "FAILED"
    log1 = (out / f"slurm-{first}.out").read_text()
    print(f"--- job {first} ({c.job_field(first, 'NodeList')}) output:\n{log1}")
    assert c.job_field(first, "NodeList") == "sim[1-3]"  # the busy sim3 is in the first allocation
    assert c.job_field(first, "ExitCode") == "2:0"  # the documented CRITICAL code, not set -e's 1
    report = json.loads((out / f"fleetdx-{first}" / "preflight.json").read_text())
    if "Raylet is terminated. Termination is unexpected" in log1 and any(
        code == "NODE_UNREACHABLE" for code, _, _ in _critical(report)
    ):
        # Ray's own raylet died on this shared 2-core sandbox (its "Raylet is terminated" report is in the job's
        # output): fleetdx rightly called that node unreachable and excluded it too, so this run cannot judge the
        # resubmission; the next job it submitted is cancelled and the case is skipped, never passed
        if m := re.search(r"Submitted batch job (\d+)", log1):
            c.run("scancel", m.group(1), check=False)
        pytest.skip("a Ray raylet died during the allocation's pre-flight (the sandbox, not fleetdx): see the output")
    assert _critical(report) == [("GPU_FOREIGN_PROCESS", [BUSY], "GPU0")]
    assert report["exclude"] == BUSY
    assert "did not join" not in log1 and "train: rank" not in log1  # every node joined; no training here
    assert re.search(r"Ray on the allocation .*: 3/3 nodes joined", log1)

    m = re.search(r"Submitted batch job (\d+)", log1)
    assert m, log1
    second = m.group(1)
    assert c.wait_job(second, JOB_S) == "COMPLETED"
    log2 = (out / f"slurm-{second}.out").read_text()
    print(f"--- job {second} ({c.job_field(second, 'NodeList')}) output:\n{log2}")
    # the options given on the command line survive the resubmit, and sim3 is left out
    assert c.job_field(second, "NumNodes") == "3"
    assert c.job_field(second, "TimeLimit") == "00:30:00"
    assert c.job_field(second, "TresPerNode") == "gres:gpu:1"
    assert c.job_field(second, "WorkDir") == str(out)
    assert c.job_field(second, "ExcNodeList") == BUSY
    # which three of the other nodes Slurm picks depends on which were still completing a step (a loaded machine)
    nodes = hostlist.expand_hostlist(c.job_field(second, "NodeList"))
    assert len(nodes) == 3 and BUSY not in nodes, nodes
    report2 = json.loads((out / f"fleetdx-{second}" / "preflight.json").read_text())
    assert _critical(report2) == [] and report2["exit_code"] in (0, 1)
    # Ray's output went to the job's Ray log folder, not the job's output (issue 21 item 8)
    assert "(raylet)" not in log2 and "Raylet is terminated" not in log2
    ray_logs = out / f"fleetdx-{second}" / "ray"
    assert f"its output in {ray_logs}" in log2
    assert (ray_logs / "driver.log").is_file()
    assert {p.name.split(".")[0] for p in ray_logs.glob("sim*.log")} == set(nodes)
    ranks = sorted(re.findall(r"train: rank (\d)/3 on (sim\d): all_reduce sum 6 \(want 6\)", log2))
    assert ranks == [(str(i), n) for i, n in enumerate(sorted(nodes))]

    # the epilog: one bundle per node of each job, under its job id
    for job, on in ((first, ["sim1", "sim2", "sim3"]), (second, sorted(nodes))):
        folder = work / "bundles" / job
        metas = [folder / n / "meta.json" for n in on]
        wait_for(lambda metas=metas: all(m.is_file() for m in metas), 180, f"the epilog's bundles of job {job}")
        assert sorted(p.name for p in folder.iterdir()) == on
        assert [json.loads(m.read_text())["host"] for m in metas] == on


def test_node_that_never_joins_ray_is_unreachable(cluster: SlurmCluster, work: Path) -> None:
    """sim5's slurmd is stopped (SIGSTOP: a hung node daemon) after the job is allocated: its Ray worker step
    never starts, and fleetdx reports it by the join deadline instead of waiting forever.

    The batch script holds after the pre-flight until slurmd is continued: the job's end then reaches a running
    slurmd. Ended while it is stopped, slurmctld's kill of the job fails, sim5 is marked not responding, and the
    kill is sent again only once a ping (every SlurmdTimeout/3, 100 s) has found it back and the next purge pass
    runs ``re_kill_job`` (src/slurmctld/node_scheduler.c, job_mgr.c ``_list_find_job_old``): minutes of Slurm's
    own recovery that CI saw run past a 300 s wait."""
    c = cluster
    run = work / "nojoin"
    run.mkdir()
    go, done, release = run / "go", run / "done", run / "release"
    script = run / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"while [ ! -e {go} ]; do sleep 0.2; done\n"
        f"{FLEETDX} preflight --level quick --join-timeout {JOIN_S} --no-save --json > {run}/preflight.json\n"
        f"echo $? > {done}\n"
        f"while [ ! -e {release} ]; do sleep 0.2; done\n"
    )
    job = c.run("sbatch", "--parsable", "-N2", "-w", "sim4,sim5", "-o", f"{run}/slurm-%j.out", str(script)).stdout
    job = job.strip()
    slurmd = c.pids()["slurmd-sim5"]
    try:
        wait_for(lambda: c.job_field(job, "JobState") == "RUNNING", 120, f"job {job} to run")
        os.kill(slurmd, signal.SIGSTOP)
        go.touch()
        wait_for(done.is_file, 300, "the pre-flight to finish")
    finally:
        os.kill(slurmd, signal.SIGCONT)
        release.touch()
    print((run / f"slurm-{job}.out").read_text())
    assert done.read_text().strip() == "2"
    report = json.loads((run / "preflight.json").read_text())
    lost = [f for f in report["findings"] if f["code"] == "NODE_UNREACHABLE"]
    assert [f["nodes"] for f in lost] == [["sim5"]]
    assert f"did not join Ray within {JOIN_S} s" in lost[0]["message"]
    assert {n["host"]: n["verdict"] for n in report["nodes"]}["sim5"] in ("CRITICAL", 2)
    c.wait_job(job, 300)
