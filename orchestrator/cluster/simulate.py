"""Simulated clusters, honestly labelled: one local Ray node per bundle, whose probes replay the bundle.

:func:`simulated_cluster` starts a ``ray.cluster_utils.Cluster`` on this machine: a head node that runs no
probes and, per bundle, a node with one CPU and the custom resource ``fleetdx-sim-host:<host>`` (all simulated
nodes share one IP, so they are told apart by resource, bench/MEASUREMENTS.md). The fan-out pins each host's task there,
and the task answers every command from the bundle through :class:`fleetdx.probes.runner.ReplayRunner`. Reports made
this way say ``simulated: true``; no figure in them was measured by this run.

``delay_s`` slows a node's replay (a sleep before each command) so a test can remove the node while its task
runs. It exists only in simulation.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from fleetdx.orchestrator.cluster.fanout import SIM_RESOURCE_PREFIX
from fleetdx.probes.bundle import read_bundle
from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ConfigError, FleetdxError

T = TypeVar("T")


class SimNode(Contract):
    """One simulated node: the host it stands for, the bundle it replays, its replay slowdown (seconds per
    command, simulation only)."""

    host: str
    bundle_dir: Path
    delay_s: float = 0.0


def sim_nodes(bundle_dirs: Sequence[Path], delay_s: Mapping[str, float] | None = None) -> list[SimNode]:
    """One :class:`SimNode` per bundle; the host is the bundle's host (meta.json, else the directory name).

    Raises:
        BundleError: a directory is not a bundle.
        ConfigError: two bundles name the same host.
    """
    delay_s = delay_s or {}
    nodes = [SimNode(host=read_bundle(Path(d)).host, bundle_dir=Path(d).resolve()) for d in bundle_dirs]
    hosts = [n.host for n in nodes]
    dup = sorted({h for h in hosts if hosts.count(h) > 1})
    if dup:
        raise ConfigError(f"several bundles stand for the same host: {', '.join(dup)}")
    return [n.model_copy(update={"delay_s": delay_s.get(n.host, 0.0)}) for n in nodes]


class SimCluster:
    """A running simulated cluster: ``cluster`` is the ``ray.cluster_utils.Cluster``, ``ray_nodes`` maps
    host ->     its Ray ``node`` handle (for ``cluster.remove_node``)."""

    def __init__(self, cluster: Any, nodes: list[SimNode], ray_nodes: dict[str, Any]) -> None:
        self.cluster = cluster
        self.nodes = nodes
        self.ray_nodes = ray_nodes

    def kill(self, host: str) -> None:
        """Remove ``host``'s node abruptly (no graceful drain), as a crashed or cut-off machine."""
        self.cluster.remove_node(self.ray_nodes[host], allow_graceful=False)


class SimulationError(FleetdxError):
    """The simulated cluster could not be started (a raylet that died, a node that never joined)."""


#: seconds allowed for the simulated cluster to start: a base plus a per-node share (1.1 s measured per node)
START_BASE_S = 60.0
START_PER_NODE_S = 5.0


#: Ray gives a starting node a fixed 30 s to register with its GCS (``ray/_private/node.py``,
#: ``raylet_start_wait_time_s``); on a machine loaded far past its cores (load average 16 on 2 cores, measured
#: during a parallel CI run and a CPU hog) a node missed it once in ten starts. A start that timed out is tried
#: again, up to this many times in all.
START_ATTEMPTS = 3
_STARTUP_TIMEOUT = "timed out during startup"


def _retry_startup(start: Callable[[], T]) -> T:
    """``start()``, tried again when Ray says the node timed out during startup (see :data:`START_ATTEMPTS`)."""
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return start()
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception for this
            if _STARTUP_TIMEOUT not in str(e) or attempt == START_ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def start_cluster(head_node_args: dict[str, Any]) -> Any:
    """A ``ray.cluster_utils.Cluster`` with its head started (:func:`_retry_startup`)."""
    from ray.cluster_utils import Cluster

    return _retry_startup(lambda: Cluster(initialize_head=True, head_node_args=head_node_args))


def add_node(cluster: Any, **node_args: Any) -> Any:
    """``cluster.add_node(**node_args)`` (:func:`_retry_startup`)."""
    return _retry_startup(lambda: cluster.add_node(**node_args))


#: Ray's switch for multi-node clusters; "0" keeps the simulated cluster on this machine's loopback. Set only
#: while a simulated cluster runs: a process that later starts a real multi-node Ray (or a child that inherits
#: the environment, such as a Slurm job) must not inherit it.
_LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextmanager
def simulated_cluster(nodes: Sequence[SimNode]) -> Iterator[SimCluster]:
    """Start the simulated cluster, connect this process to it, and tear both down on exit.

    Raises :class:`SimulationError` (one line, the reason) when the cluster cannot start: a node raylet that
    dies, or nodes that have not joined within ``START_BASE_S + START_PER_NODE_S * len(nodes)`` seconds.

    Takes about 1.1 s and 150 MB per node on the development machine (bench/MEASUREMENTS.md). The cluster is kept on
    loopback (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``). Only the processes this cluster started are stopped.
    """
    before = os.environ.get(_LOOPBACK_ONLY)
    os.environ.setdefault(_LOOPBACK_ONLY, "0")  # for this cluster only: restored on exit (below)
    try:
        with _simulated(nodes) as sim:
            yield sim
    finally:
        if before is None:
            os.environ.pop(_LOOPBACK_ONLY, None)
        else:
            os.environ[_LOOPBACK_ONLY] = before


@contextmanager
def _simulated(nodes: Sequence[SimNode]) -> Iterator[SimCluster]:
    import ray

    deadline_s = START_BASE_S + START_PER_NODE_S * len(nodes)
    logging.getLogger("ray").setLevel(logging.WARNING)  # Ray's INFO lines ("Overwriting previous Ray address")
    try:
        cluster = start_cluster({"num_cpus": 0, "include_dashboard": False})
    except Exception as e:  # noqa: BLE001 - the edge: Ray's own start failure becomes one line
        raise SimulationError(f"the simulated Ray cluster could not start: {type(e).__name__}: {e}") from None
    try:
        try:
            handles = {
                n.host: add_node(cluster, num_cpus=1, resources={SIM_RESOURCE_PREFIX + n.host: 1}) for n in nodes
            }
            ray.init(
                address=cluster.address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR
            )
            cluster.wait_for_nodes(timeout=deadline_s)
        except Exception as e:  # noqa: BLE001 - a raylet that died, a node that never joined
            raise SimulationError(
                f"the simulated Ray cluster of {len(nodes)} nodes could not start within {deadline_s:g} s: "
                f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            ) from None
        yield SimCluster(cluster, list(nodes), handles)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
