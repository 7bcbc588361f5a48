"""``sbatch $(fleetdx place --nodes 2 --gpus-per-node 1 --slurm-args) job.sh`` on a real Slurm: the job lands on
the advised nodes, a drained node is never advised, and a node the store holds as CRITICAL is left out.

The cluster is a throwaway Slurm (Debian slurm-wlm, PLATFORM.md "Slurm") started by this module: slurmctld and
four slurmd in their own UTS namespaces (hostnames pl1..pl4), 8 GRES GPUs each backed by character-device
stand-ins (no GPU exists; Slurm only counts them), ``TopologyPlugin=topology/tree`` with leaf ``leaf1`` =
pl[1-2] and leaf ``leaf2`` = pl[3-4] under a spine. Skipped without slurm-wlm, munge or root.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdx.orchestrator.report import RunKind, assemble_report
from fleetdx.orchestrator.store import Store
from fleetdx.probes.contracts import Finding, FindingCode, Level, Severity

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

NODES = ["pl1", "pl2", "pl3", "pl4"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _munge_ok() -> bool:
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=10, check=True).stdout
        subprocess.run(["unmunge"], input=cred, capture_output=True, timeout=10, check=True)
        return True
    except (OSError, subprocess.SubprocessError):
        return False


def _wait(cond, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    if shutil.which("slurmctld") is None or shutil.which("slurmd") is None or shutil.which("munged") is None:
        pytest.skip("slurm-wlm and munge are not installed (apt-get install -y slurm-wlm munge)")
    if os.geteuid() != 0:
        pytest.skip("starting slurmd needs root")
    procs: list[subprocess.Popen[bytes]] = []
    if not _munge_ok():
        Path("/run/munge").mkdir(exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        procs.append(subprocess.Popen(["runuser", "-u", "munge", "--", "munged", "--foreground"]))
        _wait(_munge_ok, 15, "munged")
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "log", "dev", *(f"spool/{n}" for n in NODES)):
        (d / sub).mkdir(parents=True)
    for i in range(8):
        subprocess.run(["mknod", str(d / "dev" / f"nvidia{i}"), "c", "1", "3"], check=True)
    host = socket.gethostname()
    lines = [
        "ClusterName=fleetdxplace",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/slurmctld.pid",
        f"SlurmdPidFile={d}/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log",
        f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "TopologyPlugin=topology/tree",
        "GresTypes=gpu",
        "MpiDefault=none",
    ]
    lines += [
        f"NodeName={n} NodeHostname={n} NodeAddr=127.0.0.1 Port={_free_port()} CPUs=2 RealMemory=500 Gres=gpu:8"
        for n in NODES
    ]
    lines.append("PartitionName=gpu Nodes=pl[1-4] Default=YES MaxTime=INFINITE State=UP")
    (d / "slurm.conf").write_text("\n".join(lines) + "\n")
    (d / "gres.conf").write_text(f"Name=gpu File={d}/dev/nvidia[0-7]\n")
    tree = ["SwitchName=leaf1 Nodes=pl[1-2]", "SwitchName=leaf2 Nodes=pl[3-4]", "SwitchName=spine Switches=leaf[1-2]"]
    (d / "topology.conf").write_text("\n".join(tree) + "\n")
    env = {**os.environ, "SLURM_CONF": str(d / "slurm.conf")}
    try:
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        procs.append(subprocess.Popen(["slurmctld", "-D"], env=env, **quiet))
        for n in NODES:
            cmd = f"hostname {n} && exec slurmd -D -N {n}"
            procs.append(
                subprocess.Popen(["unshare", "--uts", "sh", "-c", cmd], env=env, **quiet)
            )

        def all_idle() -> bool:
            r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=env, capture_output=True, text=True)
            return r.returncode == 0 and r.stdout.count(" idle") == len(NODES)

        _wait(all_idle, 60, "four idle Slurm nodes")
        subprocess.run(
            ["scontrol", "update", "NodeName=pl2", "State=DRAIN", "Reason=fleetdx test: drained"], env=env, check=True
        )
        yield env
    finally:
        subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True)

        def no_jobs() -> bool:
            q = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True)
            return q.returncode != 0 or not q.stdout.strip()

        try:
            _wait(no_jobs, 30, "the cancelled jobs to end")
        except AssertionError:
            pass  # the daemons go anyway; their job steps are swept below
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        _kill_steps(str(d / "slurm.conf"))


def _kill_steps(conf: str) -> None:
    """SIGKILL the job-step daemons (slurmstepd) this cluster left behind: found by their SLURM_CONF, by pid."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            name = (proc / "comm").read_text().strip()
        except OSError:
            continue
        if name == "slurmstepd" and f"SLURM_CONF={conf}".encode() in environ:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _place(env: dict[str, str], db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetdx", "place", "--nodes", "2", "--gpus-per-node", "1", "--slurm-args", "--db", db],
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

    _wait(running, 60, f"job {job_id} to run")
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
