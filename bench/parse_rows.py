"""CPU time of the nccl-tests text parser as the number of table rows grows (issue 21, item 1: it must be
linear in rows).

Inputs are made from the real sweep of ``tests/fixtures/nccl/all_reduce_perf_-b8_-e512M_-f2_-g1.txt`` (27 rows,
8 B to 512 MiB) repeated until the text reaches the size asked for:

* ``header``: the banner and column header once, then the sweep restarted again and again (``-N``, ``-d all``);
* ``headerless``: the rows alone, as pasted or filtered output shows them: each restart reads as another
  process's table, so the parser holds one more open table per restart.

For each shape it prints the CPU seconds of ``parse_nccl_tests`` at S and 4 S bytes and their ratio: a linear
parser gives about 4, a quadratic one about 16. Run: ``python bench/parse_rows.py [--mb 1]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from fleetdx.probes.parsers.nccl_tests import parse_nccl_tests

SWEEP = (
    Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "nccl" / "all_reduce_perf_-b8_-e512M_-f2_-g1.txt"
)


def make(n_bytes: int, header: bool) -> str:
    """nccl-tests text of about ``n_bytes`` bytes: the fixture's sweep restarted until that size."""
    lines = SWEEP.read_text().splitlines()
    rows = [line for line in lines if line.strip()[:1].isdigit()]
    out = list(lines[:10]) if header else []
    size = sum(len(line) + 1 for line in out)
    while size < n_bytes:
        out.extend(rows)
        size += sum(len(line) + 1 for line in rows)
    return "\n".join(out) + "\n"


def cpu_s(text: str) -> tuple[float, int, int]:
    """CPU seconds of one parse (best of 2), runs and rows read."""
    best = float("inf")
    for _ in range(2):
        t0 = time.process_time()
        report = parse_nccl_tests(text)
        best = min(best, time.process_time() - t0)
    return best, len(report.runs), sum(len(r.rows) for r in report.runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=1.0, help="the smaller input, MiB (the larger is 4 times it)")
    args = ap.parse_args()
    small = int(args.mb * (1 << 20))
    for header in (True, False):
        shape = "header" if header else "headerless"
        t1, runs1, rows1 = cpu_s(make(small, header))
        t4, runs4, rows4 = cpu_s(make(4 * small, header))
        print(
            f"{shape:<11} {args.mb:g} MiB: {rows1} rows, {runs1} runs, {t1:.2f} CPU s | "
            f"{4 * args.mb:g} MiB: {rows4} rows, {runs4} runs, {t4:.2f} CPU s | ratio {t4 / max(t1, 1e-9):.1f} "
            "(linear 4, quadratic 16)"
        )


if __name__ == "__main__":
    main()
