"""Benchmark of the service's fleet page (``GET /``) and a job page (``GET /jobs/{job_id}``) by fleet size.

SYNTHETIC fleet over SQLite: one pre-flight naming ``N`` nodes (``gpu00000``...), every 50th node CRITICAL
(a ``GPU_XID`` finding), every 100th drained by fleetdx (quarantined), the run tagged with one job. For each N:
the page's size (bytes, and bytes per node), the CPU seconds to render it (median of ``--repeat``), and as the
baseline measured in the same run, the CPU of :func:`fleetdx.orchestrator.store.fleet.fleet_state` alone (the
query ``GET /metrics`` makes over the same store): the ratio says what the page adds to reading the fleet.

Run: ``.venv/bin/python bench/fleet_page.py [--sizes 1000 5000 20000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from fleetdx.orchestrator.diagnosis.node_states import DrainEvent
from fleetdx.orchestrator.htmlreport.fleet import render_fleet
from fleetdx.orchestrator.htmlreport.job import render_job
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import RunKind, assemble_report
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store import states as node_states
from fleetdx.orchestrator.store.fleet import fleet_state
from fleetdx.orchestrator.store.jobs import job_report
from fleetdx.probes.contracts import Job, Level, SchedulerKind, Severity


def cpu(work: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The median CPU seconds of ``work`` over ``repeat`` calls, and its last result."""
    times = []
    out: object = None
    for _ in range(repeat):
        t = time.process_time()
        out = work()
        times.append(time.process_time() - t)
    return statistics.median(times), out


def fill(store: Store, n: int) -> None:
    hosts = [f"gpu{i:05d}" for i in range(n)]
    bad = [
        Finding(code=FindingCode.GPU_XID, severity=Severity.CRITICAL, nodes=[h], subject="GPU0", message="XID 79")
        for h in hosts[::50]
    ]
    run = assemble_report(RunKind.PREFLIGHT, hosts, bad, started_at=1.7e9, level=Level.QUICK, run_id=f"pf-{n}")
    store.save_report(run.model_copy(update={"job": Job(scheduler=SchedulerKind.SLURM, job_id="4711")}))
    for h in hosts[::100]:
        node_states.record(store, h, DrainEvent(at=1.7e9 + 10, reason="XID 79 GPU0", run_id=f"pf-{n}"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("SYNTHETIC fleet, SQLite; CPU s are medians; baseline: fleet_state() (the /metrics query) alone")
    print(
        f"{'nodes':>6} {'page MB':>8} {'B/node':>7} {'render s':>9} {'baseline s':>10} {'ratio':>6} {'job page s':>10}"
    )
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'fleet.db'}"
            with Store.open(url) as store:
                fill(store, n)
                base, _ = cpu(partial(fleet_state, store), args.repeat)
                took, page = cpu(partial(render_fleet, store, plotly_src="static/plotly.min.js"), args.repeat)
                size = len(str(page).encode())
                job = job_report(store, "4711")
                assert job is not None
                job_s, _ = cpu(partial(render_job, job), 1)
            figures = f"{size / 1e6:>8.2f} {size / n:>7.0f} {took:>9.2f} {base:>10.2f} {took / base:>6.1f}"
            print(f"{n:>6} {figures} {job_s:>10.2f}")


if __name__ == "__main__":
    main()
