"""The pre-flight job: ``run(request) -> result``, shared by ``fleetdx preflight`` and anything else that
pre-flights an allocation. The CLI only turns its options into a :class:`PreflightRequest`, shows progress,
prints the report and delivers it (saves, pushes or spools it: :func:`fleetdx.orchestrator.preflight.run.save`).

Where it runs (:func:`run`):

- **locally, in this process** (no Ray) when no Ray address is given (``ray_address``, ``RAY_ADDRESS``), the
  level is not ``full`` and the only target is this machine (no target list, or one host that is this machine's
  name, short or full; on Kubernetes the node's name, ``FLEETDX_K8S_NODE_NAME``, is reported, not the pod's);
- **on the Slurm allocation**, through a Ray that fleetdx starts there and stops after the run, when the targets
  are an allocation's nodes and no Ray address is given;
- **on a Ray cluster** otherwise (the given address, else a local Ray for this run);
- **on simulated nodes** replaying bundles (``simulate``: one node per bundle, the report says simulated).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pydantic import Field, model_validator

from fleetdx.orchestrator.preflight.run import (
    DEFAULT_RUN_TIMEOUT_S,
    NodeJob,
    PreflightResult,
    default_probe_cap,
    run_local_preflight,
    run_preflight,
)
from fleetdx.orchestrator.scheduler.targets import Targets, resolve_targets
from fleetdx.probes.contracts import Contract, Level

#: done, total nodes
Progress = Callable[[int, int], None]
#: one line for the person running it (stderr), e.g. how long Ray took to start on the allocation
Say = Callable[[str], None]


class PreflightRequest(Contract):
    """What to pre-flight, and how.

    ``nodes`` a Slurm hostlist (default ``SLURM_JOB_NODELIST``, else every Ray node); ``gpus_per_node`` the
    expected GPU count (default ``SLURM_GPUS_ON_NODE``, else ``SLURM_GPUS_PER_NODE``); ``timeout_s`` the deadline
    of the node probes (default by level: quick 60 s, standard and full 900 s); ``probe_timeout_s`` the cap on
    each command's timeout (default a third of ``timeout_s``); ``join_timeout_s`` the deadline for the
    allocation's nodes to join the Ray fleetdx starts there; ``simulate`` bundle directories to replay, one
    simulated node each (excludes ``nodes``).

    Raises (validation): ``ValueError`` when ``simulate`` and ``nodes`` are both given.
    """

    nodes: str | None = None
    level: Level = Level.QUICK
    gpus_per_node: int | None = Field(default=None, ge=1)
    timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    probe_timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    ray_address: str | None = None
    join_timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    nccl_tests_dir: str | None = None
    simulate: list[Path] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_target_kind(self) -> PreflightRequest:
        if self.simulate and self.nodes is not None:
            raise ValueError("--simulate and --nodes exclude each other (the bundles name the nodes)")
        return self

    @property
    def run_timeout_s(self) -> float:
        return self.timeout_s if self.timeout_s is not None else DEFAULT_RUN_TIMEOUT_S[self.level]

    @property
    def probe_cap_s(self) -> float:
        return self.probe_timeout_s if self.probe_timeout_s is not None else default_probe_cap(self.run_timeout_s)

    def node_job(self, host: str, **extra: object) -> NodeJob:
        return NodeJob.model_validate(
            {
                "host": host,
                "level": self.level,
                "probe_timeout_s": self.probe_cap_s,
                "nccl_tests_dir": self.nccl_tests_dir,
                **extra,
            }
        )


def run(
    request: PreflightRequest,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    say: Say | None = None,
) -> PreflightResult:
    """Pre-flight what ``request`` names (see the module doc) and return the result; a live run's report
    carries the job it runs in (``env``: default ``os.environ``). ``say`` hears one line as each phase that can
    take long begins (starting or joining Ray, probing the nodes), before it starts, so the person at the
    terminal is never left with tens of silent seconds; and how long Ray took on an allocation.

    Raises:
        ConfigError: targets that cannot be resolved (a bad hostlist, no node), Ray that cannot be reached.
    """
    env = os.environ if env is None else env
    say = say or _silent
    if request.simulate:
        return _simulated(request, progress, say)
    return _with_job(_live(request, env, progress, say), env)


def _silent(line: str) -> None:
    """The ``say`` of a caller that wants no phase lines."""


def _with_job(result: PreflightResult, env: Mapping[str, str]) -> PreflightResult:
    """The result with the job this pre-flight runs in (a Slurm allocation, a Kubernetes pod), if any."""
    from fleetdx.orchestrator.scheduler.job import job_from_env

    job = job_from_env(env)
    if job is None:
        return result
    return result.model_copy(update={"report": result.report.model_copy(update={"job": job})})


def only_this_host(
    hosts: list[str] | None, level: Level, ray_address: str | None, env: Mapping[str, str]
) -> str | None:
    """The host name to report when the pre-flight can run locally, in this process, without Ray; else ``None``
    (see the module doc)."""
    from fleetdx.orchestrator.cluster.connect import resolve
    from fleetdx.orchestrator.scheduler.job import node_name_from_env

    if level is Level.FULL or resolve(ray_address)[1] != "default":
        return None
    me = socket.gethostname()
    if hosts is None:
        return node_name_from_env(env) or me
    if len(hosts) != 1:
        return None
    # the fully qualified name only when needed: getfqdn() asks the resolver, which may be slow
    if hosts[0] in (me, me.split(".", 1)[0]) or ("." in hosts[0] and hosts[0] == socket.getfqdn()):
        return hosts[0]
    return None


def _live(request: PreflightRequest, env: Mapping[str, str], progress: Progress | None, say: Say) -> PreflightResult:
    targets = resolve_targets(request.nodes, request.gpus_per_node, env)
    here = only_this_host(targets.hosts, request.level, request.ray_address, env)
    if here is not None:  # the local fast path: no Ray to start for one node
        if request.level is not Level.QUICK:  # micro-benchmarks and nccl-tests: tens of seconds
            say(f"fleetdx: probing {here} at level {request.level.value}...")
        return run_local_preflight(
            request.node_job(here),
            run_timeout_s=request.run_timeout_s,
            expected_gpus=targets.expected_gpus_per_node,
            expected_gpus_source=targets.expected_gpus_source,
        )

    from fleetdx.orchestrator.cluster.allocation import in_allocation
    from fleetdx.orchestrator.cluster.connect import resolve

    if targets.hosts and resolve(request.ray_address)[1] == "default" and in_allocation(env):
        return _on_allocation(request, targets.hosts, targets, say)

    import ray

    from fleetdx.orchestrator.cluster.connect import connect
    from fleetdx.orchestrator.cluster.fanout import gpu_nodes_if_any, match_hosts, ray_node_hosts

    say(f"fleetdx: connecting to Ray ({request.ray_address or env.get('RAY_ADDRESS') or 'a local Ray'})...")
    connect(request.ray_address)
    try:
        alive = ray_node_hosts(include_simulated=False)
        hosts = targets.hosts if targets.hosts is not None else sorted(gpu_nodes_if_any(alive))
        say(f"fleetdx: probing {_count(len(hosts), 'node')} at level {request.level.value}...")
        return run_preflight(
            {h: request.node_job(h) for h in hosts},
            match_hosts(hosts, alive),
            run_timeout_s=request.run_timeout_s,
            expected_gpus=targets.expected_gpus_per_node,
            expected_gpus_source=targets.expected_gpus_source,
            on_progress=progress,
        )
    finally:
        ray.shutdown()


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _on_allocation(request: PreflightRequest, hosts: list[str], targets: Targets, say: Say) -> PreflightResult:
    """Inside a Slurm allocation with no Ray given: fleetdx starts Ray on it, runs, and stops what it started
    (:func:`fleetdx.orchestrator.cluster.allocation.ray_on_allocation`); ``say`` hears how long the nodes took to
    join and the verdict took after that. What Ray's driver prints meanwhile ("(raylet) Raylet is terminated
    ..." blocks, on stdout and stderr) goes to ``driver.log`` in Ray's log folder, shown on stderr only when
    something failed (a node did not join, an error)."""
    import time

    from fleetdx.orchestrator.cluster.allocation import JOIN_TIMEOUT_S, ray_log_dir, ray_on_allocation

    join = request.join_timeout_s or JOIN_TIMEOUT_S
    say(f"fleetdx: starting Ray on {_count(len(hosts), 'node')} of the allocation (join timeout {join:g} s)...")
    logs = ray_log_dir(os.environ)
    failed = True
    with _ray_output_to(logs / "driver.log", say) as tell:
        with ray_on_allocation(hosts, join_timeout_s=join) as up:
            tell(
                f"fleetdx: probing {_count(len(up.joined), 'node')} at level {request.level.value} "
                f"({len(up.joined)}/{len(hosts)} joined Ray in {up.join_s:.1f} s)..."
            )
            result = run_preflight(
                {h: request.node_job(h) for h in hosts},
                up.nodes,
                run_timeout_s=request.run_timeout_s,
                expected_gpus=targets.expected_gpus_per_node,
                expected_gpus_source=targets.expected_gpus_source,
                lost=up.lost,
            )
            verdict_s = time.monotonic() - up.joined_at
        failed = bool(up.lost)
    say(
        f"Ray on the allocation ({up.address}): {len(up.joined)}/{len(hosts)} nodes joined in {up.join_s:.1f} s; "
        f"verdict {verdict_s:.1f} s after that; Ray stopped; its output in {logs}"
    )
    if failed:
        _show_tail(logs / "driver.log", say)
    return result


#: how many of the last lines of Ray's driver output are shown when something failed
DRIVER_TAIL_LINES = 40


@contextmanager
def _ray_output_to(path: Path, say: Say) -> Iterator[Say]:
    """Send what Python code prints to ``sys.stdout``/``sys.stderr`` (Ray's driver threads) to ``path`` while
    inside; yield a ``say`` that still reaches the real stderr. On an error, the file's last lines follow on
    stderr before the error goes on."""
    from contextlib import redirect_stderr, redirect_stdout

    real_err = sys.stderr

    def tell(line: str) -> None:
        with redirect_stderr(real_err):
            say(line)

    with open(path, "a", encoding="utf-8", errors="replace", buffering=1) as log:
        try:
            with redirect_stdout(log), redirect_stderr(log):
                yield tell
        except BaseException:
            log.flush()
            _show_tail(path, say)
            raise


def _show_tail(path: Path, say: Say) -> None:
    """The last :data:`DRIVER_TAIL_LINES` lines of Ray's driver output, on stderr through ``say``."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    if lines:
        say(f"fleetdx: Ray's driver output (last {min(len(lines), DRIVER_TAIL_LINES)} lines of {path}):")
        for line in lines[-DRIVER_TAIL_LINES:]:
            say(line)


def _simulated(request: PreflightRequest, progress: Progress | None, say: Say) -> PreflightResult:
    from fleetdx.orchestrator.cluster.fanout import match_hosts, ray_node_hosts
    from fleetdx.orchestrator.cluster.simulate import sim_nodes, simulated_cluster

    sims = sim_nodes(request.simulate)
    jobs = {n.host: request.node_job(n.host, bundle_dir=n.bundle_dir, delay_s=n.delay_s) for n in sims}
    say(f"fleetdx: starting a local Ray with {_count(len(sims), 'simulated node')}...")
    with simulated_cluster(sims):
        alive = ray_node_hosts(include_real=False)
        say(f"fleetdx: probing {_count(len(jobs), 'simulated node')} at level {request.level.value}...")
        return run_preflight(
            jobs,
            match_hosts(list(jobs), alive),
            run_timeout_s=request.run_timeout_s,
            expected_gpus=request.gpus_per_node,
            expected_gpus_source="--gpus-per-node" if request.gpus_per_node is not None else None,
            simulated=True,
            on_progress=progress,
        )
