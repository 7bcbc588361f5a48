"""Benchmark of the test suite itself (issue 22 item 7): the fast subset a developer runs, and optionally the full
suite CI runs, each beside the suite's own fixed cost measured in the same run.

    .venv/bin/python bench/suite.py [--full] [--repeat 1]

Each case is a fresh ``python -m pytest`` process; its wall time and its CPU (user + system of the process and
its children, ``os.wait4``: the Ray, Slurm and gloo processes the tests start count) are printed with the load
average before and after it, and as ratios to the baseline:

* baseline: ``pytest --collect-only -q`` of the whole suite (interpreter, pytest, its plugins and every test
  module imported: what any run pays before its first test);
* the fast subset: ``-m "not slow and not ray and not slurm and not netns and not chromium"`` (the README's
  development command); goal: at most 3 minutes of wall time on this 2-core machine;
* ``--full``: the README's test command as ``.ci/run`` runs it (every marker; PostgreSQL tests skip unless
  ``FLEETDX_TEST_PG_URL`` is set, Slurm ones unless ``bash .ci/slurm-cluster.sh install`` has been run); goal: at
  most 15 minutes. About 20 minutes here: opt in.

Wall time is the goal's unit (a developer and CI wait for it), so each figure comes with the load average it ran
under: compare runs by their ratio to the baseline, not by their seconds. Exit 1 when a goal is missed or a case
fails, 0 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
FAST = "not slow and not ray and not slurm and not netns and not chromium"
#: issue 22's goals, seconds of wall time on the 2-core CI machine
FAST_GOAL_S = 180.0
FULL_GOAL_S = 900.0


class Run(NamedTuple):
    wall_s: float
    cpu_s: float
    rc: int
    summary: str  # pytest's last line ("4117 passed, 178 skipped ... in 147.46s")
    load: tuple[float, float]  # 1-minute load average before and after


def pytest_run(args: list[str]) -> Run:
    """``python -m pytest ARGS`` from the root in a fresh process: wall, CPU with children, exit code, summary."""
    before = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    summary = next(
        (line.strip("= ") for line in reversed(lines) if re.search(r"\d+ (passed|failed|tests? coll)", line)), ""
    )
    return Run(
        wall, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status), summary, (before, os.getloadavg()[0])
    )


def median_run(args: list[str], repeat: int) -> Run:
    runs = [pytest_run(args) for _ in range(repeat)]
    runs.sort(key=lambda r: r.wall_s)
    return runs[len(runs) // 2]


def show(name: str, r: Run, base: Run | None) -> None:
    ratio = f" | {r.wall_s / base.wall_s:.1f}x the baseline's wall, {r.cpu_s / base.cpu_s:.1f}x its CPU" if base else ""
    print(
        f"  {name}: wall {r.wall_s:.1f} s, CPU {r.cpu_s:.1f} s (children included){ratio}; "
        f"load {r.load[0]:.1f} -> {r.load[1]:.1f}; exit {r.rc}; {r.summary}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="also run the full suite (about 20 minutes here)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each case; the median by wall time is shown")
    args = ap.parse_args()
    print(f"test suite (issue 22 item 7; {os.cpu_count()} CPUs, this machine's load average shown per case)")
    base = median_run(["--collect-only"], args.repeat)
    show("baseline: collection of the whole suite (--collect-only)", base, None)
    ok = base.rc == 0
    cases = [
        (
            "fast subset (-m 'not slow and not ray and not slurm and not netns and not chromium')",
            ["-m", FAST],
            FAST_GOAL_S,
        )
    ]
    if args.full:
        cases.append(("full suite (the README's test command, as .ci/run runs it)", [], FULL_GOAL_S))
    for name, extra, goal in cases:
        r = median_run(extra, args.repeat)
        show(name, r, base)
        met = r.rc == 0 and r.wall_s <= goal
        ok = ok and met
        print(f"    goal at most {goal / 60:.0f} minutes of wall time: {'met' if met else 'MISSED'}")
    print(f"suite: {'every goal met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
