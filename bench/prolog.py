"""Benchmark of a Slurm prolog's pre-flight: CPU seconds of the whole command, as the prolog runs it, on each of
its deliveries, beside baselines run in the same session.

    .venv/bin/python bench/prolog.py [--repeat 5] [--no-ray-baseline]

Each case is a fresh process (``os.wait4``: user + system CPU of the process and its children: the probes'
commands count), median of ``--repeat``:

* ``python -c pass``: the interpreter alone (the floor);
* ``fleetdx --version``: interpreter and the CLI's root (no command module loaded);
* ``fleetdx preflight --json`` of this machine (the local path: no Ray) delivered four ways: ``--no-save``
  (nothing delivered), ``--spool`` (a spool file: what a prolog should use, no database library loaded),
  ``--db sqlite:///FRESH`` (a save into a new SQLite file, migrations included) and ``--db sqlite:///SAME``
  (a save into a database that exists: the steady state);
* a bare Ray head, ``ray start --head`` then ``ray stop`` (``--ray-baseline``, on by default): what a
  pre-flight through Ray would pay before any probe, for scale.

This machine has no GPU: the probes that need one are skipped (the verdict is UNKNOWN, exit 3) and the figure is
fleetdx's own cost plus the CPU-side probes (lscpu, numactl, sysfs). The goal (issue 22) is at most 0.5 s of
CPU for the prolog's path, both ``--spool`` and the save into an existing SQLite file (the steady state; it is
written through ``sqlite3`` without SQLAlchemy: ``fleetdx.orchestrator.store.direct``), each printed as met or
MISSED; exit 1 when one is missed. The package's bytecode is
compiled first, as ``pip install`` leaves it.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_CPU_S = 0.5


def cpu_of(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """CPU seconds (user + sys, children included) and exit code of ``argv`` in a fresh process."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    _, status, ru = os.wait4(proc.pid, 0)
    return ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def ray_baseline(env: dict[str, str]) -> float | None:
    """CPU seconds of ``ray start --head`` then ``ray stop`` (both waited for), or None without ``ray``."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray is None:
        return None
    start, _ = cpu_of([ray, "start", "--head", "--num-cpus", "1", "--include-dashboard", "false"], env)
    stop, _ = cpu_of([ray, "stop", "--force"], env)
    return start + stop


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ray-baseline", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args()
    fx = [sys.executable, "-m", "fleetdx"]
    # the bytecode an install leaves (pip compiles it): with PYTHONDONTWRITEBYTECODE set and a stale
    # __pycache__, every measured run would compile the changed modules again
    compileall.compile_dir(str(ROOT / "fleetdx"), quiet=1)  # follows the links to probes/, topology/, orchestrator/
    with tempfile.TemporaryDirectory(prefix="fleetdx-bench-prolog-") as tmp:
        env = {**os.environ, "FLEETDX_SPOOL_DIR": f"{tmp}/spool", "HOME": tmp}
        same = f"sqlite:///{tmp}/same.db"
        cpu_of([*fx, "preflight", "--json", "--db", same], env)  # the steady state's database exists
        fresh = iter(range(10_000))
        cases: dict[str, Callable[[], list[str]]] = {
            "python -c pass (interpreter)": lambda: [sys.executable, "-c", "pass"],
            "fleetdx --version (CLI root)": lambda: [*fx, "--version"],
            "preflight --json --no-save": lambda: [*fx, "preflight", "--json", "--no-save"],
            "preflight --json --spool (the prolog's path)": lambda: [*fx, "preflight", "--json", "--spool"],
            "preflight --json --db <new SQLite file>": lambda: [
                *fx,
                "preflight",
                "--json",
                "--db",
                f"sqlite:///{tmp}/fresh{next(fresh)}.db",
            ],
            "preflight --json --db <existing SQLite>": lambda: [*fx, "preflight", "--json", "--db", same],
        }
        print(
            f"CPU seconds (user + sys, children included), median of {args.repeat}, the cases taking turns (a "
            "shared machine's load falls on all of them); exit code in brackets"
        )
        runs: dict[str, list[tuple[float, int]]] = {name: [] for name in cases}
        for _ in range(args.repeat):
            for name, argv in cases.items():
                runs[name].append(cpu_of(argv(), env))
        figures: dict[str, float] = {}
        for name, done in runs.items():
            figures[name] = statistics.median(c for c, _ in done)
            print(f"  {name:<48} {figures[name]:6.2f} s  [{done[-1][1]}]")
        spool = figures["preflight --json --spool (the prolog's path)"]
        saved = figures["preflight --json --db <existing SQLite>"]
        base = figures["python -c pass (interpreter)"]
        print(f"  the prolog's path is {spool / base:.1f}x the bare interpreter, {saved / base:.1f}x with its save")
        if args.ray_baseline:
            ray = ray_baseline(env)
            if ray is None:
                print("  ray start --head + ray stop: skipped (no ray executable)")
            else:
                name = "ray start --head + ray stop (bare Ray head)"
                print(f"  {name:<48} {ray:6.2f} s; the prolog's path is {spool / ray:.2f}x it")
        met = True
        for what, cpu in (("the prolog's path (--spool)", spool), ("with its save into an existing SQLite", saved)):
            ok = cpu <= GOAL_CPU_S
            met = met and ok
            print(f"goal: {what} at most {GOAL_CPU_S} s of CPU: {'met' if ok else 'MISSED'} ({cpu:.2f} s)")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
