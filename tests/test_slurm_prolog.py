"""slurm/prolog.sh and slurm/epilog.sh run by slurmd itself (``Prolog=``, ``PrologFlags=Alloc``, ``Epilog=``)
on a real Slurm 22.05 (tests/slurmcluster.py: four nodes sim1..sim4, one STAND-IN GPU each).

slurmd gives the scripts no PATH: fleetdx is called by the absolute path of the settings file installed beside
them (slurm/fleetdx-slurm.conf), which also sets the tools' PATH. The node's ``nvidia-smi`` is a STAND-IN
REPLAYING real bundles (tests/slurmreplay.py): the busy H100 (a foreign process on GPU0) on sim3, the idle one
elsewhere.

* A job of 3 nodes is first given sim[1-3]: sim3's prolog finds it CRITICAL and drains it with
  ``Reason="fleetdx: GPU_FOREIGN_PROCESS GPU0"``; Slurm requeues the job, which runs on sim[1-2,4].
* The epilog leaves one bundle per node of the job under its id.
* No verdict (fleetdx missing): fail-open starts the job and logs why; fail-closed drains the node.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurmcluster import SlurmCluster, slurm_cluster, wait_for
from tests.slurmreplay import install_node_scripts, write_replay_bin, write_settings

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(900)]

BUSY = "sim3"
REASON = "fleetdx: GPU_FOREIGN_PROCESS GPU0"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slurm-prolog")


@pytest.fixture(scope="module")
def cluster(work: Path) -> Iterator[SlurmCluster]:
    scripts = install_node_scripts(work, write_replay_bin(work, [BUSY]))
    extra = f"""
Prolog={scripts / "prolog.sh"}
PrologFlags=Alloc
PrologEpilogTimeout=300
Epilog={scripts / "epilog.sh"}
SchedulerParameters=nohold_on_prolog_fail
"""
    with slurm_cluster(nodes=4, gpus=1, extra_conf=extra) as c:
        yield c


def _log(work: Path) -> str:
    path = work / "fleetdx-log" / "prolog.log"
    return path.read_text() if path.exists() else ""


def test_prolog_drains_the_busy_node_with_the_fleetdx_reason(cluster: SlurmCluster, work: Path) -> None:
    c = cluster
    out = work / "job-%j.out"
    job = c.run("sbatch", "--parsable", "-N3", "--gpus-per-node=1", "-o", str(out), "--wrap", "srun -l hostname")
    job_id = job.stdout.strip()
    assert c.wait_job(job_id, 600) == "COMPLETED"
    log = _log(work)
    print(f"--- prolog.log:\n{log}")
    assert c.node_field(BUSY, "Reason") == REASON
    assert "DRAIN" in c.node_field(BUSY, "State")
    assert c.job_field(job_id, "NodeList") == "sim[1-2,4]"
    ran = sorted(line.split(": ", 1)[1] for line in Path(str(out).replace("%j", job_id)).read_text().splitlines())
    assert ran == ["sim1", "sim2", "sim4"]
    assert re.search(rf"job {job_id} on {BUSY}: CRITICAL in [\d.]+ s: GPU_FOREIGN_PROCESS GPU0; draining", log)
    for node in ("sim1", "sim2", "sim4"):
        assert re.search(rf"job {job_id} on {node}: (OK|WARNING) in [\d.]+ s", log), node
    took = [float(t) for t in re.findall(r": (?:OK|WARNING|CRITICAL) in ([\d.]+) s", log)]
    print(f"prolog pre-flight times (s): {took}")

    # the epilog: one bundle per node that ran the job, under the job id
    folder = work / "bundles" / job_id
    wait_for(lambda: all((folder / n / "meta.json").is_file() for n in ("sim1", "sim2", "sim4")), 180, "bundles")
    assert {"sim1", "sim2", "sim4"} <= {p.name for p in folder.iterdir()}
    c.run("scontrol", "update", f"NodeName={BUSY}", "State=RESUME")


@pytest.mark.parametrize("mode", ["open", "closed"])
def test_no_verdict_fail_open_or_closed(cluster: SlurmCluster, work: Path, mode: str) -> None:
    c = cluster
    d, replay = work / "slurm.d", work / "replay-bin"
    write_settings(d, work, replay, on_error=mode, fleetdx="/nonexistent/fleetdx")
    try:
        job = c.run("sbatch", "--parsable", "-N1", "-w", "sim4", "-o", "/dev/null", "--wrap", "true").stdout.strip()
        if mode == "open":
            assert c.wait_job(job, 300) == "COMPLETED"
            assert re.search(rf"job {job} on sim4: no verdict \(FLEETDX=/nonexistent/fleetdx .*fail-open", _log(work))
        else:
            wait_for(lambda: "DRAIN" in c.node_field("sim4", "State"), 300, "sim4 drained")
            assert c.node_field("sim4", "Reason").startswith("fleetdx: no verdict (FLEETDX=/nonexistent/fleetdx")
            assert re.search(rf"job {job} on sim4: no verdict .*fail-closed, draining", _log(work))
            c.run("scancel", job)
    finally:
        write_settings(d, work, replay)
        c.run("scontrol", "update", "NodeName=sim4", "State=RESUME", check=False)
