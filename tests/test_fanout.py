"""fleetdx.orchestrator.cluster.fanout on a real (simulated, multi-node) Ray cluster: pinning, deadlines, lost nodes.

Simulated nodes are local Ray nodes told apart by their ``fleetdx-sim-host:<host>`` resource (PLATFORM.md).
Each test bounds itself with pytest-timeout; deadline checks use generous margins (they test that the
orchestrator stops waiting, not how fast this machine is).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdx.orchestrator.cluster.fanout import OutcomeKind, fan_out, match_hosts, ray_node_hosts
from fleetdx.orchestrator.cluster.simulate import SimCluster, SimNode, simulated_cluster
from tests.straggler import HANG_GUARD_S

pytestmark = [pytest.mark.ray, pytest.mark.timeout(HANG_GUARD_S)]


def whoami(job: str) -> tuple[str, str]:
    """Node task: the job it got and the Ray node it ran on."""
    import ray

    return job, ray.get_runtime_context().get_node_id()


def sleepy(job: float) -> str:
    """Node task: sleep ``job`` seconds (a hung probe when long)."""
    time.sleep(job)
    return "woke"


def broken(job: str) -> str:
    raise RuntimeError(f"probe crashed: {job}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    d = tmp_path_factory.mktemp("sim")
    with simulated_cluster([SimNode(host=h, bundle_dir=Path(d)) for h in ("n1", "n2", "n3")]) as sim:
        yield sim


def test_simulated_nodes_are_keyed_by_their_host_resource(cluster: SimCluster) -> None:
    nodes = ray_node_hosts(include_real=False)
    assert sorted(nodes) == ["n1", "n2", "n3"]
    assert len({n.node_id for n in nodes.values()}) == 3
    assert all(n.simulated for n in nodes.values())


def test_each_task_runs_on_its_own_node(cluster: SimCluster) -> None:
    nodes = ray_node_hosts(include_real=False)
    out = fan_out({h: h for h in nodes}, whoami, nodes=nodes, run_timeout_s=60)
    for host, o in out.items():
        assert o.kind is OutcomeKind.DONE
        assert o.value == (host, nodes[host].node_id)


def test_host_without_ray_node_is_unreachable_at_once(cluster: SimCluster) -> None:
    nodes = match_hosts(["n1", "ghost7"], ray_node_hosts(include_real=False))
    out = fan_out({"n1": "n1", "ghost7": "ghost7"}, whoami, nodes=nodes, run_timeout_s=60)
    assert out["n1"].kind is OutcomeKind.DONE
    assert out["ghost7"].kind is OutcomeKind.UNREACHABLE
    assert out["ghost7"].ray_state == "absent"


def test_hung_node_is_cut_at_the_run_deadline(cluster: SimCluster) -> None:
    nodes = ray_node_hosts(include_real=False)
    t0 = time.monotonic()
    out = fan_out({"n1": 0.0, "n2": 600.0, "n3": 0.0}, sleepy, nodes=nodes, run_timeout_s=4.0)
    elapsed = time.monotonic() - t0
    assert out["n2"].kind is OutcomeKind.UNREACHABLE
    assert "deadline" in (out["n2"].error or "")
    assert out["n1"].kind is OutcomeKind.DONE and out["n3"].kind is OutcomeKind.DONE
    assert elapsed < 4.0 + 5.0  # the deadline plus polling slack, far below the 600 s the task wanted


def test_task_exception_is_failed_with_its_message(cluster: SimCluster) -> None:
    nodes = ray_node_hosts(include_real=False)
    out = fan_out({"n1": "boom"}, broken, nodes=nodes, run_timeout_s=60)
    assert out["n1"].kind is OutcomeKind.FAILED
    assert "probe crashed: boom" in (out["n1"].error or "")


def test_progress_reports_every_outcome(cluster: SimCluster) -> None:
    nodes = ray_node_hosts(include_real=False)
    seen: list[tuple[int, int]] = []
    fan_out(
        {h: h for h in nodes},
        whoami,
        nodes=nodes,
        run_timeout_s=60,
        on_progress=lambda d, t: seen.append((d, t)),
    )
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)


@pytest.mark.timeout(120)
def test_node_removed_mid_run_is_unreachable(tmp_path: Path, cluster: SimCluster) -> None:
    # runs last in this module: it kills n3 of the shared cluster
    nodes = ray_node_hosts(include_real=False)
    killer = threading.Timer(1.5, cluster.kill, args=("n3",))
    killer.start()
    t0 = time.monotonic()
    out = fan_out({"n1": 0.0, "n3": 600.0}, sleepy, nodes=nodes, run_timeout_s=60.0)
    elapsed = time.monotonic() - t0
    killer.join()
    assert out["n1"].kind is OutcomeKind.DONE
    assert out["n3"].kind is OutcomeKind.UNREACHABLE
    assert out["n3"].ray_state == "DEAD"
    assert elapsed < 60.0  # noticed the death, did not wait for the run deadline


def test_gpu_nodes_preferred_when_the_cluster_has_any() -> None:
    from fleetdx.orchestrator.cluster.fanout import RayNode, gpu_nodes_if_any

    head = RayNode(node_id="h", host="head", simulated=False)
    worker = RayNode(node_id="w", host="gpu01", simulated=False, gpus=8)
    assert list(gpu_nodes_if_any({"head": head, "gpu01": worker})) == ["gpu01"]
    assert list(gpu_nodes_if_any({"head": head})) == ["head"]
