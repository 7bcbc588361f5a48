"""Ray fan-out: one task per node, pinned to it, under the orchestrator's own deadlines.

Each target host is mapped to a Ray node (a real node by its raylet's hostname ``NodeManagerHostname``, short
name accepted; a simulated node by its custom resource ``fleetdx-sim-host:<host>``), and gets exactly one task
pinned with ``NodeAffinitySchedulingStrategy(node_id, soft=False)`` and ``max_retries=0`` (a probe is never
silently re-run elsewhere or twice).

Deadlines are enforced here, never left to Ray: under a network partition an in-flight ``ray.get`` did not
raise within 240 s even after the node was marked dead (``bench/MEASUREMENTS.md``). :func:`fan_out` loops on
``ray.wait(timeout=...)`` and polls ``ray.nodes()`` for liveness; a node that is marked dead, whose task dies
with it, or that has not answered by its deadline becomes an :attr:`OutcomeKind.UNREACHABLE` outcome (its task
is cancelled with ``force=True``), and the call returns by the run deadline plus one poll interval.

Each pass of the loop waits for one result (at most a poll interval), then takes every other result already
in with a second, non-blocking ``ray.wait``: a ``ray.wait`` costs O(pending), so one call per node would make
collecting N results O(N²), one per batch keeps it about linear (4,096 tasks already done, on a busy 2-core
machine: 4,096 waits and 16 s before, 2 waits and 2.5 s now).

``import ray`` happens inside the functions: the CLI must start fast.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

#: custom resource naming the host a simulated Ray node stands for (fleetdx.orchestrator.cluster.simulate adds it)
SIM_RESOURCE_PREFIX = "fleetdx-sim-host:"
#: seconds between two liveness polls of ``ray.nodes()``
LIVENESS_POLL_S = 0.5

J = TypeVar("J")
T = TypeVar("T")


class OutcomeKind(str, Enum):
    """How one node's task ended, as the driver saw it."""

    DONE = "done"  #: the task returned a value
    FAILED = "failed"  #: the task raised (a bug or a bad environment on the node); ``error`` says what
    UNREACHABLE = "unreachable"  #: no Ray node for the host, the node died, or no answer by the deadline


@dataclass(frozen=True)
class RayNode:
    """One alive Ray node and the host it stands for."""

    node_id: str
    host: str
    simulated: bool
    gpus: float = 0.0  #: the node's Ray ``GPU`` resource


@dataclass(frozen=True)
class NodeOutcome(Generic[T]):
    """The driver's view of one node: ``value`` when DONE; ``error`` (one line) otherwise; ``elapsed_s``
    seconds from submission to the outcome; ``ray_state`` the last liveness Ray reported (``ALIVE``,
    ``DEAD``, or ``absent`` when no Ray node matched the host)."""

    host: str
    kind: OutcomeKind
    value: T | None = None
    error: str | None = None
    elapsed_s: float = 0.0
    ray_state: str = "ALIVE"


def _host_of(entry: Mapping[str, Any]) -> tuple[str, bool]:
    for res in entry.get("Resources", {}):
        if res.startswith(SIM_RESOURCE_PREFIX):
            return res[len(SIM_RESOURCE_PREFIX) :], True
    return str(entry.get("NodeManagerHostname", "")), False


def ray_node_hosts(include_simulated: bool = True, include_real: bool = True) -> dict[str, RayNode]:
    """Alive Ray nodes of the connected cluster, keyed by host name (requires ``ray.init`` done).

    A simulated node is keyed by its ``fleetdx-sim-host:<host>`` resource; a real node by its raylet hostname.
    In a simulated cluster every node shares one hostname, so real nodes are then usually excluded.
    """
    import ray

    out: dict[str, RayNode] = {}
    for entry in ray.nodes():
        if not entry.get("Alive"):
            continue
        host, sim = _host_of(entry)
        if host and ((sim and include_simulated) or (not sim and include_real)):
            gpus = float(entry.get("Resources", {}).get("GPU", 0.0))
            out.setdefault(host, RayNode(node_id=entry["NodeID"], host=host, simulated=sim, gpus=gpus))
    return out


def gpu_nodes_if_any(nodes: Mapping[str, RayNode]) -> dict[str, RayNode]:
    """The nodes with a ``GPU`` resource when the cluster has any (a KubeRay head pod without GPUs is then
    not a target), else all of them (a CPU-only machine is still probed, and says its GPU probes were
    skipped)."""
    gpu = {h: n for h, n in nodes.items() if n.gpus > 0}
    return gpu or dict(nodes)


def match_hosts(wanted: Sequence[str], nodes: Mapping[str, RayNode]) -> dict[str, RayNode | None]:
    """Each wanted host -> its Ray node (exact name, else the same short name: ``gpu01`` ~ ``gpu01.cluster``),
    ``None`` when the cluster has no such node."""
    short = {h.split(".", 1)[0]: n for h, n in nodes.items()}
    return {h: nodes.get(h) or short.get(h.split(".", 1)[0]) for h in wanted}


def _alive_ids() -> set[str]:
    import ray

    return {e["NodeID"] for e in ray.nodes() if e.get("Alive")}


def _outcome_of_ready(host: str, ref: Any, elapsed: float) -> NodeOutcome[Any]:
    import ray
    from ray import exceptions as rex

    lost = (
        rex.NodeDiedError,
        rex.WorkerCrashedError,
        rex.ObjectLostError,
        rex.OwnerDiedError,
        rex.ActorUnavailableError,
    )
    try:
        return NodeOutcome(host=host, kind=OutcomeKind.DONE, value=ray.get(ref, timeout=0), elapsed_s=elapsed)
    except lost as e:
        return NodeOutcome(
            host=host, kind=OutcomeKind.UNREACHABLE, error=_first_line(e), elapsed_s=elapsed, ray_state="DEAD"
        )
    except rex.RayTaskError as e:
        return NodeOutcome(
            host=host, kind=OutcomeKind.FAILED, error=_first_line(e.cause or e), elapsed_s=elapsed
        )
    except rex.RayError as e:
        return NodeOutcome(
            host=host,
            kind=OutcomeKind.UNREACHABLE,
            error=_first_line(e),
            elapsed_s=elapsed,
            ray_state="unknown",
        )


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[-1] if text else ''}"[:300]


def _cancel(ref: Any) -> None:
    import ray

    try:
        ray.cancel(ref, force=True)
    except Exception:  # noqa: BLE001 - edge: cancelling a task on a dead node may raise; nothing left to do
        pass


def fan_out(
    jobs: Mapping[str, J],
    fn: Callable[[J], T],
    *,
    nodes: Mapping[str, RayNode | None],
    run_timeout_s: float,
    on_progress: Callable[[int, int], None] | None = None,
    runtime_env: dict[str, Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, NodeOutcome[T]]:
    """Run ``fn(jobs[host])`` once on each host's Ray node and collect the outcomes by ``run_timeout_s``.

    ``nodes`` maps each host of ``jobs`` to its Ray node (:func:`match_hosts`); a host mapped to ``None`` is
    UNREACHABLE at once. ``fn`` must be importable on the nodes (a module-level function) and should return
    small values (bundles of raw text are). ``on_progress(done, total)`` is called after each outcome.
    Returns host -> outcome for every host of ``jobs``; never raises for a node's failure.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    start = clock()
    deadline = start + run_timeout_s
    out: dict[str, NodeOutcome[T]] = {}
    pending: dict[Any, tuple[str, str]] = {}  # ref -> (host, node id)
    remote = ray.remote(num_cpus=0, max_retries=0)(fn)
    for host, job in jobs.items():
        node = nodes.get(host)
        if node is None:
            out[host] = NodeOutcome(
                host=host,
                kind=OutcomeKind.UNREACHABLE,
                ray_state="absent",
                error="no alive Ray node for this host",
            )
            continue
        opts: dict[str, Any] = {
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node.node_id, soft=False)
        }
        if runtime_env:
            opts["runtime_env"] = runtime_env
        pending[remote.options(**opts).remote(job)] = (host, node.node_id)

    def report() -> None:
        if on_progress:
            on_progress(len(out), len(jobs))

    report()
    next_poll = start
    while pending:
        now = clock()
        if now >= deadline:
            break
        ready, rest = ray.wait(list(pending), num_returns=1, timeout=min(LIVENESS_POLL_S, deadline - now))
        if ready and rest:  # and every other result already in, without waiting: one batch, not one per node
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        for ref in ready:
            host, _nid = pending.pop(ref)
            out[host] = _outcome_of_ready(host, ref, clock() - start)
            report()
        if pending and clock() >= next_poll:
            next_poll = clock() + LIVENESS_POLL_S
            alive = _alive_ids()
            for ref, (host, nid) in list(pending.items()):
                if nid not in alive:
                    del pending[ref]
                    _cancel(ref)
                    out[host] = NodeOutcome(
                        host=host,
                        kind=OutcomeKind.UNREACHABLE,
                        ray_state="DEAD",
                        error="Ray marks the node dead",
                        elapsed_s=clock() - start,
                    )
                    report()
    for ref, (host, _nid) in pending.items():
        _cancel(ref)
        out[host] = NodeOutcome(
            host=host,
            kind=OutcomeKind.UNREACHABLE,
            ray_state="ALIVE",
            error=f"no answer within the run deadline of {run_timeout_s:g} s",
            elapsed_s=clock() - start,
        )
        report()
    return out
