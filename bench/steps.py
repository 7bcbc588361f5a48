"""Benchmark of ``fleetdx steps``: fleetdx against HolisticTraceAnalysis on the same real traces, fleetdx alone at
scale on synthesised traces, and the StepTimer's overhead.

    .venv/bin/python bench/steps.py [--ranks 128] [--steps 200] [--skip-scale] [--json]

1. **fleetdx vs HTA** on every real GPU trace folder of tests/fixtures/traces (HTA's own published A100 test
   data): fleetdx's parse + decomposition + temporal breakdown (:func:`fleetdx.orchestrator.steps.run.load_ranks`)
   against HTA's ``TraceAnalysis(trace_dir=...)`` + ``get_temporal_breakdown`` (what a user runs to get the same
   idle/compute/non-compute split). Each tool runs in its own fresh subprocess, per folder: time is the best of
   3 runs after imports; memory is the process's peak RSS (``VmHWM``) above its RSS after imports, and the peak
   of Python-traced allocations (``tracemalloc``, numpy and pandas buffers included) in a separate run. HTA
   parses several ranks in a multiprocessing pool: its pool workers' peak RSS (``ru_maxrss`` of children,
   imports included) is printed apart and left out of the ratio, which therefore understates HTA's memory on
   multi-rank folders.
   Needs HTA (``pip install 'fleetdx[hta]'``); without it this part is skipped with that reason.
2. **fleetdx at scale**, on traces **synthesised** from the shape of a real one (hta-sampled-128rank rank 0:
   one profiler step's events, CPU ops, launches, kernels, NCCL, replayed ``--steps`` times with shifted
   timestamps and correlation ids; about 2,400 events per step). Every rank but one links the same file (the
   rank comes from the file name ``rank-N.json.gz``); rank 77 gets a synthesised 40 ms DataLoader wait at the
   start of every step, which fleetdx must name as a straggler in its data stage. Files live in a temporary
   folder, removed at the end.
3. **StepTimer overhead**: 2,000 empty steps of 7 stages with ``sync="none"`` writing to a real file, against
   the same loop without the timer; the per-step cost as a share of a 100 ms step (the target is under 1%).

``--whole-process`` (issue 22's row: "one real trace, whole process, as users run it") measures instead, on each
real trace folder, the CPU seconds (user + sys of the process and its children, ``os.wait4``) of the whole
command as a user runs it, start-up included: ``fleetdx steps FOLDER`` against a fresh ``python -c`` that
imports HTA and runs ``TraceAnalysis(trace_dir=FOLDER).get_temporal_breakdown(visualize=False)``, with a bare
``python -c pass`` beside them; the three alternate, ``--repeat`` times, and medians are printed with the ratio
HTA / fleetdx (goal: at least 3x on one trace). The package's bytecode is compiled first, as ``pip install``
leaves it (with ``PYTHONDONTWRITEBYTECODE`` set and a stale ``__pycache__``, every run would compile again).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "traces"
REAL = ["hta-a100-16rank", "hta-a100-2rank-nccl", "hta-sampled-128rank"]
SHAPE = FIX / "hta-sampled-128rank" / "rank-0.json.gz"
STRAGGLER_RANK = 77
STRAGGLER_DATA_US = 40_000.0


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _run_fleetdx(folder: Path) -> Any:
    from fleetdx.orchestrator.steps.analyze import report
    from fleetdx.orchestrator.steps.run import load_ranks

    loaded = load_ranks([folder])
    return report(loaded.ranks)


def _run_hta(folder: Path) -> Any:
    import logging
    import warnings

    from hta.trace_analysis import TraceAnalysis

    logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TraceAnalysis(trace_dir=str(folder)).get_temporal_breakdown(visualize=False)


def worker(tool: str, folder: Path) -> dict[str, float]:
    """Runs in a fresh subprocess: imports, then 3 timed runs, then one traced run."""
    run = _run_fleetdx if tool == "fleetdx" else _run_hta
    if tool == "hta":
        import hta.trace_analysis  # noqa: F401
    else:
        import fleetdx.orchestrator.steps.run  # noqa: F401
    base = _rss_mb()
    times = []
    for _ in range(3):
        t = time.perf_counter()
        run(folder)
        times.append(time.perf_counter() - t)
    hwm = _hwm_mb()
    tracemalloc.start()
    run(folder)
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "time_s": min(times),
        "rss_after_import_mb": base,
        "peak_above_import_mb": hwm - base,
        "children_peak_rss_mb": children,
        "traced_peak_mb": traced / 2**20,
    }


def _subprocess(tool: str, folder: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", tool, str(folder)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{tool} on {folder.name} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def versus_hta() -> dict[str, Any]:
    try:
        import hta  # noqa: F401
    except ImportError:
        return {"skipped": "HolisticTraceAnalysis is not installed (pip install 'fleetdx[hta]')"}
    rows = {}
    for name in REAL:
        rows[name] = {tool: _subprocess(tool, FIX / name) for tool in ("fleetdx", "hta")}
    return rows


def synthesise(out: Path, ranks: int, steps: int) -> tuple[int, int]:
    """Write the synthesised traces (see the module docstring); returns (events per rank, bytes per file)."""
    doc = json.loads(gzip.decompress(SHAPE.read_bytes()))
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") != "Trace"]
    marks = sorted((e for e in events if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    s0, s1 = marks[0], marks[1]
    period = s1["ts"] - s0["ts"]
    template = [e for e in events if s0["ts"] <= e["ts"] < s1["ts"] and not e["name"].startswith("ProfilerStep#")]
    corr_span = max(int(e.get("args", {}).get("correlation", 0)) for e in template) + 1
    main_tid = s0["tid"]

    def write(path: Path, data_us: float) -> int:
        n = 0
        with gzip.open(path, "wt", compresslevel=1, encoding="utf-8") as f:
            f.write('{"schemaVersion": 1, "traceEvents": [\n')
            first = True
            for k in range(steps):
                shift = k * (period + data_us)
                step_ts = s0["ts"] + shift
                batch = [
                    {**s0, "name": f"ProfilerStep#{k}", "ts": step_ts, "dur": s0["dur"] + data_us},
                ]
                if data_us:
                    batch.append(
                        {
                            "ph": "X",
                            "cat": "user_annotation",
                            "name": "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                            "pid": s0["pid"],
                            "tid": main_tid,
                            "ts": step_ts,
                            "dur": data_us,
                        }
                    )
                for e in template:
                    ne = {**e, "ts": e["ts"] + shift + data_us}
                    args = e.get("args")
                    if isinstance(args, dict) and "correlation" in args:
                        ne["args"] = {**args, "correlation": int(args["correlation"]) + k * corr_span}
                    batch.append(ne)
                for e in batch:
                    f.write(("" if first else ",\n") + json.dumps(e))
                    first = False
                n += len(batch)
            f.write("\n]}\n")
        return n

    normal, slow = out / "normal.json.gz", out / "straggler.json.gz"
    n = write(normal, 0.0)
    write(slow, STRAGGLER_DATA_US)
    for r in range(ranks):
        os.link(slow if r == STRAGGLER_RANK else normal, out / f"rank-{r}.json.gz")
    normal.unlink()
    slow.unlink()
    return n, (out / "rank-0.json.gz").stat().st_size


def at_scale(ranks: int, steps: int, jobs: int) -> dict[str, Any]:
    from fleetdx.orchestrator.steps.analyze import report
    from fleetdx.orchestrator.steps.run import load_ranks

    tmp = Path(tempfile.mkdtemp(prefix="fleetdx-steps-synth-"))
    try:
        t = time.perf_counter()
        events, size = synthesise(tmp, ranks, steps)
        gen_s = time.perf_counter() - t
        base = _rss_mb()
        t = time.perf_counter()
        loaded = load_ranks([tmp], jobs=jobs)
        rep = report(loaded.ranks)
        took = time.perf_counter() - t
        found = [
            (f.code.value, f.subject, f.details.get("stage"))
            for f in rep.findings
            if f.code.value == "STEP_STRAGGLER_RANK"
        ]
        return {
            "ranks": ranks,
            "steps": steps,
            "jobs": jobs,
            "events_per_rank": events,
            "gz_bytes_per_rank": size,
            "generate_s": round(gen_s, 1),
            "analyse_s": round(took, 1),
            "events_per_s": round(ranks * events / took),
            "peak_above_start_mb": round(_hwm_mb() - base, 1),
            "stragglers_found": found,
            "errors": loaded.errors,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def timer_overhead(steps: int = 2000, sync: str = "none") -> dict[str, Any]:
    """Per-step cost of the StepTimer around empty stages. With ``sync="cuda-events"`` (a GPU machine) each
    stage records two CUDA events on an idle stream and the step ends with one ``Event.synchronize``: the
    figure is then the timer's own cost on the GPU path, without the kernels it would time."""
    from fleetdx.steps import StepTimer

    stages = ("data", "h2d", "forward", "backward", "grad_sync", "optimizer", "checkpoint")
    tmp = Path(tempfile.mkdtemp(prefix="fleetdx-steptimer-"))
    try:
        best_with = best_without = float("inf")
        for _ in range(5):
            timer = StepTimer(tmp / "steps-rank-0.jsonl", rank=0, world_size=1, host="bench", sync=sync)  # type: ignore[arg-type]
            t = time.perf_counter()
            for _ in range(steps):
                with timer.step():
                    for s in stages:
                        with timer.stage(s):
                            pass
            best_with = min(best_with, (time.perf_counter() - t) / steps)
            timer.close()
            t = time.perf_counter()
            for _ in range(steps):
                for _s in stages:
                    pass
            best_without = min(best_without, (time.perf_counter() - t) / steps)
        per_step_us = (best_with - best_without) * 1e6
        return {
            "sync": sync,
            "per_step_us": round(per_step_us, 2),
            "pct_of_100ms_step": round(100 * per_step_us / 100_000, 4),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: what a user runs to get HTA's idle / compute / non-compute split of one folder (HTA's README), in a fresh process
HTA_SCRIPT = """
import logging, sys, warnings
logging.disable(logging.WARNING)
warnings.simplefilter("ignore")
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)
"""
GOAL_RATIO = 3.0


def process_cpu(argv: list[str]) -> tuple[float, int]:
    """CPU seconds (user + sys, children included) and exit code of ``argv`` in a fresh process."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    _, status, ru = os.wait4(proc.pid, 0)
    return ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def whole_process(repeat: int, as_json: bool) -> int:
    """The ``--whole-process`` comparison (module docstring); exit 1 when no trace reaches the goal, 0 when one
    does, 3 when HTA is missing."""
    import compileall
    import statistics

    try:
        import hta  # noqa: F401
    except ImportError:
        print("skipped: HolisticTraceAnalysis is not installed (pip install 'fleetdx[hta]')")
        return 3
    compileall.compile_dir(str(ROOT / "fleetdx"), quiet=1)  # follows the links to probes/, topology/, orchestrator/
    script = Path(sys.executable).with_name("fleetdx")
    fleetdx = [str(script)] if script.exists() else [sys.executable, "-m", "fleetdx"]
    rows: dict[str, dict[str, float]] = {}
    for name in REAL:
        folder = str(FIX / name)
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "fleetdx steps": [*fleetdx, "steps", folder],
            "HTA": [sys.executable, "-c", HTA_SCRIPT, folder],
        }
        runs: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(repeat):
            for k, argv in cases.items():
                cpu, code = process_cpu(argv)
                if code not in (0, 1):  # steps exits 1 on a warning finding
                    raise RuntimeError(f"{k} on {name} exited {code}")
                runs[k].append(cpu)
        rows[name] = {k: statistics.median(v) for k, v in runs.items()}
    best = max(r["HTA"] / r["fleetdx steps"] for r in rows.values())
    if as_json:
        print(json.dumps({"repeat": repeat, "cpu_s": rows, "best_ratio": best, "goal_ratio": GOAL_RATIO}, indent=2))
    else:
        print(
            "fleetdx steps vs HTA get_temporal_breakdown, whole process: CPU s (user + sys, children), "
            f"median of {repeat}"
        )
        print(f"   {'traces':22} {'python':>7} {'fleetdx':>8} {'HTA':>7} {'HTA/fleetdx':>11} {'fleetdx/python':>14}")
        for name, r in rows.items():
            f, h, p = r["fleetdx steps"], r["HTA"], r["python -c pass"]
            print(f"   {name:22} {p:7.3f} {f:8.3f} {h:7.3f} {h / f:10.1f}x {f / p:13.1f}x")
        verdict = "met" if best >= GOAL_RATIO else "MISSED"
        print(f"goal: HTA / fleetdx at least {GOAL_RATIO:g}x on one trace: {verdict} (best {best:.1f}x)")
    return 0 if best >= GOAL_RATIO else 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=128)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes for the scale run")
    ap.add_argument("--skip-scale", action="store_true", help="skip the synthesised 128-rank run")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--timer-only", action="store_true", help="measure only the StepTimer's overhead (e.g. on a GPU machine)"
    )
    ap.add_argument("--timer-sync", default="none", help="StepTimer sync mode for the overhead: none, cuda-events...")
    ap.add_argument("--worker", nargs=2, metavar=("TOOL", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument(
        "--whole-process",
        action="store_true",
        help="CPU of the whole fleetdx steps and HTA processes, start-up included (issue 22's row)",
    )
    ap.add_argument("--repeat", type=int, default=5, help="runs of each process with --whole-process (median)")
    args = ap.parse_args()
    if args.whole_process:
        raise SystemExit(whole_process(args.repeat, args.json))
    if args.worker:
        print(json.dumps(worker(args.worker[0], Path(args.worker[1]))))
        return
    if args.timer_only:
        st = timer_overhead(sync=args.timer_sync)
        print(
            json.dumps(st)
            if args.json
            else f"StepTimer overhead (sync={st['sync']}): {st['per_step_us']} us "
            f"per step of 7 stages = {st['pct_of_100ms_step']}% of a 100 ms step (goal < 1%)"
        )
        return
    results: dict[str, Any] = {"versus_hta": versus_hta(), "steptimer": timer_overhead()}
    if not args.skip_scale:
        results["synthesised_scale"] = at_scale(args.ranks, args.steps, args.jobs)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    vs = results["versus_hta"]
    print("1. fleetdx vs HTA on real A100 traces (best of 3; memory above imports; fresh process per tool)")
    if "skipped" in vs:
        print("   skipped:", vs["skipped"])
    else:
        tot = {"fleetdx": 0.0, "hta": 0.0}
        print(
            f"   {'traces':22} {'fleetdx s':>9} {'HTA s':>7} {'speed-up':>8} | {'fleetdx MB':>10} {'HTA MB':>7} "
            f"{'ratio':>6} | {'traced fdx':>10} {'traced HTA':>10} | HTA pool workers' peak RSS"
        )
        for name, r in vs.items():
            f, h = r["fleetdx"], r["hta"]
            tot["fleetdx"] += f["time_s"]
            tot["hta"] += h["time_s"]
            print(
                f"   {name:22} {f['time_s']:9.3f} {h['time_s']:7.3f} {h['time_s'] / f['time_s']:7.1f}x | "
                f"{f['peak_above_import_mb']:10.1f} {h['peak_above_import_mb']:7.1f} "
                f"{f['peak_above_import_mb'] / h['peak_above_import_mb']:6.2f} | "
                f"{f['traced_peak_mb']:10.1f} {h['traced_peak_mb']:10.1f} | "
                + (f"{h['children_peak_rss_mb']:.0f} MB" if h["children_peak_rss_mb"] else "-")
            )
        print(
            f"   all three: fleetdx {tot['fleetdx']:.3f} s, HTA {tot['hta']:.3f} s: {tot['hta'] / tot['fleetdx']:.1f}x "
            "(goal >= 3x, memory <= 0.5)"
        )
    st = results["steptimer"]
    print(
        f"2. StepTimer overhead: {st['per_step_us']} us per step of 7 stages = {st['pct_of_100ms_step']}% "
        "of a 100 ms step (goal < 1%)"
    )
    if "synthesised_scale" in results:
        s = results["synthesised_scale"]
        print(
            f"3. fleetdx alone on SYNTHESISED traces: {s['ranks']} ranks x {s['steps']} steps, "
            f"{s['events_per_rank']} events per rank ({s['gz_bytes_per_rank'] / 2**20:.1f} MiB gz), "
            f"{s['jobs']} processes: {s['analyse_s']} s "
            f"({s['events_per_s']} events/s), "
            f"peak +{s['peak_above_start_mb']} MB; findings: {s['stragglers_found']}"
        )


if __name__ == "__main__":
    main()
