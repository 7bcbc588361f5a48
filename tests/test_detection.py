"""Robust detection and the screen/localise driver, on simulated measurers (pure, deterministic)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.preflight.bandwidth import build_report, findings_for, screen_and_localise
from fleetdx.orchestrator.preflight.detection import (
    Baseline,
    DetectionPolicy,
    Measurement,
    MeasureStatus,
    allocation_baseline,
    attribute,
    below_history,
    below_reference,
)
from fleetdx.orchestrator.preflight.schedules import Group, localisation_round_bound
from fleetdx.orchestrator.report import Schedule
from fleetdx.probes.contracts import Severity, Verdict

POLICY = DetectionPolicy()


def m(
    nodes: Sequence[str],
    bw: float | None,
    rnd: int = 0,
    status: MeasureStatus = MeasureStatus.OK,
    wrong: int = 0,
) -> Measurement:
    return Measurement(
        nodes=list(nodes),
        collective="all_reduce",
        round_index=rnd,
        status=status,
        size=64 << 20,
        busbw_gbps=bw,
        wrong=wrong,
    )


def test_baseline_is_median_and_scaled_mad_of_logs() -> None:
    b = Baseline.of([25.0, 50.0, 100.0, 200.0, 10000.0], POLICY)
    assert b is not None
    assert b.median == pytest.approx(100.0)
    # |ln x - ln 100| = ln4, ln2, 0, ln2, ln100 -> MAD = ln 2
    assert b.scale == pytest.approx(1.4826 * math.log(2))
    assert b.z(50.0) == pytest.approx(-1 / 1.4826)
    assert b.z(0.0) == -math.inf


def test_noise_floor_keeps_tiny_wobble_from_being_flagged() -> None:
    b = Baseline.of([100.0] * 9, POLICY)
    assert b is not None and b.scale == pytest.approx(0.01)  # MAD 0 -> the 1% noise floor
    assert not b.is_low(97.0, POLICY)  # z = ln(0.97)/0.01 = -3.05: under the cut
    assert not b.is_low(96.6, POLICY)  # z = -3.46
    assert b.is_low(96.4, POLICY)  # z = -3.67 and a 3.6% drop
    lax = DetectionPolicy(min_drop=0.05)
    assert not b.is_low(96.0, lax) and b.is_low(94.9, lax)  # z = -4.1 but only a 4% drop
    assert Baseline.of([], POLICY) is None and Baseline.of([0.0], POLICY) is None


def test_baseline_survives_a_minority_of_slow_nodes() -> None:
    ms = [m(("a", "b"), 100.0), m(("c", "d"), 101.0), m(("e", "f"), 99.0), m(("g", "h"), 50.0)]
    b = allocation_baseline(ms, POLICY)
    assert b is not None and 99.0 <= b.median <= 101.0


def test_attribute_condemns_only_the_node_common_to_low_measurements() -> None:
    # round-robin over 4 nodes, d is slow: every pair with d is low
    ms = [
        m(("a", "d"), 10, 0),
        m(("b", "c"), 100, 0),
        m(("a", "c"), 98, 1),
        m(("d", "b"), 11, 1),
        m(("a", "b"), 101, 2),
        m(("c", "d"), 9, 2),
    ]
    b = allocation_baseline(ms, POLICY)
    assert b is not None
    j = attribute(ms, b, POLICY)
    assert [n for n, v in j.items() if v.straggler] == ["d"]
    assert (j["d"].low, j["d"].measured, j["d"].attributable) == (3, 3, 3)
    assert (j["a"].low, j["a"].attributable, j["a"].straggler) == (1, 0, False)


def test_one_low_measurement_is_not_enough() -> None:
    ms = [m(("a", "b"), 100), m(("c", "d"), 100), m(("e", "f"), 100), m(("g", "h"), 40)]
    b = allocation_baseline(ms, POLICY)
    assert b is not None
    assert not any(v.straggler for v in attribute(ms, b, POLICY).values())


def test_reference_and_history() -> None:
    assert below_reference(80.0, 100.0, POLICY) and not below_reference(91.0, 100.0, POLICY)
    assert below_history(80.0, [100.0, 101.0, 99.0, 100.0], POLICY) is not None
    assert below_history(99.5, [100.0, 101.0, 99.0, 100.0], POLICY) is None
    assert below_history(10.0, [100.0, 101.0], POLICY) is None  # too little history to judge


class SimFleet:
    """Pair busbw = 100 GB/s x the slowest member's factor x (1 + noise); records rounds."""

    def __init__(self, n: int, slow: dict[str, float], noise: float = 0.005, seed: int = 1) -> None:
        self.nodes = [f"n{i:04d}" for i in range(n)]
        self.slow = slow
        self.rng = random.Random(seed)
        self.noise = noise
        self.rounds: list[list[Group]] = []

    def __call__(self, rnd: int, groups: Sequence[Group]) -> list[Measurement]:
        self.rounds.append(list(groups))
        out = []
        for g in groups:
            f = min(self.slow.get(h, 1.0) for h in g)
            out.append(m(g, 100.0 * f * (1 + self.rng.gauss(0, self.noise)), rnd))
        return out


@pytest.mark.parametrize("n", [8, 9, 64, 1024])
def test_localise_names_one_slow_node_within_the_bound(n: int) -> None:
    fleet = SimFleet(n, {"n0005": 0.8})
    r = screen_and_localise(fleet.nodes, fleet, POLICY, Schedule.LOCALISE)
    assert r.stragglers == ["n0005"]
    assert 1 <= r.localisation_rounds <= localisation_round_bound(n)
    assert r.rounds == 1 + r.localisation_rounds
    for rnd in fleet.rounds:  # each round's groups are disjoint
        members = [h for g in rnd for h in g]
        assert len(members) == len(set(members))
    partners = [o for rnd in fleet.rounds for g in rnd if "n0005" in g for o in g if o != "n0005"]
    assert len(partners) == len(set(partners))  # every re-measurement with a fresh partner


def test_localise_two_slow_nodes_in_the_same_screen_pair() -> None:
    fleet = SimFleet(16, {"n0002": 0.5, "n0003": 0.7})
    r = screen_and_localise(fleet.nodes, fleet, POLICY)
    assert r.stragglers == ["n0002", "n0003"]


def test_healthy_fleet_names_nobody() -> None:
    fleet = SimFleet(256, {})
    r = screen_and_localise(fleet.nodes, fleet, POLICY)
    assert r.stragglers == [] and r.localisation_rounds == 0


def test_quick_flags_a_pair_but_condemns_nobody() -> None:
    fleet = SimFleet(16, {"n0007": 0.6})
    r = screen_and_localise(fleet.nodes, fleet, POLICY, Schedule.QUICK)
    assert r.stragglers == [] and r.rounds == 1
    assert [x.nodes for x in r.unexplained_low] == [["n0006", "n0007"]]
    fs = findings_for(r, POLICY)
    assert [(f.code, f.severity, f.subject) for f in fs] == [
        (FindingCode.NCCL_BUSBW_LOW, Severity.WARNING, "n0006,n0007")
    ]


def test_small_allocation_uses_round_robin() -> None:
    fleet = SimFleet(4, {"n0003": 0.5})
    r = screen_and_localise(fleet.nodes, fleet, POLICY)
    assert len(fleet.rounds) == 3 and r.stragglers == ["n0003"]


def test_findings_and_report_for_a_straggler_and_a_broken_pair() -> None:
    fleet = SimFleet(16, {"n0004": 0.6})
    r = screen_and_localise(fleet.nodes, fleet, POLICY)
    r = r.model_copy(
        update={
            "measurements": [
                *r.measurements,
                m(("n0010", "n0011"), None, 9, MeasureStatus.HANG),
                m(("n0012", "n0013"), 100.0, 9, wrong=3),
            ]
        }
    )
    fs = findings_for(r, POLICY, reference_gbps=100.0)
    codes = {(f.code, f.node or f.subject) for f in fs}
    assert (FindingCode.STRAGGLER_NODE, "n0004") in codes
    assert (FindingCode.NCCL_TEST_HANG, "n0010,n0011") in codes
    assert (FindingCode.NCCL_WRONG_RESULTS, "n0012,n0013") in codes
    assert (FindingCode.NCCL_BUSBW_LOW, "n0004") in codes  # 60 GB/s < 0.9 x the 100 GB/s reference
    straggler = next(f for f in fs if f.code is FindingCode.STRAGGLER_NODE)
    assert (
        straggler.details["agreeing"] == 4
    )  # the screen's and three re-measurements, all with cleared partners
    assert straggler.details["drop"] == pytest.approx(0.4, abs=0.03)
    rep = build_report(r, fs, [], started_at=0.0)
    assert rep.verdict is Verdict.CRITICAL and rep.exit_code == 2
    assert rep.exclude == "n0004"
    verdicts = {n.host: n.verdict for n in rep.nodes}
    assert verdicts["n0004"] is Verdict.CRITICAL and verdicts["n0001"] is Verdict.OK
    assert verdicts["n0010"] is Verdict.CRITICAL


def test_history_finding_names_a_node_slower_than_its_past() -> None:
    fleet = SimFleet(8, {}, noise=0.0)
    r = screen_and_localise(fleet.nodes, fleet, POLICY, Schedule.QUICK)
    fs = findings_for(r, POLICY, history={"n0001": [120.0, 121.0, 119.0, 120.0]})
    assert [(f.code, f.node) for f in fs] == [(FindingCode.NCCL_BUSBW_LOW, "n0001")]
    assert fs[0].details["expected_gbps"] == pytest.approx(120.0)


def test_bench_runs_the_real_detector_on_the_fitted_noise_model() -> None:
    """A small run of bench/detection.py (the benchmark itself is run by hand at N=1024)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "bench" / "detection.py"
    spec = importlib.util.spec_from_file_location("bench_detection", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    if not bench.PER_ITER_JSON.exists():
        pytest.skip(f"{bench.PER_ITER_JSON}: shared fixtures not present")
    out = bench.run(64, [0.2], trials=5, max_bad=2, seed=7, setup_s=0.0)
    (r,) = out["results"]
    assert (r["precision"], r["recall"]) == (1.0, 1.0)
    assert r["within_bound"] and r["round_bound"] == 8
    assert out["noise_model"]["op_time_us_at_decision_size"] == 350.41  # fixture 17, 64 MB row
