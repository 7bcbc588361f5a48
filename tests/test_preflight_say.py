"""A pre-flight says what it is doing before each slow phase (issue 21, item 13): starting Ray on the allocation
took 17 s with nothing on the terminal, a simulated demo 45 to 65 s. Each phase now puts one line on stderr
before it starts, with ``--json`` too (stdout keeps only the report). Ray itself is replaced by stand-ins that
record when they are entered, so the test checks the order: the line comes first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import preflight_cmd
from fleetdx.orchestrator.cluster.allocation import AllocationRay
from fleetdx.orchestrator.preflight import job
from fleetdx.orchestrator.preflight.run import PreflightResult, analyze_bundles
from fleetdx.orchestrator.scheduler.targets import Targets, TargetSource
from tests.cliapp import cli_app

BUNDLE = Path(__file__).parent / "fixtures" / "bundles" / "h100-idle"


def _result(*_: Any, **__: Any) -> PreflightResult:
    return analyze_bundles([BUNDLE])


def test_allocation_says_starting_ray_before_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []

    @contextmanager
    def ray_on_allocation(hosts: list[str], join_timeout_s: float) -> Iterator[AllocationRay]:
        events.append("ray started")
        yield AllocationRay(address="10.0.0.1:6379", nodes=dict.fromkeys(hosts), join_s=1.5)
        events.append("ray stopped")

    def run_preflight(*args: Any, **kwargs: Any) -> PreflightResult:
        events.append("probes ran")
        return _result()

    import fleetdx.orchestrator.cluster.allocation as allocation

    monkeypatch.setattr(allocation, "ray_on_allocation", ray_on_allocation)
    monkeypatch.setattr(job, "run_preflight", run_preflight)
    hosts = ["gpu01", "gpu02", "gpu03"]
    targets = Targets(hosts=hosts, source=TargetSource.SLURM)
    job._on_allocation(job.PreflightRequest(), hosts, targets, say=events.append)
    assert events[0] == "fleetdx: starting Ray on 3 nodes of the allocation (join timeout 120 s)..."
    assert events[1] == "ray started"
    assert events[2].startswith("fleetdx: probing 0 nodes at level quick (0/3 joined Ray in 1.5 s)")
    assert events[3:5] == ["probes ran", "ray stopped"]
    assert events[5].startswith("Ray on the allocation (10.0.0.1:6379): 0/3 nodes joined in 1.5 s")


@pytest.fixture
def stand_in_simulation(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    events: list[str] = []
    import fleetdx.orchestrator.cluster.fanout as fanout
    import fleetdx.orchestrator.cluster.simulate as simulate

    @contextmanager
    def simulated_cluster(sims: Any) -> Iterator[None]:
        events.append("ray started")
        yield

    def run_preflight(*args: Any, **kwargs: Any) -> PreflightResult:
        events.append("probes ran")
        return _result()

    monkeypatch.setattr(simulate, "simulated_cluster", simulated_cluster)
    monkeypatch.setattr(fanout, "ray_node_hosts", lambda **kw: {})
    monkeypatch.setattr(job, "run_preflight", run_preflight)
    return events


def test_simulation_says_starting_ray_before_it_starts(stand_in_simulation: list[str]) -> None:
    events = stand_in_simulation
    job.run(job.PreflightRequest(simulate=[BUNDLE]), say=events.append)
    assert events == [
        "fleetdx: starting a local Ray with 1 simulated node...",
        "ray started",
        "fleetdx: probing 1 simulated node at level quick...",
        "probes ran",
    ]


def test_cli_says_it_on_stderr_one_line_each_with_json(stand_in_simulation: list[str]) -> None:
    res = CliRunner().invoke(cli_app(preflight_cmd), ["preflight", "--simulate", str(BUNDLE), "--json", "--no-save"])
    assert res.exit_code in (0, 1, 2, 3), res.output
    assert json.loads(res.stdout)["kind"]  # stdout: the report alone
    lines = res.stderr.splitlines()
    assert lines[:2] == [
        "fleetdx: starting a local Ray with 1 simulated node...",
        "fleetdx: probing 1 simulated node at level quick...",
    ]
