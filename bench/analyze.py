"""Benchmark of ``fleetdx analyze`` on large fleets: wall time and peak memory for 256, 1,024 and 4,096 nodes,
and how they grow (the issue's "cost that grows with the square of the node count").

    .venv/bin/python bench/analyze.py [--sizes 256,1024,4096] [--bundles h100-idle,h100-busy,topo-03,topo-11]

Each node is a copy of a real bundle of tests/fixtures/bundles, the bundles taken in turn (node 1 is the first
bundle, node 2 the second, ...), so every size holds the same mix, and every copy has its own host name: the
directory's name (``n00001``, ...), which is the host of a bundle without ``meta.json``; a copied ``meta.json``
gets its ``host`` rewritten. With the default mix the fleet has peer groups of every kind: H100 nodes with the
same GPU model and micro-benchmark figures (peer medians), a GPU-count majority, and groups of identical
``topo -m`` matrices (peer comparison of topologies).

Per size:

* ``cli_s``: the whole ``fleetdx analyze DIR... --json`` command in a subprocess, process start and JSON
  output included (stdout goes to a file; the JSON is checked to name every node). ``cpu_s``: that
  process's user + system CPU time, and ``rss_mib`` its peak resident memory (``wait4``); on a busy machine
  ``cpu_s`` is the steadier figure.
* the same work in this process, split: ``read_s`` (``read_bundle`` of every directory), ``facts_s``
  (``node_facts``), ``diagnose_s`` (the rules, :func:`~fleetdx.orchestrator.diagnosis.engine.diagnose`),
  ``report_s`` (verdicts and the report, :func:`~fleetdx.orchestrator.preflight.run.report_of`) and
  ``json_s`` (the report's JSON dump).

Then the growth ratios cli_s(1024)/cli_s(256) and cli_s(4096)/cli_s(1024) (consecutive sizes, for other
``--sizes`` too), and the same for cpu_s: linear work gives 4 for a 4x step, quadratic 16. Exits 1 when the
last cli_s ratio is above ``--max-ratio`` (default 5). ``--repeat`` takes the median of several runs. Not a
timed test: run it by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import diagnose
from fleetdx.orchestrator.preflight.run import report_of
from fleetdx.orchestrator.report import RunKind
from fleetdx.probes.bundle import META_FILE, read_bundle
from fleetdx.probes.facts import node_facts

BUNDLES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "bundles"
DEFAULT_BUNDLES = "h100-idle,h100-busy,topo-03,topo-11"


def make_copies(sources: list[Path], n: int, root: Path) -> list[Path]:
    """``n`` bundle directories under ``root``, copies of ``sources`` in turn, each with its own host name."""
    out = []
    for i in range(n):
        src = sources[i % len(sources)]
        d = root / f"n{i + 1:05d}"
        shutil.copytree(src, d)
        meta = d / META_FILE
        if meta.is_file():
            doc = json.loads(meta.read_text(encoding="utf-8"))
            doc["host"] = d.name
            meta.write_text(json.dumps(doc), encoding="utf-8")
        out.append(d)
    return out


def fleetdx_cmd() -> list[str]:
    """The ``fleetdx`` console script of this interpreter's environment, else ``python -m fleetdx``."""
    script = Path(sys.executable).parent / "fleetdx"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "fleetdx"]


def run_cli(dirs: list[Path], cwd: Path) -> dict[str, float]:
    """Time ``fleetdx analyze DIR... --json`` (directories relative to ``cwd``, to keep argv short)."""
    argv = [*fleetdx_cmd(), "analyze", *(str(d.relative_to(cwd)) for d in dirs), "--json"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    try:
        doc = json.loads(stdout)
    except ValueError:
        raise SystemExit(
            f"fleetdx analyze exited {proc.returncode} without a JSON report:\n{stderr.decode(errors='replace')}"
        ) from None
    if len(doc.get("nodes", [])) != len(dirs):
        raise SystemExit(f"the report names {len(doc.get('nodes', []))} nodes, not {len(dirs)}")
    return {
        "cli_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_mib": usage.ru_maxrss / 1024,
        "exit": float(proc.returncode),
    }


def run_inproc(dirs: list[Path]) -> dict[str, float]:
    """The steps of ``analyze_bundles`` and of the JSON output, timed one by one in this process."""
    t0 = time.perf_counter()
    bundles = [read_bundle(d) for d in dirs]
    t1 = time.perf_counter()
    facts = [node_facts(b) for b in bundles]
    t2 = time.perf_counter()
    diagnosis = diagnose(Fleet(nodes=facts))
    t3 = time.perf_counter()
    report = report_of(RunKind.ANALYZE, diagnosis, started_at=time.time(), level=None, simulated=False)
    t4 = time.perf_counter()
    report.model_dump_json()
    t5 = time.perf_counter()
    if len(report.nodes) != len(dirs):
        raise SystemExit(f"the report names {len(report.nodes)} nodes, not {len(dirs)}")
    return {
        "read_s": t1 - t0,
        "facts_s": t2 - t1,
        "diagnose_s": t3 - t2,
        "report_s": t4 - t3,
        "json_s": t5 - t4,
        "inproc_s": t5 - t0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="256,1024,4096", help="node counts, comma-separated, ascending")
    ap.add_argument("--bundles", default=DEFAULT_BUNDLES, help="bundles of tests/fixtures/bundles, in turn")
    ap.add_argument("--repeat", type=int, default=1, help="runs per size (median reported)")
    ap.add_argument("--max-ratio", type=float, default=5.0, help="fail above this last growth ratio")
    ap.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    sources = [BUNDLES / b for b in args.bundles.split(",")]
    for s in sources:
        if not s.is_dir():
            raise SystemExit(f"{s}: no such bundle")
    rows: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="fleetdx-bench-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        dirs = make_copies(sources, max(sizes), root)
        print(
            f"{len(dirs)} bundle copies of {', '.join(s.name for s in sources)} in {time.perf_counter() - t0:.1f} s; "
            f"median of {args.repeat} run(s)"
        )
        cols = ["cli_s", "cpu_s", "rss_mib", "inproc_s", "read_s", "facts_s", "diagnose_s", "report_s", "json_s"]
        print(f"{'nodes':>6} " + " ".join(f"{c:>10}" for c in cols))
        for n in sizes:
            runs = [run_cli(dirs[:n], root) | run_inproc(dirs[:n]) for _ in range(args.repeat)]
            rows[n] = {c: statistics.median(r[c] for r in runs) for c in cols}
            print(f"{n:>6} " + " ".join(f"{rows[n][c]:>10.2f}" for c in cols), flush=True)
    ratios: dict[str, float] = {}
    cpu_ratios: dict[str, float] = {}
    for a, b in zip(sizes, sizes[1:], strict=False):
        ratios[f"{b}/{a}"] = rows[b]["cli_s"] / rows[a]["cli_s"]
        cpu_ratios[f"{b}/{a}"] = rows[b]["cpu_s"] / rows[a]["cpu_s"]
        print(f"growth {b}/{a} nodes: cli_s x{ratios[f'{b}/{a}']:.2f}, cpu_s x{cpu_ratios[f'{b}/{a}']:.2f}")
    doc: dict[str, Any] = {
        "sizes": {str(n): r for n, r in rows.items()},
        "ratios": ratios,
        "cpu_ratios": cpu_ratios,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
    if ratios:
        last_key = list(ratios)[-1]
        if ratios[last_key] > args.max_ratio:
            print(f"FAIL: growth {last_key} = {ratios[last_key]:.2f} > {args.max_ratio}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
