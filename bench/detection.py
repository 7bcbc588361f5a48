"""Benchmark of straggler detection: precision, recall and rounds of the real schedules and detector on
simulated fleets of 8-GPU nodes.

    .venv/bin/python bench/detection.py --nodes 1024 --trials 200 --json

Each trial builds a fleet of N nodes, degrades 1 to ``--max-bad`` random nodes by δ (their links run at (1-δ)
of nominal), and runs :func:`fleetdx.orchestrator.preflight.bandwidth.screen_and_localise` (schedule ``localise``)
with the
default NCCL :class:`~fleetdx.orchestrator.preflight.detection.DetectionPolicy` -- the very functions ``fleetdx
bandwidth`` runs
-- over a simulated measurer. A group's measured busbw is ``nominal x min(member factors) x exp(e_run +
e_iter)``:

* ``e_iter`` -- within-run noise: the mean over ``iters`` iterations of per-iteration timing jitter, resampled
  (bootstrap) from the real per-iteration CUDA-event timings of ``all_reduce_perf -I 1`` on an H100
  (fixtures/hosts/h100-vm-idle/all_reduce_perf_-I1_-J.json, out-of-place rows of 32 MB and more: ``t -
  median`` in µs, the first, cold iteration's +10.6 µs included). Jitter is taken as additive (launch and
  event jitter) and divided by the op time at the decision size (64 MB on 2 x 8 B200: 350.41 µs, fixture 17).
* ``e_run`` -- run-to-run noise: resampled with a random sign from ``ln(busbw_oop / busbw_ip) / sqrt(2)`` over
  the rows of 16 MB and more of real multi-rank nccl-tests outputs (fixtures/nccl 01, 02, 05, 08, 15, 17, 25):
  the out-of-place and in-place columns are two measurements of the same ranks and size in the same run, so
  their log-ratio has twice the variance of one measurement. This keeps the heavy tails seen in the wild
  (fixture 17 at 512 MB: 619.23 vs 596.59 GB/s, a 3.7% gap). Rows under 16 MB are latency-bound and noisier
  (fixture 02 at 8 MB: 49.84 vs 44.00 GB/s), which is why the detector judges the largest size
  (doc/PERFORMANCE.md).

The bottleneck model (a group runs at its slowest member's speed) is what a ring collective does: every byte
crosses every link. Probe time per round is the real time of one sweep on a 2-node x 8-GPU pair (fixture 17,
B200 over InfiniBand, sizes 4 MB..64 MB) x (warm-up + timed + 1 validation) iterations; NCCL communicator
setup is not included (it is not measured in any fixture; pass ``--setup-s`` to add it).

Reported per δ: precision and recall of named stragglers over all trials, localisation rounds (mean, max)
against the bound ceil(log2 N) + 2, false-positive nodes, and simulated probe time. Not a timed test: run it
by hand.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleetdx.orchestrator.preflight.bandwidth import screen_and_localise
from fleetdx.orchestrator.preflight.detection import MAD_TO_SIGMA, DetectionPolicy, Measurement
from fleetdx.orchestrator.preflight.schedules import Group, localisation_round_bound
from fleetdx.orchestrator.report import Schedule
from fleetdx.probes.parsers.nccl_tests import parse_nccl_tests

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
if not FIXTURES.exists():  # run from a checkout next to shared/
    FIXTURES = Path("/work/shared/fixtures")
PER_ITER_JSON = FIXTURES / "hosts" / "h100-vm-idle" / "all_reduce_perf_-I1_-J.json"
SPREAD_FILES = ["01_", "02_", "05_", "08_", "15_", "17_", "25_"]
TIMING_FILE = "17_"
NOMINAL_GBPS = 360.0  #: fixture 17, 64 MB all_reduce busbw on 2 x 8 B200 (the scale cancels out)
DECISION_SIZE = 64 << 20


class NoiseModel:
    """Relative noise fitted to real repeated measurements (see the module docstring)."""

    def __init__(self, iters: int = 20) -> None:
        self.iters = iters
        self.op_time_us = {size: t for size, t, _, _ in self._rows(TIMING_FILE)}[DECISION_SIZE]
        self.iter_devs = self._per_iteration()
        self.run_devs = self._run_to_run()

    @staticmethod
    def _per_iteration() -> list[float]:
        report = parse_nccl_tests(PER_ITER_JSON.read_text())
        devs: list[float] = []
        for run in report.runs:
            for row in run.rows:
                per = row.out_of_place.per_iter
                if row.size >= 32 << 20 and per and per.times_us:
                    med = statistics.median(per.times_us)
                    devs.extend(t - med for t in per.times_us)
        if not devs:
            raise SystemExit(f"{PER_ITER_JSON}: no per-iteration timings")
        return devs

    @staticmethod
    def _rows(prefix: str) -> list[tuple[int, float, float, float]]:
        """(size, oop time µs, oop busbw, ip busbw) rows of one fixture, read with fleetdx's parser."""
        (path,) = sorted((FIXTURES / "nccl").glob(prefix + "*"))
        out = []
        for run in parse_nccl_tests(path.read_text(errors="replace")).runs:
            for row in run.rows:
                oop, ip = row.out_of_place, row.in_place
                if oop.time_us and oop.busbw_gbps and ip and ip.busbw_gbps:
                    out.append((row.size, oop.time_us, oop.busbw_gbps, ip.busbw_gbps))
        return out

    def _run_to_run(self) -> list[float]:
        devs = []
        for prefix in SPREAD_FILES:
            for size, _, oop, ip in self._rows(prefix):
                if size >= 16 << 20 and oop > 0 and ip > 0:
                    devs.append(math.log(oop / ip) / math.sqrt(2))
        if len(devs) < 10:
            raise SystemExit("too few nccl-tests rows to fit run-to-run noise")
        return devs

    def sample(self, rng: random.Random) -> float:
        """One measurement's multiplicative noise."""
        e_run = rng.choice(self.run_devs) * rng.choice((-1.0, 1.0))
        mean_jitter_us = sum(rng.choice(self.iter_devs) for _ in range(self.iters)) / self.iters
        return math.exp(e_run) / (
            1.0 + mean_jitter_us / self.op_time_us
        )  # slower iterations -> lower bandwidth

    def summary(self) -> dict[str, float]:
        mad_run = statistics.median(abs(d) for d in self.run_devs)
        return {
            "per_iteration_samples": len(self.iter_devs),
            "per_iteration_jitter_robust_sd_us": MAD_TO_SIGMA * statistics.median(abs(d) for d in self.iter_devs),
            "per_iteration_jitter_max_us": max(self.iter_devs),
            "op_time_us_at_decision_size": self.op_time_us,
            "run_to_run_samples": len(self.run_devs),
            "run_to_run_robust_sd": MAD_TO_SIGMA * mad_run,
            "run_to_run_max_abs": max(abs(d) for d in self.run_devs),
        }

    def round_time_s(self, sizes: Sequence[int], iters: int, warmup: int) -> float:
        """Real time of one sweep over ``sizes`` on a 2-node pair (fixture 17), seconds."""
        times = {size: t for size, t, _, _ in self._rows(TIMING_FILE)}
        return sum(times[s] * (iters + warmup + 1) for s in sizes) * 1e-6


class SimulatedFleet:
    """A measurer over N simulated nodes; ``factor[node]`` < 1 for degraded nodes."""

    def __init__(
        self, nodes: list[str], factor: dict[str, float], noise: NoiseModel, rng: random.Random
    ) -> None:
        self.nodes, self.factor, self.noise, self.rng = nodes, factor, noise, rng

    def __call__(self, round_index: int, groups: Sequence[Group]) -> list[Measurement]:
        out = []
        for g in groups:
            f = min(self.factor.get(h, 1.0) for h in g)
            out.append(
                Measurement(
                    nodes=list(g),
                    collective="all_reduce",
                    round_index=round_index,
                    size=64 << 20,
                    busbw_gbps=NOMINAL_GBPS * f * self.noise.sample(self.rng),
                )
            )
        return out


def run(
    n: int, deltas: Sequence[float], trials: int, max_bad: int, seed: int, setup_s: float
) -> dict[str, object]:
    noise = NoiseModel(iters=20)
    policy = DetectionPolicy()
    sizes, iters, warmup = [4 << 20, 16 << 20, 64 << 20], 20, 1
    round_s = noise.round_time_s(sizes, iters, warmup) + setup_s
    nodes = [f"node{i:05d}" for i in range(n)]
    rng = random.Random(seed)
    results = []
    for delta in deltas:
        tp = fp = fn = 0
        loc_rounds: list[int] = []
        t0 = time.perf_counter()
        for _ in range(trials):
            bad = rng.sample(nodes, rng.randint(1, max_bad))
            fleet = SimulatedFleet(nodes, {b: 1.0 - delta for b in bad}, noise, rng)
            r = screen_and_localise(nodes, fleet, policy, Schedule.LOCALISE)
            named = set(r.stragglers)
            tp += len(named & set(bad))
            fp += len(named - set(bad))
            fn += len(set(bad) - named)
            loc_rounds.append(r.localisation_rounds)
        results.append(
            {
                "delta": delta,
                "precision": tp / (tp + fp) if tp + fp else 1.0,
                "recall": tp / (tp + fn) if tp + fn else 1.0,
                "true_positives": tp,
                "false_positives": fp,
                "false_negatives": fn,
                "localisation_rounds_mean": statistics.mean(loc_rounds),
                "localisation_rounds_max": max(loc_rounds),
                "round_bound": localisation_round_bound(n),
                "within_bound": max(loc_rounds) <= localisation_round_bound(n),
                "probe_time_s_mean": statistics.mean(1 + x for x in loc_rounds) * round_s,
                "wall_s": time.perf_counter() - t0,
            }
        )
    return {
        "nodes": n,
        "gpus_per_node": 8,
        "trials_per_delta": trials,
        "bad_nodes_per_trial": [1, max_bad],
        "seed": seed,
        "round_time_s": round_s,
        "noise_model": noise.summary(),
        "policy": policy.model_dump(),
        "results": results,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--max-bad", type=int, default=3, help="degraded nodes per trial: 1..this")
    ap.add_argument("--deltas", default="0.05,0.1,0.2,0.5")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--setup-s", type=float, default=0.0, help="communicator setup per round, seconds")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    out = run(a.nodes, [float(d) for d in a.deltas.split(",")], a.trials, a.max_bad, a.seed, a.setup_s)
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"N={out['nodes']} trials/δ={out['trials_per_delta']} round={out['round_time_s']:.3f}s "
        f"noise={out['noise_model']}"
    )
    print(f"{'δ':>5} {'precision':>9} {'recall':>7} {'rounds mean/max':>15} {'bound':>5} {'probe s':>8}")
    results: list[dict[str, Any]] = out["results"]  # type: ignore[assignment]
    for r in results:
        print(
            f"{r['delta']:>5.2f} {r['precision']:>9.4f} {r['recall']:>7.4f} "
            f"{r['localisation_rounds_mean']:>8.2f}/{r['localisation_rounds_max']:<6} {r['round_bound']:>5} "
            f"{r['probe_time_s_mean']:>8.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
