"""A real, throwaway Slurm 22.05 cluster on this machine for the tests marked ``slurm``.

:func:`slurm_cluster` runs ``.ci/slurm-cluster.sh start DIR`` (its own munged, slurmctld and N slurmd, each
slurmd in its own UTS namespace so that node ``simK``'s programs see hostname ``simK``; GPUs declared through
gres.conf over character-device STAND-INS: Slurm counts them, nothing behind them is a GPU) and, at the end,
``.ci/slurm-cluster.sh stop DIR``, which stops every daemon by the PID it recorded. Where Slurm is not installed
or cannot start (not root, no ``unshare``), the test is skipped with the reason; nothing is ever faked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "slurm-cluster.sh"


@dataclass
class SlurmCluster:
    """A running cluster: ``dir`` holds its configuration, logs and PID list; ``env`` is this process's
    environment with ``SLURM_CONF`` pointing at it; ``nodes`` the node names (``sim1``...)."""

    dir: Path
    env: dict[str, str]
    nodes: list[str]

    def run(self, *argv: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (``scontrol``, ``sbatch``...) against this cluster."""
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, check=check)

    def pids(self) -> dict[str, int]:
        """Daemon name (``munged``, ``slurmctld``, ``slurmd-sim1``...) -> PID, as ``start`` recorded them."""
        out: dict[str, int] = {}
        for line in (self.dir / "pids").read_text().splitlines():
            name, _, pid = line.partition(" ")
            out[name] = int(pid)
        return out

    def job_field(self, job_id: str, field: str) -> str:
        """One ``Key=Value`` field of ``scontrol show job -o JOB``."""
        text = self.run("scontrol", "show", "job", "-o", job_id).stdout
        for word in text.split():
            key, _, value = word.partition("=")
            if key == field:
                return value
        raise KeyError(f"{field} not in scontrol show job {job_id}: {text}")

    def node_field(self, node: str, field: str) -> str:
        """One field of ``scontrol show node -o NODE``; ``Reason`` is its text without ``[user@time]``."""
        text = self.run("scontrol", "show", "node", "-o", node).stdout
        if field == "Reason":
            m = re.search(r" Reason=(.*?) \[[^\]]*\]", text)
            if m is None:
                raise KeyError(f"no Reason in scontrol show node {node}: {text}")
            return m.group(1)
        for word in text.split():
            key, _, value = word.partition("=")
            if key == field:
                return value
        raise KeyError(f"{field} not in scontrol show node {node}: {text}")

    def wait_job(self, job_id: str, timeout_s: float) -> str:
        """Wait until job ``job_id`` has ended; return its final ``JobState``."""
        ended = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"}
        state = ""

        def done() -> bool:
            nonlocal state
            state = self.job_field(job_id, "JobState")
            return state in ended

        try:
            wait_for(done, timeout_s, f"job {job_id} to end")
        except AssertionError as e:
            raise AssertionError(f"{e} (last JobState {state})\n{self.evidence(job_id)}") from None
        return state

    def evidence(self, job_id: str, lines: int = 60) -> str:
        """What Slurm says of ``job_id`` and its nodes, and the tail of slurmctld's log, for a failed wait."""
        show = [
            self.run("scontrol", "show", "job", "-o", job_id, check=False),
            self.run("scontrol", "show", "steps", "-o", job_id, check=False),
            self.run("sinfo", "-N", "-o", "%N %T %E", check=False),
        ]
        out = [f"$ {' '.join(r.args)}\n{r.stdout.strip()}{r.stderr.strip()}" for r in show]
        for f in [self.dir / "log" / "slurmctld.log", *sorted((self.dir / "log").glob("slurmd-*.log"))]:
            text = f.read_text(errors="replace").splitlines() if f.exists() else ["(none)"]
            out.append(f"--- {f.name} (last {lines} of {len(text)} lines):\n" + "\n".join(text[-lines:]))
        return "\n".join(out)

    def job_known(self, job_id: str) -> bool:
        """Whether slurmctld still has a record of ``job_id`` (``scontrol show job`` answers it); false once
        the job is purged (``MinJobAge``) and ``scontrol`` says ``Invalid job id specified``."""
        res = self.run("scontrol", "show", "job", "-o", job_id, check=False)
        if res.returncode == 0 and f"JobId={job_id} " in res.stdout:
            return True
        if "Invalid job id" in res.stderr:
            return False
        raise AssertionError(f"scontrol show job {job_id}: exit {res.returncode}: {res.stderr.strip()}")


def wait_for(cond: Callable[[], bool], timeout_s: float, what: str, every_s: float = 0.3) -> None:
    """Poll ``cond`` until true; fail the test naming ``what`` after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def skip_reason() -> str | None:
    """Why a Slurm cluster cannot be started here, ``None`` when it can be tried."""
    missing = [p for p in ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "unshare") if not shutil.which(p)]
    if missing:
        return f"not installed: {', '.join(missing)} (bash .ci/slurm-cluster.sh install: slurm-wlm, munge)"
    if os.geteuid() != 0:
        return "starting slurmd (and munged as user munge) needs root"
    return None


@contextmanager
def slurm_cluster(
    *,
    nodes: int = 4,
    prefix: str = "sim",
    gpus: int = 8,
    extra_conf: str = "",
    topology_conf: str | None = None,
    slurmd_path: str | None = None,
    slurmd_env: Mapping[str, str] | None = None,
    min_job_age_s: int | None = None,
) -> Iterator[SlurmCluster]:
    """Start a cluster (see the module doc), yield it, stop it by PID. ``extra_conf``: lines for slurm.conf
    (``Prolog=``...); ``topology_conf``: the topology.conf to load (default: one switch over all nodes);
    ``slurmd_path``: slurmd's PATH (so its prolog's and epilog's); ``slurmd_env``: more variables for slurmd;
    ``min_job_age_s``: slurm.conf ``MinJobAge`` (default Slurm's 300 s): how soon slurmctld forgets a finished
    job (no accounting here, so then nothing knows it; slurmctld purges about once a minute).
    Skips the test when Slurm cannot be installed or started, with the reason."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    d = Path(tempfile.mkdtemp(prefix="fleetdx-slurm-", dir="/tmp"))  # user munge must reach its socket
    d.chmod(0o755)
    if extra_conf:
        (d / "slurm.conf.extra").write_text(extra_conf.strip() + "\n")
    if topology_conf is not None:
        (d / "topology.conf").write_text(topology_conf)
    env = {**os.environ, "SIM_NODES": str(nodes), "SIM_PREFIX": prefix, "SIM_GPUS": str(gpus)}
    if slurmd_path:
        env["SLURMD_PATH"] = slurmd_path
    if min_job_age_s is not None:
        env["SIM_MIN_JOB_AGE"] = str(min_job_age_s)
    if slurmd_env:
        env["SLURMD_ENV"] = " ".join(f"{k}={v}" for k, v in slurmd_env.items())
    started = subprocess.run(
        ["bash", str(SCRIPT), "start", str(d)], env=env, capture_output=True, text=True, timeout=120
    )
    if started.returncode != 0:
        shutil.rmtree(d, ignore_errors=True)
        pytest.skip(f"Slurm could not start here: {started.stderr.strip().splitlines()[-1:]}")
    cluster_env = {**os.environ, "SLURM_CONF": str(d / "slurm.conf")}
    try:
        yield SlurmCluster(dir=d, env=cluster_env, nodes=[f"{prefix}{i}" for i in range(1, nodes + 1)])
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(d)], env=env, capture_output=True, timeout=120)
        if os.environ.get("FLEETDX_KEEP_SLURM_DIR"):
            print(f"kept {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)
