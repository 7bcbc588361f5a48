"""Benchmark of the Flight Recorder analysis (``fleetdx.orchestrator.postmortem.flight.analyze_dir``) on many
ranks' full ring buffers: wall time, CPU time and peak memory, and how they grow with the rank count.

    .venv/bin/python bench/flight_recorder.py [--sizes 128,512] [--entries 2000]

The dumps are SYNTHESISED (folder ``synth_fr_<N>ranks``): every rank's dump is the real gloo dump
``tests/fixtures/flight_recorder/gloo_rank3_skips_allreduce/pickle/nccl_trace_rank_2`` with its entry repeated
``--entries`` times (PyTorch's default ``TORCH_FR_BUFFER_SIZE`` is 2000) as default-group all-reduces with
sequence ids 1..E; the last rank stops one collective short (the hung rank), so the analysis must find it at
seq E. Each size runs in a fresh process (``wait4`` gives its peak RSS and CPU time); it exits 1 if the hung
rank is not named. Not a timed test: run it by hand.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests/fixtures/flight_recorder/gloo_rank3_skips_allreduce/pickle/nccl_trace_rank_2"

CHILD = """
import sys, time
from pathlib import Path
from fleetdx.orchestrator.postmortem.flight import analyze_dir
t = time.perf_counter()
a = analyze_dir(Path(sys.argv[1]))
dt = time.perf_counter() - t
f = a.first
print(dt, f.seq_id if f else -1, ",".join(map(str, f.culprit_ranks)) if f else "")
"""


def synthesise(folder: Path, ranks: int, entries: int) -> None:
    base = pickle.loads(REAL.read_bytes())  # noqa: S301 - our own real fixture
    tmpl = base["entries"][0]
    t0 = int(tmpl["time_created_ns"])
    folder.mkdir(parents=True)
    for r in range(ranks):
        n = entries - 1 if r == ranks - 1 else entries
        ents = [
            dict(tmpl, record_id=i, collective_seq_id=i + 1, op_id=i + 1, time_created_ns=t0 + i * 1_000_000)
            for i in range(n)
        ]
        doc = dict(base, entries=ents, pg_status={"0": {"last_enqueued_collective": n, "last_started_collective": -1,
                                                        "last_completed_collective": n}})  # fmt: skip
        (folder / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(doc))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="128,512")
    ap.add_argument("--entries", type=int, default=2000)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    ok = True
    with tempfile.TemporaryDirectory(prefix="fleetdx-bench-fr-") as tmp:
        for n in sizes:
            folder = Path(tmp) / f"synth_fr_{n}ranks"
            t = time.perf_counter()
            synthesise(folder, n, args.entries)
            make_s = time.perf_counter() - t
            size_mib = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
            proc = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(folder)], stdout=subprocess.PIPE, text=True, cwd=ROOT
            )
            assert proc.stdout is not None
            out = proc.stdout.read()
            _, status, ru = os.wait4(proc.pid, 0)
            if status != 0:
                print(f"{n} ranks: analysis failed (status {status})")
                return 1
            dt_s, seq, culprits = out.split()[0], out.split()[1], (out.split() + [""])[2]
            found = seq == str(args.entries) and culprits == str(n - 1)
            ok &= found
            rows.append((n, float(dt_s), ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, size_mib, make_s, found))
    print(f"synthesised dumps, {args.entries} entries a rank (real gloo entry shape); hung rank = last rank")
    print(f"{'ranks':>6} {'analyze_s':>10} {'cpu_s':>7} {'rss_mib':>8} {'dumps_mib':>10} {'ms/rank':>8}  found")
    for n, dt, cpu, rss, mib, _, found in rows:
        print(f"{n:>6} {dt:>10.2f} {cpu:>7.2f} {rss:>8.0f} {mib:>10.1f} {1000 * dt / n:>8.1f}  {found}")
    for (n1, d1, *_), (n2, d2, *_) in zip(rows, rows[1:], strict=False):
        print(f"growth {n1}->{n2} ranks ({n2 / n1:.0f}x): analyze_s x{d2 / d1:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
