"""Benchmark of the pre-flight path on simulated clusters: quick-level wall time for 1, 2, 4 and 8 nodes and
the orchestrator's own overhead per node.

One simulated cluster of 8 nodes (``ray.cluster_utils.Cluster``); each node replays a copy of the real idle
H100 bundle (tests/fixtures/bundles/h100-idle), so the probes themselves cost almost nothing and what is timed
is fleetdx: Ray task submission and pinning, the in-node ``collect`` over the replay runner, moving the raw
bundle back, parsing (``node_facts``) and the diagnosis. Runs on the first N nodes of the cluster,
``--repeat``times each (median reported, the first run of each size included: Ray starts workers lazily).

Columns: ``wall_s`` run_preflight end to end; ``fanout_s`` Ray fan-out until the last bundle is back;
``collect_s`` slowest node's in-task collect time (from its bundle's command timestamps); ``diagnose_s``
parse + rules; ``overhead_ms_per_node`` = (wall_s - collect_s) / N * 1000, the orchestrator's own cost
per node.

This measures the orchestration on this machine (2 cores shared by every simulated node), not a real GPU
node's probe time (quick-level commands take about 0.3 s on an H100 node, bench/MEASUREMENTS.md).

Run: ``.venv/bin/python bench/preflight.py [--repeat 3] [--sizes 1,2,4,8]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(ROOT)

from fleetdx.orchestrator.cluster.fanout import OutcomeKind, fan_out, match_hosts, ray_node_hosts  # noqa: E402
from fleetdx.orchestrator.cluster.simulate import sim_nodes, simulated_cluster  # noqa: E402
from fleetdx.orchestrator.diagnosis.base import Fleet  # noqa: E402
from fleetdx.orchestrator.diagnosis.engine import diagnose  # noqa: E402
from fleetdx.orchestrator.preflight.run import NodeJob, collect_on_node  # noqa: E402
from fleetdx.probes.bundle import BundleData  # noqa: E402
from fleetdx.probes.catalog import Level  # noqa: E402
from fleetdx.probes.facts import node_facts  # noqa: E402

BUNDLE = ROOT / "tests" / "fixtures" / "bundles" / "h100-idle"


def _collect_s(b: BundleData) -> float:
    spans = [(c.started_at, c.started_at + (c.duration_s or 0.0)) for c in b.commands if c.started_at]
    return max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0.0


def _one(jobs: dict[str, NodeJob]) -> dict[str, float]:
    nodes = match_hosts(list(jobs), ray_node_hosts(include_real=False))
    t0 = time.perf_counter()
    outcomes = fan_out(jobs, collect_on_node, nodes=nodes, run_timeout_s=120)
    t1 = time.perf_counter()
    bundles = [o.value for o in outcomes.values() if o.kind is OutcomeKind.DONE and o.value is not None]
    if len(bundles) != len(jobs):
        raise SystemExit(f"lost nodes: {[o for o in outcomes.values() if o.kind is not OutcomeKind.DONE]}")
    diagnose(Fleet(nodes=[node_facts(b) for b in bundles]))
    t2 = time.perf_counter()
    collect = max(_collect_s(b) for b in bundles)
    return {
        "wall_s": t2 - t0,
        "fanout_s": t1 - t0,
        "collect_s": collect,
        "diagnose_s": t2 - t1,
        "overhead_ms_per_node": (t2 - t0 - collect) / len(jobs) * 1000,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="1,2,4,8")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="fleetdx-bench-") as tmp:
        dirs = []
        for i in range(max(sizes)):
            d = Path(tmp) / f"sim{i + 1:02d}"
            shutil.copytree(BUNDLE, d)
            dirs.append(d)
        t0 = time.perf_counter()
        nodes = sim_nodes(dirs)
        with simulated_cluster(nodes):
            print(
                f"simulated cluster of {len(nodes)} nodes up in {time.perf_counter() - t0:.1f} s "
                f"(replaying {BUNDLE.name}; level quick; median of {args.repeat})"
            )
            cols = ["wall_s", "fanout_s", "collect_s", "diagnose_s", "overhead_ms_per_node"]
            print(f"{'nodes':>5} " + " ".join(f"{c:>20}" for c in cols))
            for n in sizes:
                jobs = {
                    s.host: NodeJob(host=s.host, level=Level.QUICK, bundle_dir=s.bundle_dir)
                    for s in nodes[:n]
                }
                runs = [_one(jobs) for _ in range(args.repeat)]
                med = {c: statistics.median(r[c] for r in runs) for c in cols}
                print(
                    f"{n:>5} "
                    + " ".join(f"{med[c]:>20.3f}" for c in cols)
                    + f"   (first run: wall {runs[0]['wall_s']:.3f} s)"
                )


if __name__ == "__main__":
    main()
