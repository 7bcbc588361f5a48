"""Benchmark of the Flight Recorder analysis (``fleetdx.orchestrator.postmortem.flight.analyze_dir``) on many
ranks' full ring buffers: wall time, CPU time (the worker processes' included) and peak memory, read serially
(``jobs=1``) and in worker processes (``--jobs``, default: the CPUs this process may use) in the same run, the
ratio of the two, and how they grow with the rank count. Issue 22's goal: 1,024 ranks x 2,000 entries in at
most 15 s of wall time on a 2-core machine; the last size's row says whether the parallel run met it.

    .venv/bin/python bench/flight_recorder.py [--sizes 128,1024] [--entries 2000] [--jobs N] [--own-lists]
        [--baseline DIR]

``--baseline DIR``: an earlier fleetdx source tree (``git archive <commit> | tar -x -C DIR``), run serially
beside the others as the baseline (rows ``baseline``; ratios against it). Row ``unpickle``, always run: a plain
``pickle.loads`` of every dump, serially, with no check at all (the default unpickler, safe here only because
the dumps are our own): the floor any reader of these pickles pays, and a baseline of the same run.

The dumps are SYNTHESISED (folder ``synth_fr_<N>ranks``): every rank's dump is the real gloo dump
``tests/fixtures/flight_recorder/gloo_rank3_skips_allreduce/pickle/nccl_trace_rank_2`` with its entry repeated
``--entries`` times (PyTorch's default ``TORCH_FR_BUFFER_SIZE`` is 2000) as default-group all-reduces with
sequence ids 1..E, the entries sharing the template's lists (about 96 bytes and one new container an entry;
``--own-lists``: each entry its own, as torch's pickle writes them: about 136 bytes and nine containers an
entry); the last rank stops one collective short (the hung rank), so the analysis must find it at
seq E. Each size and mode runs in a fresh process; ``wait4`` gives its CPU time and peak RSS, and, this process
being a child subreaper (Linux ``prctl``), the CPU time of the forkserver and its workers too (they are reaped
here when the analysis exits). Peak RSS is the analysing process's (each worker holds one dump at a time). The
two modes must give the same answer; it exits 1 if they differ or the hung rank is not named. The machines are
shared: compare CPU seconds and the ratios of one run, not wall times across runs. Not a timed test: run it by
hand.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests/fixtures/flight_recorder/gloo_rank3_skips_allreduce/pickle/nccl_trace_rank_2"

CHILD = """
import inspect, sys, time
from pathlib import Path
from fleetdx.orchestrator.postmortem.flight import analyze_dir
kw = {"jobs": int(sys.argv[2])} if "jobs" in inspect.signature(analyze_dir).parameters else {}  # a baseline: none
t = time.perf_counter()
a = analyze_dir(Path(sys.argv[1]), **kw)
dt = time.perf_counter() - t
f = a.first
print(dt, f.seq_id if f else -1, ",".join(map(str, f.culprit_ranks)) if f else "")
"""
FLOOR = """
import pickle, sys, time
from pathlib import Path
t = time.perf_counter()
for p in sorted(Path(sys.argv[1]).iterdir()):
    pickle.loads(p.read_bytes())  # our own synthesised dumps: the floor, not a reader
print(time.perf_counter() - t, -1, "")
"""
PR_SET_CHILD_SUBREAPER = 36
GOAL_WALL_S = 15.0  #: issue 22: 1,024 ranks x 2,000 entries


def become_subreaper() -> bool:
    """Orphaned descendants (the forkserver and its workers) are re-parented here, so their CPU time is counted."""
    try:
        return bool(ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def run_child(
    folder: Path, jobs: int, tree: Path | None = None, code: str = CHILD
) -> tuple[float, float, float, str, str]:
    """(wall s, CPU s of the analysis and every process it started, peak RSS MiB, first seq, culprits); ``tree``:
    another fleetdx source tree to import instead of this one (the baseline); ``code``: what the child runs."""
    env = dict(os.environ, PYTHONPATH=str(tree)) if tree is not None else None
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(folder), str(jobs)], stdout=subprocess.PIPE, text=True, env=env, cwd=tree
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, ru = os.wait4(proc.pid, 0)
    cpu = ru.ru_utime + ru.ru_stime
    while True:  # the forkserver, re-parented here, exits once the analysis has
        try:
            _, _, more = os.wait4(-1, 0)
        except ChildProcessError:
            break
        cpu += more.ru_utime + more.ru_stime
    if status != 0:
        raise SystemExit(f"{folder.name}, jobs={jobs}: analysis failed (status {status})")
    dt, seq, *rest = out.split()
    return float(dt), cpu, ru.ru_maxrss / 1024, seq, (rest or [""])[0]


def synthesise(folder: Path, ranks: int, entries: int, own_lists: bool = False) -> None:
    """``own_lists``: each entry gets its own process_group, sizes, dtypes and frames containers (sharing the frame
    dicts), as torch writes them; else the entries share the template's (a smaller pickle, fewer containers)."""
    base = pickle.loads(REAL.read_bytes())  # noqa: S301 - our own real fixture
    tmpl = base["entries"][0]
    t0 = int(tmpl["time_created_ns"])
    folder.mkdir(parents=True)

    def entry(i: int) -> dict[str, object]:
        e = dict(tmpl, record_id=i, collective_seq_id=i + 1, op_id=i + 1, time_created_ns=t0 + i * 1_000_000)
        if own_lists:
            e["process_group"] = tuple(tmpl["process_group"])
            e["frames"] = list(tmpl["frames"])
            for k in ("input_sizes", "output_sizes"):
                e[k] = [list(s) for s in tmpl[k]]
            for k in ("input_dtypes", "output_dtypes"):
                e[k] = list(tmpl[k])
        return e

    for r in range(ranks):
        n = entries - 1 if r == ranks - 1 else entries
        ents = [entry(i) for i in range(n)]
        doc = dict(base, entries=ents, pg_status={"0": {"last_enqueued_collective": n, "last_started_collective": -1,
                                                        "last_completed_collective": n}})  # fmt: skip
        (folder / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(doc))


def main() -> int:
    from fleetdx.orchestrator.postmortem.flight import default_jobs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="128,1024")
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=default_jobs())
    ap.add_argument("--own-lists", action="store_true", help="entries own their lists, as torch writes them")
    ap.add_argument("--baseline", type=Path, help="an earlier fleetdx source tree, run beside as the baseline")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    counted = become_subreaper()
    rows = []
    ok = True
    with tempfile.TemporaryDirectory(prefix="fleetdx-bench-fr-") as tmp:
        for n in sizes:
            folder = Path(tmp) / f"synth_fr_{n}ranks"
            synthesise(folder, n, args.entries, args.own_lists)
            size_mib = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
            load0 = os.getloadavg()[0]
            floor = run_child(folder, 1, code=FLOOR)
            base = run_child(folder, 1, args.baseline.resolve()) if args.baseline else None
            serial = run_child(folder, 1)
            parallel = run_child(folder, args.jobs)
            found = serial[3:] == parallel[3:] == (base or serial)[3:] == (str(args.entries), str(n - 1))
            ok &= found
            rows.append((n, size_mib, (load0, os.getloadavg()[0]), floor, base, serial, parallel, found))
    print(
        f"synthesised dumps, {args.entries} entries a rank (real gloo entry shape"
        + ("; entries own their lists" if args.own_lists else "; entries share their lists")
        + "); hung rank = last rank; "
        f"parallel: {args.jobs} workers" + ("" if counted else " (their CPU time NOT counted: no subreaper)")
    )
    print(
        f"{'ranks':>6} {'dumps_mib':>10} {'mode':>9} {'wall_s':>7} {'cpu_s':>7} {'cpu_ms/rank':>12} "
        f"{'wall_ms/rank':>13} {'rss_mib':>8}  found"
    )
    for n, mib, load, floor, base, serial, parallel, found in rows:
        modes = [("unpickle", floor)] + ([("baseline", base)] if base else [])
        for mode, (dt, cpu, rss, *_) in [*modes, ("serial", serial), (f"jobs={args.jobs}", parallel)]:
            print(
                f"{n:>6} {mib:>10.1f} {mode:>9} {dt:>7.2f} {cpu:>7.2f} {1000 * cpu / n:>12.1f} "
                f"{1000 * dt / n:>13.1f} {rss:>8.0f}  {found if mode != 'unpickle' else '-'}"
            )
        print(f"{n:>6} load average {load[0]:.1f} before, {load[1]:.1f} after (1 min; 2 cores here)")
        print(f"{n:>6} parallel/serial: wall x{parallel[0] / serial[0]:.2f}, cpu x{parallel[1] / serial[1]:.2f}")
        print(f"{n:>6} against unpickling alone: serial cpu x{serial[1] / floor[1]:.2f}")
        if base:
            print(
                f"{n:>6} against the baseline: serial cpu x{serial[1] / base[1]:.2f} ({base[1] / serial[1]:.1f}x "
                f"less), serial wall x{serial[0] / base[0]:.2f}, parallel wall x{parallel[0] / base[0]:.2f}"
            )
    n, *_, parallel, _ = rows[-1]
    if n == 1024 and args.entries == 2000:
        verdict = "met" if parallel[0] <= GOAL_WALL_S else "missed"
        print(f"goal (1,024 ranks x 2,000 entries in <= {GOAL_WALL_S:.0f} s wall): {verdict}, {parallel[0]:.1f} s")
    for (n1, *_, s1, p1, _), (n2, *_, s2, p2, _) in zip(rows, rows[1:], strict=False):
        print(
            f"growth {n1}->{n2} ranks ({n2 / n1:.0f}x): serial cpu x{s2[1] / s1[1]:.2f}, "
            f"parallel wall x{p2[0] / p1[0]:.2f}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
