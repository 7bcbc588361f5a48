"""Ray brought up on a Slurm allocation by fleetdx, for one pre-flight, and taken down after it.

Inside an allocation of N nodes (``sbatch``/``salloc``: ``SLURM_JOB_ID`` set) and with no Ray address given,
``fleetdx preflight`` runs :func:`ray_on_allocation`:

1. the Ray head on this host (the batch host), ``ray start --head --block`` as a child process, on a free
   port, with its own ``--temp-dir`` (nothing of another Ray on the machine is read or touched);
2. once the head's GCS answers, one ``srun --overlap --nodes=1 --ntasks=1 -w HOST ray start --address=HEAD
   --block`` per other node. ``--overlap`` because the job's own steps must never wait for these (without
   it a later ``srun`` blocks silently while they run: ``../shared/PLATFORM.md`` "Slurm"). They keep the
   job's GPUs (``CUDA_VISIBLE_DEVICES``): the probes of level standard use them; the steps end before the
   training's;
3. polls ``ray.nodes()`` every :data:`JOIN_POLL_S` until every expected host has an alive Ray node, or the
   join deadline passes, or every missing host's ``srun`` has ended for good (no fixed sleep; a ``ray start``
   that gives up is launched again, at most :data:`WORKER_ATTEMPTS` times, while time is left, and only once
   Slurm no longer lists its previous step: never two ``ray start`` steps on one node). A host that
   has not joined is handed back as an UNREACHABLE outcome "did not join Ray within S s" (with the ``srun``
   exit status and last stderr line when it ended early), which the pre-flight reports as
   ``NODE_UNREACHABLE``;
4. on exit (normal or not): ``ray.shutdown()``, then SIGTERM to each ``srun`` (Slurm ends the step and every
   process in it) and to the head's ``ray start --block`` (which stops the Ray processes it started), SIGKILL
   after :data:`STOP_GRACE_S` to whatever of that process tree is left. Only what this module started is
   stopped; ``ray stop`` (every Ray process of the machine) is never used.

What Ray prints (each ``ray start``'s output, and what this driver hears from the cluster: "(raylet) Raylet is
terminated ..." blocks) goes to files in :func:`ray_log_dir` (``FLEETDX_RAY_LOG_DIR``, else
``$TMPDIR/fleetdx-ray-JOBID``), kept after Ray is stopped; the caller shows them when something failed.

Run it once per allocation (the batch script, or an ``salloc`` shell), not in each task of an ``srun`` step:
every copy would start its own Ray. The ``ray`` executable is the one beside this Python (``sys.executable``'s
folder), else ``ray`` on PATH; it must exist at the same path on every node (a shared virtualenv, as the job's
own Python). Ray 2.60's token authentication (``RAY_AUTH_MODE=token``): unless ``RAY_AUTH_TOKEN`` or
``RAY_AUTH_TOKEN_PATH`` is set, the allocation's Ray gets a token of its own (``RAY_AUTH_TOKEN``, random, passed
to every ``ray start`` and to the worker steps through srun's environment): ``ray start --head`` refuses to start
without one, and a token file in ``~/.ray`` would need a ``$HOME`` shared by the nodes.

``import ray`` happens inside the functions: the CLI must start fast.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetdx.orchestrator.cluster.connect import RayUnavailable, check_gcs, connect
from fleetdx.orchestrator.cluster.fanout import NodeOutcome, OutcomeKind, RayNode, match_hosts, ray_node_hosts
from fleetdx.probes.runner import Background, SubprocessRunner, stop_background

#: default deadline for every node of the allocation to join Ray, seconds (``ray start`` takes 3-10 s a node;
#: generous for a loaded machine)
JOIN_TIMEOUT_S = 120.0
#: seconds between two polls of ``ray.nodes()`` while waiting for nodes to join
JOIN_POLL_S = 0.25
#: how many times a worker node's ``ray start`` is launched when it exits before joining (Ray 2.60 gives a
#: raylet 30 s to register, and gives up: seen on a loaded machine); only while the join deadline allows
WORKER_ATTEMPTS = 3
#: a worker is launched again only with at least this many seconds left before the join deadline
RETRY_MIN_LEFT_S = 10.0
#: seconds a stopped process gets between SIGTERM and SIGKILL
STOP_GRACE_S = 15.0
#: how long a worker's retry waits for Slurm to forget the step of its previous attempt, seconds
STEP_GONE_S = 60.0
#: the variable that names the folder of Ray's output (:func:`ray_log_dir`)
LOG_DIR_VAR = "FLEETDX_RAY_LOG_DIR"


def ray_log_dir(env: Mapping[str, str]) -> Path:
    """The folder where Ray's output on the allocation goes: ``FLEETDX_RAY_LOG_DIR``, else
    ``$TMPDIR/fleetdx-ray-JOBID`` (created). Files: ``HOST.ATTEMPT.log`` per ``ray start`` (the head's on the
    batch host), ``driver.log`` what the pre-flight's Ray driver printed."""
    named = env.get(LOG_DIR_VAR)
    path = Path(named) if named else Path(tempfile.gettempdir()) / f"fleetdx-ray-{env.get('SLURM_JOB_ID', 'nojob')}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def in_allocation(env: Mapping[str, str]) -> bool:
    """True inside a Slurm allocation (``SLURM_JOB_ID`` and ``SLURM_JOB_NODELIST`` set) where ``srun``
    exists to start Ray on the other nodes."""
    return bool(env.get("SLURM_JOB_ID") and env.get("SLURM_JOB_NODELIST") and shutil.which("srun"))


def ray_executable() -> str:
    """The ``ray`` command beside this Python, else on PATH.

    Raises:
        RayUnavailable: neither exists.
    """
    beside = Path(sys.executable).parent / "ray"
    if beside.is_file():
        return str(beside)
    found = shutil.which("ray")
    if found is None:
        raise RayUnavailable(f"no `ray` executable beside {sys.executable} nor on PATH (pip install ray)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


@dataclass
class _Launched:
    """A process this module started on behalf of ``host``."""

    host: str
    run: Background

    def last_line(self) -> str:
        """The last line of its output that says why (srun's own summary lines, ``srun: error: HOST: task 0:
        Exited with exit code 1``, only when nothing else was written)."""
        lines = [ln.strip() for ln in self.run.text().splitlines() if ln.strip()]
        told = [ln for ln in lines if not ln.startswith("srun: ")] or lines
        return told[-1][:300] if told else ""


@dataclass
class AllocationRay:
    """Ray on the allocation, up: ``address`` of the head (``IP:PORT``), ``nodes`` each expected host ->
    its Ray node (``None``: did not join), ``lost`` the UNREACHABLE outcome of each host that did not join,
    ``join_s`` seconds from starting the head to the end of the join wait, ``joined_at`` the
    ``time.monotonic()`` of that moment, ``log_dir`` the folder of Ray's output (:func:`ray_log_dir`)."""

    address: str
    nodes: dict[str, RayNode | None]
    lost: dict[str, NodeOutcome[Any]] = field(default_factory=dict)
    join_s: float = 0.0
    joined_at: float = 0.0
    log_dir: Path | None = None

    @property
    def joined(self) -> list[str]:
        """The expected hosts that joined."""
        return [h for h, n in self.nodes.items() if n is not None]


def _start(argv: Sequence[str], host: str, env: Mapping[str, str], logs: Path, attempt: int = 1) -> _Launched:
    # `ray start` says "Ray runtime started." on stdout; the log is closed by stop_background
    log = open(logs / f"{host}.{attempt}.log", "w+b")  # noqa: SIM115
    return _Launched(host=host, run=Background(argv, env, log))


#: what ``ray start`` prints once its node is fully up (GCS, raylet, object store)
RAY_STARTED = "Ray runtime started"


def _wait_head(head: _Launched, gcs: str, deadline: float) -> None:
    """Wait until the head's ``ray start`` says its node is up and its GCS answers; workers started before
    that were seen to give up on a loaded machine."""
    while True:
        if head.run.poll() is not None:
            raise RayUnavailable(
                f"the Ray head (ray start --head) exited with {head.run.returncode}: {head.last_line()}"
            )
        if RAY_STARTED in head.run.text():
            check_gcs(gcs, 5.0)
            return
        if time.monotonic() >= deadline:
            raise RayUnavailable(f"the Ray head at {gcs} was not up within the join deadline")
        time.sleep(JOIN_POLL_S)


def _connect_until(address: str, deadline: float) -> None:
    """Connect this driver to the head, retrying until ``deadline``: its GCS answers before its raylet is
    up, and ``ray.init`` gives up on a head whose raylet is still starting (seen on a loaded machine)."""
    import ray

    while True:
        try:
            connect(address, timeout_s=max(5.0, deadline - time.monotonic()))
            return
        except RayUnavailable:
            ray.shutdown()
            if time.monotonic() >= deadline:
                raise
            time.sleep(1.0)


def _token_auth(env: dict[str, str]) -> None:
    """Ray 2.60's token authentication for the allocation's Ray (module doc), set in ``env`` (the ``ray start``
    processes' and the worker steps') and in this process's environment (the driver's, before ``import ray``)."""
    env.setdefault("RAY_AUTH_MODE", "token")
    if env["RAY_AUTH_MODE"] == "token" and not (env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH")):
        env["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
        if k in env:
            os.environ[k] = env[k]


@contextmanager
def ray_on_allocation(
    hosts: Sequence[str],
    *,
    join_timeout_s: float = JOIN_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    this_host: str | None = None,
) -> Iterator[AllocationRay]:
    """Start Ray on the allocation's ``hosts`` (head here, one ``srun`` worker per other host), connect this
    process, wait for the hosts to join within ``join_timeout_s``, yield, then stop what was started (see
    the module doc). ``this_host`` defaults to this machine's short hostname.

    Raises:
        RayUnavailable: the head could not be started or reached, or ``ray`` is missing. A worker node
            that does not join is no error: it is in :attr:`AllocationRay.lost`.
    """
    env = dict(os.environ if env is None else env)
    # a multi-node cluster is what is started here: an inherited RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (which
    # keeps a simulation on one machine) would make every worker's `ray start` refuse to join
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "1"
    _token_auth(env)
    import ray

    here = (this_host or socket.gethostname()).split(".", 1)[0]
    workers = [h for h in dict.fromkeys(hosts) if h.split(".", 1)[0] != here]
    ray_bin = ray_executable()
    ip = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]
    port = _free_port()
    address = f"{ip}:{port}"
    job = env.get("SLURM_JOB_ID", "nojob")
    temp = Path(tempfile.mkdtemp(prefix=f"fdx-ray-{job}-", dir="/tmp"))  # short: Ray's socket paths are capped
    logs = ray_log_dir(env)
    common = ["--block", "--disable-usage-stats"]
    launched: list[_Launched] = []
    connected = False
    restore = _exit_on_sigterm()
    t0 = time.monotonic()
    deadline = t0 + join_timeout_s
    try:
        head_argv = [ray_bin, "start", "--head", f"--port={port}", f"--node-ip-address={ip}", f"--temp-dir={temp}"]
        head = _start([*head_argv, "--include-dashboard=false", *common], here, env, logs)
        launched.append(head)
        _wait_head(head, address, deadline)

        def worker(h: str, attempt: int) -> _Launched:
            argv = ["srun", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={h}", f"--job-name={step_name(h)}"]
            step = _start([*argv, ray_bin, "start", f"--address={address}", *common], h, env, logs, attempt)
            launched.append(step)
            return step

        steps = {h: worker(h, 1) for h in workers}
        attempts = dict.fromkeys(workers, 1)
        _connect_until(address, deadline)
        connected = True
        wanted = list(dict.fromkeys(hosts))
        while True:
            nodes = match_hosts(wanted, ray_node_hosts(include_simulated=False))
            missing = [h for h, n in nodes.items() if n is None]
            ended = [h for h in missing if h in steps and steps[h].run.poll() is not None]
            left = deadline - time.monotonic()
            for h in list(ended):  # a `ray start` that gave up (its raylet slow to register) is tried again
                wait = min(STEP_GONE_S, left - RETRY_MIN_LEFT_S)  # within the join deadline
                if attempts[h] < WORKER_ATTEMPTS and left > RETRY_MIN_LEFT_S and step_gone(job, h, env, wait):
                    attempts[h] += 1
                    steps[h] = worker(h, attempts[h])
                    ended.remove(h)
            if not missing or left <= 0 or (ended and len(ended) == len(missing)):
                break
            time.sleep(JOIN_POLL_S)
        joined_at = time.monotonic()
        lost: dict[str, NodeOutcome[Any]] = {}
        for h in missing:
            error = f"did not join Ray within {join_timeout_s:g} s"
            step = steps.get(h)
            if step is not None and step.run.poll() is not None:
                error += (
                    f" (its srun step ended early, exit {step.run.returncode}, attempt {attempts[h]} of "
                    f"{WORKER_ATTEMPTS}: {step.last_line()})"
                )
            elif step is None:
                error += " (no Ray node here for this host: is it this allocation's batch host?)"
            lost[h] = NodeOutcome(
                host=h, kind=OutcomeKind.UNREACHABLE, error=error, elapsed_s=joined_at - t0, ray_state="absent"
            )
        yield AllocationRay(
            address=address, nodes=nodes, lost=lost, join_s=joined_at - t0, joined_at=joined_at, log_dir=logs
        )
    finally:
        if connected:
            ray.shutdown()
        stop_background([x.run for x in reversed(launched)], STOP_GRACE_S)  # workers first, the head last
        shutil.rmtree(temp, ignore_errors=True)
        restore()


def step_name(host: str) -> str:
    """The Slurm step name of the Ray worker on ``host``."""
    return f"fleetdx-ray-{host}"


def step_gone(job: str, host: str, env: Mapping[str, str], wait_s: float = STEP_GONE_S) -> bool:
    """Whether Slurm no longer lists a step of ``job`` named :func:`step_name` (``squeue --steps``), waiting up
    to ``wait_s`` for it to go: ``srun`` can end before slurmctld has let go of its step, and a retry started
    then would make two ``ray start`` on one node. ``True`` when ``squeue`` cannot tell (no job id, no squeue:
    nothing better to go by). Never raises."""
    if job == "nojob" or not shutil.which("squeue"):
        return True
    deadline = time.monotonic() + wait_s
    argv = ["squeue", "--noheader", "--steps", f"--jobs={job}", "--format=%j"]
    while True:
        res = SubprocessRunner().run(argv, timeout_s=15, env=env)  # never raises: a failure is its status
        if not res.ok or step_name(host) not in res.stdout.split():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(JOIN_POLL_S * 4)


def _exit_on_sigterm() -> Callable[[], None]:
    """Make SIGTERM (``scancel``, a job's time limit) raise ``SystemExit(143)`` in the main thread, so that
    :func:`ray_on_allocation` still stops what it started; return the function that restores the handler."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def on_term(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore
