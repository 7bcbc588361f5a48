"""Benchmark of ``fleetdx analyze`` on large fleets: CPU time and peak memory for 128, 1,024 and 4,096 nodes,
how they grow, and the same against the in-memory diagnosis that analyze was before it streamed (issue 22 item
3: every bundle's text and facts held until the report; goal: at most 256 MiB at 1,024 nodes, flat beyond,
CPU growth at most 7 for 8x the bundles).

    .venv/bin/python bench/analyze.py [--sizes 128,1024,4096] [--bundles h100-idle,h100-busy,topo-03,topo-11]

Each node is a copy of a real bundle of tests/fixtures/bundles, the bundles taken in turn (node 1 is the first
bundle, node 2 the second, ...), so every size holds the same mix, and every copy has its own host name: the
directory's name (``n00001``, ...), which is the host of a bundle without ``meta.json``; a copied ``meta.json``
gets its ``host`` rewritten. With the default mix the fleet has peer groups of every kind: H100 nodes with the
same GPU model and micro-benchmark figures (peer medians), a GPU-count majority, and groups of identical
``topo -m`` matrices (peer comparison of topologies). Copies are identical bundles, so identical facts: the
streamed diagnosis shares equal ``topo -m`` matrices, which real fleets of one layout also let it do.

Per size, each a process of its own, stdout to a file (the JSON is checked to name every node):

* ``cpu_s``, ``rss_mib``: the whole ``fleetdx analyze DIR... --json`` command (process start and JSON output
  included): user + system CPU time and peak resident memory (``wait4``). ``cli_s``: its wall time (not
  comparable from run to run on a busy machine: CPU is the figure).
* ``held_cpu_s``, ``held_rss_mib``: the baseline, the same diagnosis with every bundle and its facts held
  (``--held``: read all, parse all, :func:`~fleetdx.orchestrator.diagnosis.engine.diagnose`, the report's
  JSON), in a process of its own beside it; ``cpu_x`` and ``rss_x`` are analyze's over the baseline's.

Then the growth from size to size (consecutive ``--sizes``): CPU (linear work gives 4 for a 4x step, 8 for
8x) and peak RSS (flat memory gives about 1), for analyze and the baseline, and MiB of peak RSS per 1,000
more nodes. ``--split`` adds the in-process split of the held path (read, facts, diagnose, report, JSON).
Exits 1 when analyze's last CPU growth is above ``--max-ratio`` (default 5) x the size step / 4. ``--repeat``
takes the median of several runs. Not a timed test: run it by hand.
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


def run_cli(argv: list[str], n: int, cwd: Path, prefix: str = "") -> dict[str, float]:
    """Run ``argv`` (directories relative to ``cwd``, to keep argv short), which prints a JSON report of ``n``
    nodes: its wall time, CPU time and peak RSS, the keys prefixed with ``prefix``."""
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
            f"{argv[0]} exited {proc.returncode} without a JSON report:\n{stderr.decode(errors='replace')}"
        ) from None
    if len(doc.get("nodes", [])) != n:
        raise SystemExit(f"the report names {len(doc.get('nodes', []))} nodes, not {n}")
    return {
        f"{prefix}cli_s": wall,
        f"{prefix}cpu_s": usage.ru_utime + usage.ru_stime,
        f"{prefix}rss_mib": usage.ru_maxrss / 1024,
    }


def analyze_argv(dirs: list[Path], cwd: Path) -> list[str]:
    """``fleetdx analyze DIR... --json``."""
    return [*fleetdx_cmd(), "analyze", *(str(d.relative_to(cwd)) for d in dirs), "--json"]


def held_argv(dirs: list[Path], cwd: Path) -> list[str]:
    """This script's ``--held DIR...``: the baseline."""
    return [sys.executable, str(Path(__file__).resolve()), "--held", *(str(d.relative_to(cwd)) for d in dirs)]


def held(dirs: list[str]) -> int:
    """The baseline: the diagnosis with every bundle's text and facts held until the report (analyze before
    it streamed); prints the report's JSON."""
    started = time.time()
    bundles = [read_bundle(Path(d)) for d in dirs]
    facts = [node_facts(b) for b in bundles]
    diagnosis = diagnose(Fleet(nodes=facts))
    report = report_of(RunKind.ANALYZE, diagnosis, started_at=started, level=None, simulated=False)
    sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    return 0


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


def growth(rows: dict[int, dict[str, float]], sizes: list[int]) -> dict[str, dict[str, float]]:
    """``"b/a"`` -> CPU and peak-RSS ratios of analyze and the baseline, and analyze's MiB per 1,000 nodes."""
    out: dict[str, dict[str, float]] = {}
    for a, b in zip(sizes, sizes[1:], strict=False):
        ra, rb = rows[a], rows[b]
        out[f"{b}/{a}"] = {
            "cpu": rb["cpu_s"] / ra["cpu_s"],
            "rss": rb["rss_mib"] / ra["rss_mib"],
            "held_cpu": rb["held_cpu_s"] / ra["held_cpu_s"],
            "held_rss": rb["held_rss_mib"] / ra["held_rss_mib"],
            "mib_per_1000": (rb["rss_mib"] - ra["rss_mib"]) * 1000 / (b - a),
            "held_mib_per_1000": (rb["held_rss_mib"] - ra["held_rss_mib"]) * 1000 / (b - a),
        }
    return out


def measure(sources: list[Path], sizes: list[int], repeat: int, split: bool) -> dict[int, dict[str, float]]:
    """Per size, the median over ``repeat`` runs of analyze's and the baseline's figures, printed as they come."""
    rows: dict[int, dict[str, float]] = {}
    cols = ["cpu_s", "rss_mib", "held_cpu_s", "held_rss_mib", "cpu_x", "rss_x", "cli_s", "held_cli_s"]
    if split:
        cols += ["inproc_s", "read_s", "facts_s", "diagnose_s", "report_s", "json_s"]
    with tempfile.TemporaryDirectory(prefix="fleetdx-bench-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        dirs = make_copies(sources, max(sizes), root)
        print(
            f"{len(dirs)} bundle copies of {', '.join(s.name for s in sources)} in {time.perf_counter() - t0:.1f} s; "
            f"median of {repeat} run(s); held_*: the baseline, every bundle and its facts held (--held)"
        )
        print(f"{'nodes':>6} " + " ".join(f"{c:>12}" for c in cols))
        for n in sizes:
            runs = []
            for _ in range(repeat):
                r = run_cli(analyze_argv(dirs[:n], root), n, root)
                r |= run_cli(held_argv(dirs[:n], root), n, root, "held_")
                r |= {"cpu_x": r["cpu_s"] / r["held_cpu_s"], "rss_x": r["rss_mib"] / r["held_rss_mib"]}
                if split:
                    r |= run_inproc(dirs[:n])
                runs.append(r)
            rows[n] = {c: statistics.median(r[c] for r in runs) for c in cols}
            print(f"{n:>6} " + " ".join(f"{rows[n][c]:>12.2f}" for c in cols), flush=True)
    return rows


def main() -> int:
    if sys.argv[1:2] == ["--held"]:
        return held(sys.argv[2:])
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="128,1024,4096", help="node counts, comma-separated, ascending")
    ap.add_argument("--bundles", default=DEFAULT_BUNDLES, help="bundles of tests/fixtures/bundles, in turn")
    ap.add_argument("--repeat", type=int, default=1, help="runs per size (median reported)")
    ap.add_argument("--max-ratio", type=float, default=5.0, help="fail above this CPU growth per 4x nodes")
    ap.add_argument("--split", action="store_true", help="also time the held path's steps in this process")
    ap.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    sources = [BUNDLES / b for b in args.bundles.split(",")]
    for s in sources:
        if not s.is_dir():
            raise SystemExit(f"{s}: no such bundle")
    rows = measure(sources, sizes, args.repeat, args.split)
    ratios = growth(rows, sizes)
    for step, g in ratios.items():
        print(
            f"growth {step} nodes: cpu_s x{g['cpu']:.2f} (held x{g['held_cpu']:.2f}); peak RSS x{g['rss']:.2f} "
            f"(held x{g['held_rss']:.2f}), {g['mib_per_1000']:.1f} MiB per 1,000 more nodes "
            f"(held {g['held_mib_per_1000']:.1f})"
        )
    if args.json:
        print(json.dumps({"sizes": {str(n): r for n, r in rows.items()}, "growth": ratios}, indent=2))
    if not ratios:
        return 0
    step = list(ratios)[-1]
    a, b = (int(x) for x in reversed(step.split("/")))
    limit = args.max_ratio * (b / a) / 4
    if ratios[step]["cpu"] > limit:
        print(f"FAIL: cpu growth {step} = {ratios[step]['cpu']:.2f} > {limit:.2f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
