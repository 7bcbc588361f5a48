"""A simulated cluster that cannot start is one clear error, not a traceback after the deadline."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdx.orchestrator.cluster.simulate import SimNode, SimulationError, simulated_cluster

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"


@pytest.mark.ray
@pytest.mark.timeout(120)
def test_a_raylet_that_dies_while_the_cluster_starts_is_a_simulation_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.cluster_utils import Cluster

    shut: list[bool] = []
    real_shutdown, real_add_node = Cluster.shutdown, Cluster.add_node

    def dying_add_node(self: Cluster, **kwargs: object) -> object:
        if not kwargs.get("resources"):  # the head node starts for real
            return real_add_node(self, **kwargs)
        # stand-in for a simulated node's raylet exiting during start-up (what Ray raises then)
        raise RuntimeError("Raylet process exited unexpectedly (stand-in)")

    def shutdown(self: Cluster) -> None:
        shut.append(True)
        real_shutdown(self)

    monkeypatch.setattr(Cluster, "add_node", dying_add_node)
    monkeypatch.setattr(Cluster, "shutdown", shutdown)
    node = SimNode(host="sim01", bundle_dir=BUNDLES / "h100-idle")
    with pytest.raises(SimulationError, match="could not start.*Raylet process exited"):
        with simulated_cluster([node]):
            pass
    assert shut == [True]  # what had started was stopped


def test_a_node_start_that_timed_out_is_tried_again() -> None:
    from fleetdx.orchestrator.cluster import simulate

    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 2:
            raise Exception("The current node timed out during startup. This could happen because ...")
        return "up"

    assert simulate._retry_startup(flaky) == "up" and len(calls) == 2

    def broken() -> str:
        raise Exception("some other failure")

    with pytest.raises(Exception, match="some other failure"):
        simulate._retry_startup(broken)

    def always() -> str:
        calls.append(1)
        raise Exception("timed out during startup")

    calls.clear()
    with pytest.raises(Exception, match="timed out during startup"):
        simulate._retry_startup(always)
    assert len(calls) == simulate.START_ATTEMPTS


def test_the_loopback_switch_does_not_outlive_the_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps a simulation on this machine; left in os.environ it made every
    later `ray start` worker of a real Slurm allocation (started from the same process's environment) refuse
    to join: seen in CI, where a simulation test ran before the Slurm tests."""
    import os

    from fleetdx.orchestrator.cluster import simulate

    monkeypatch.delenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", raising=False)
    seen: list[str | None] = []

    @contextlib.contextmanager
    def fake(nodes: object) -> Iterator[None]:
        seen.append(os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"))
        yield None

    monkeypatch.setattr(simulate, "_simulated", fake)
    with simulate.simulated_cluster([]):
        pass
    assert seen == ["0"] and "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ
