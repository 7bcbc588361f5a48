"""Benchmark of ``fleetdx postmortem`` on a large job: 1,024 ranks' interleaved logs plus 128 nodes' kernel logs.

    .venv/bin/python bench/postmortem.py [--ranks 1024] [--nodes 128] [--lines-per-rank 300]
                                         [--kernel-lines 2000] [--goal-s 10]

Everything here is **synthesised** (the files are named ``synth-*``): the line *shapes* are those of the real
logs of tests/fixtures/joblogs/ (torch's ``[rankN]:`` prefix and glog header of 01, the NCCL ``host:pid:tid
[dev]`` INFO lines of 03/07, the application batch lines of 40, a tqdm bar glued to a line as in 10, the
watchdog timeout / last enqueued-completed lines of 01, ``dmesg`` AER and XID 79 lines of 05), with host names,
ranks, times and counts made up. The job: ``nodes`` hosts x 8 ranks, each rank printing ``--lines-per-rank``
lines, interleaved through a ``host: `` collector prefix (pdsh/clush style) into one file; every rank but one
times out in ALLREDUCE SeqNum 1580, and the one left (rank 517) stopped after SeqNum 1578: its last enqueued
work is 1579. Node ``synth-node064``'s kernel log has a PCIe Surprise Down then XID 79 during the job; every
kernel log holds ``--kernel-lines`` lines of ordinary kernel noise and an mlx5 link flap before the job.

Measured: the whole ``fleetdx postmortem --logs FILE --bundles DIR... --json`` in a subprocess: wall time
(``wall_s``), CPU time and peak resident memory (``rss_mib``, ``wait4``), at a quarter and at the full log size,
so that bounded memory shows as a peak that does not grow with the log (``rss ratio``, close to 1). The JSON is
checked: the first cause is GPU_HW_FAULT on synth-node064 and the timeout names rank 517 as the suspect.
Exits 1 when the full run's wall time is over ``--goal-s``. Not a timed test: run it by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPUS_PER_NODE = 8
HUNG_RANK = 517
SEQ = 1580


def _host(i: int) -> str:
    return f"synth-node{i:03d}"


def write_job_log(path: Path, ranks: int, lines_per_rank: int) -> int:
    """The interleaved job log; returns its size in bytes."""
    with open(path, "w", encoding="utf-8") as f:
        for step in range(lines_per_rank):
            t = 7 * 3600 + step
            hh, mm, ss = t // 3600, t // 60 % 60, t % 60
            for r in range(ranks):
                host = _host(r // GPUS_PER_NODE)
                if r == HUNG_RANK and step > lines_per_rank * 3 // 4:
                    continue  # the hung rank goes quiet
                kind = (step + r) % 10
                if kind < 6:
                    f.write(
                        f"{host}: [rank{r}]:2025-03-21 {hh:02d}:{mm:02d}:{ss:02d},180 DEBUG TRAIN Batch 15/{step} "
                        f"loss 1.2477 acc 0.3437 lr 0.00055931 grad_norm 0.152029 rank {r}\n"
                    )
                elif kind < 9:
                    f.write(
                        f"{host}: {host}:3468:{3900 + r % 8} [{r % 8}] NCCL INFO Channel {step % 32:02d}/0 : "
                        f"{r}[{r % 8}] -> {(r + 8) % ranks}[{r % 8}] [send] via NET/IB/{r % 4}/GDRDMA\n"
                    )
                else:
                    f.write(
                        f"{host}: [rank{r}]:Epoch 0:   6%|██          | {step}/500150 [6:28:43<94:39:17,  1.37it/s, "
                        f"loss=2.6, v_num=95nc]\n"
                    )
        for r in range(ranks):
            if r == HUNG_RANK:
                continue
            host = _host(r // GPUS_PER_NODE)
            f.write(
                f"{host}: [rank{r}]:[E321 07:15:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
                f"collective operation timeout: WorkNCCL(SeqNum={SEQ}, OpType=ALLREDUCE, NumelIn=466119168, "
                f"NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n"
            )
            f.write(
                f"{host}: [rank{r}]:[E321 07:15:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 0 Rank {r}] Exception "
                f"(either an error or timeout) detected by watchdog at work: {SEQ}, last enqueued NCCL work: "
                f"{SEQ + 2}, last completed NCCL work: {SEQ - 1}.\n"
            )
        host = _host(HUNG_RANK // GPUS_PER_NODE)
        f.write(
            f"{host}: [rank{HUNG_RANK}]:[E321 07:15:09.1 ProcessGroupNCCL.cpp:1664] [PG 0 Rank {HUNG_RANK}] "
            f"Exception (either an error or timeout) detected by watchdog at work: {SEQ - 1}, last enqueued NCCL "
            f"work: {SEQ - 1}, last completed NCCL work: {SEQ - 2}.\n"
        )
    return path.stat().st_size


def write_kernel_logs(root: Path, nodes: int, lines: int) -> list[Path]:
    """One bundle directory per node holding ``dmesg.txt`` (``dmesg -T`` style)."""
    dirs = []
    for n in range(nodes):
        d = root / _host(n)
        d.mkdir()
        with open(d / "dmesg.txt", "w", encoding="utf-8") as f:
            for i in range(lines):
                t = 6 * 3600 + i * 2
                stamp = f"[Fri Mar 21 {t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d} 2025]"
                if i == 10:
                    f.write(f"{stamp} mlx5_core 0000:5e:00.0 ibp94s0: Link down\n")
                    f.write(f"{stamp} mlx5_core 0000:5e:00.0 ibp94s0: Link up\n")
                elif n == HUNG_RANK // GPUS_PER_NODE and i == lines - 5:
                    f.write(f"{stamp} pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: id=0010\n")
                    f.write(f"{stamp} pcieport 0000:00:02.0:    [ 5] Surprise Down Error    (First)\n")
                    f.write(
                        f"{stamp} NVRM: Xid (PCI:0000:02:00): 79, pid=4242, name=python, GPU has fallen off the bus.\n"
                    )
                else:
                    f.write(f"{stamp} systemd[1]: Started Session {i} of user u{n}.\n")
        dirs.append(d)
    return dirs


def run_cli(log: Path, bundles: list[Path], out: Path) -> dict[str, float]:
    argv = [
        sys.executable,
        "-m",
        "fleetdx",
        "postmortem",
        "--logs",
        str(log),
        "--bundles",
        *map(str, bundles),
        "--since",
        "2025-03-21T06:00:00",
        "--until",
        "2025-03-21T08:00:00",
        "--json",
    ]
    t0 = time.perf_counter()
    with open(out, "w") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.PIPE, cwd=ROOT)
        _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (2,):
        raise SystemExit(f"postmortem exited {code}: {proc.stderr.read().decode() if proc.stderr else ''}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mib": ru.ru_maxrss / 1024}


def check(out: Path) -> str:
    doc = json.loads(out.read_text())
    first = doc["causes"][0]
    timeout = next(c for c in doc["causes"] if c["code"] == "NCCL_TIMEOUT")
    node = _host(HUNG_RANK // GPUS_PER_NODE)
    assert (first["code"], first["host"]) == ("GPU_HW_FAULT", node), first
    assert (timeout["rank"], timeout["host"]) == (HUNG_RANK, node), timeout
    return (
        f"first cause {first['code']} on {first['host']}; timeout suspect rank {timeout['rank']} on {timeout['host']}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--lines-per-rank", type=int, default=300)
    ap.add_argument("--kernel-lines", type=int, default=2000)
    ap.add_argument("--goal-s", type=float, default=10.0)
    args = ap.parse_args()
    if args.ranks != args.nodes * GPUS_PER_NODE or args.ranks <= HUNG_RANK:
        ap.error(f"--ranks must be --nodes x {GPUS_PER_NODE} and above {HUNG_RANK}")
    results = {}
    with tempfile.TemporaryDirectory(prefix="fleetdx-bench-postmortem-") as tmp:
        root = Path(tmp)
        kroot = root / "bundles"
        kroot.mkdir()
        t0 = time.perf_counter()
        bundles = write_kernel_logs(kroot, args.nodes, args.kernel_lines)
        for label, per_rank in (("quarter", max(args.lines_per_rank // 4, 1)), ("full", args.lines_per_rank)):
            log = root / f"synth-job-{label}.log"
            size = write_job_log(log, args.ranks, per_rank)
            lines = sum(1 for _ in open(log, "rb"))
            fig = run_cli(log, bundles, root / f"out-{label}.json")
            verdict = check(root / f"out-{label}.json")
            results[label] = fig
            print(
                f"{label:8} job log {lines:>9,} lines {size / 2**20:7.1f} MiB + {args.nodes} kernel logs x "
                f"{args.kernel_lines} lines: wall {fig['wall_s']:.2f} s, cpu {fig['cpu_s']:.2f} s, "
                f"peak RSS {fig['rss_mib']:.0f} MiB ({verdict})"
            )
        print(f"(the whole bench, synthesis included: {time.perf_counter() - t0:.1f} s)")
    q, f = results["quarter"], results["full"]
    print(
        f"ratios full/quarter (4x the job log): wall {f['wall_s'] / q['wall_s']:.2f}, "
        f"rss {f['rss_mib'] / q['rss_mib']:.2f}"
    )
    ok = f["wall_s"] <= args.goal_s
    print(f"goal: at most {args.goal_s:.0f} s -> {'met' if ok else 'MISSED'} ({f['wall_s']:.2f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
