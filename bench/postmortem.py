"""Benchmark of ``fleetdx postmortem`` on a large job: 1,024 ranks' interleaved logs plus 128 nodes' kernel logs.

    .venv/bin/python bench/postmortem.py [--ranks 1024] [--nodes 128] [--lines-per-rank 300]
                                         [--kernel-lines 2000] [--goal-s 10]
                                         [--event-dense | --no-event-dense] [--dense-mb 16 64]
                                         [--dense-goal-mbps 25] [--dense-rss-mib 256] [--profile-mb 4]

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

**The event-dense case** (issue 20; ``--event-dense`` runs it alone, and the default run runs it after the case
above): a **synthesised** log ``synth-eventdense-<MB>mb.log`` of 1,024 ranks in which *every* line is a real line
of the fixtures (each non-empty line of tests/fixtures/joblogs/*.log, real logs from public threads, and of
tests/fixtures/joblogs_catalog/*.log, the message catalog's fixture lines: watchdog timeouts, NCCL WARN and INFO,
CUDA and XID errors, srun/slurmstepd errors, tracebacks, torchrun summaries...) copied unchanged behind a rank
prefix made up here: ``[rankN]:`` for even ranks, srun -l's ``N: `` for odd ones. Measured at each ``--dense-mb``
size, in the same run and the same way (a subprocess, ``os.wait4``): ``fleetdx postmortem --logs FILE --json``,
and a plain Python loop over the same file (``for line in f: if "NCCL" in line: n += 1``) as the baseline.
Printed: MB/s of CPU (file bytes / (user + sys CPU seconds), MB = 10^6 bytes), the ratio of the loop's rate to
fleetdx's, peak RSS; the goal (``--dense-goal-mbps``, 25 MB/s of CPU at every size) and the memory ceiling
(``--dense-rss-mib``, 256 MiB peak) are printed as met or MISSED and make the exit status 1 when missed.
``--profile-mb N`` also runs the postmortem under cProfile on an N MB slice of the same synthesised log and prints
where the time goes (own time and cumulative time per function, percent of the profiled total).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DIRS = (ROOT / "tests" / "fixtures" / "joblogs", ROOT / "tests" / "fixtures" / "joblogs_catalog")
DENSE_RANKS = 1024
MB = 10**6
#: the baseline: a plain Python loop over the same file, run like fleetdx (a subprocess, measured by wait4)
PLAIN_LOOP = """
import sys
n = 0
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for line in f:
        if "NCCL" in line:
            n += 1
print(n)
"""
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
    first_host, timeout_host = ((c["nodes"] or [None])[0] for c in (first, timeout))  # a cause's host comes first
    assert (first["code"], first_host) == ("GPU_HW_FAULT", node), first
    assert (timeout["rank"], timeout_host) == (HUNG_RANK, node), timeout
    return f"first cause {first['code']} on {first_host}; timeout suspect rank {timeout['rank']} on {timeout_host}"


def fixture_lines() -> list[str]:
    """Every non-empty line of the real job-log fixtures and of the catalog's fixture logs, unchanged, in file
    order (the ``.log`` files; their READMEs are not logs)."""
    out: list[str] = []
    for d in FIXTURE_DIRS:
        for path in sorted(d.glob("*.log")):
            out += [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    if not out:
        raise SystemExit(f"no fixture lines under {[str(d) for d in FIXTURE_DIRS]}")
    return out


_DIGITS = re.compile(r"\d+")


def _varied(line: str, r: int) -> str:
    """``line`` with every run of digits shifted by ``r`` (same length: ranks, pids, sequence numbers, times)."""
    return _DIGITS.sub(lambda m: str((int(m.group()) + r) % 10 ** len(m.group())).zfill(len(m.group())), line)


def write_event_dense_log(
    path: Path, target_bytes: int, lines: list[str], ranks: int = DENSE_RANKS, vary: bool = False
) -> int:
    """The synthesised event-dense log: fixture lines in turn, each behind the prefix of the next rank (rank i
    mod ``ranks``, stepping by a prime so a rank's lines are far apart); stops at the first line past
    ``target_bytes``. ``vary``: every number in a line shifted by its rank and turn, so no two ranks print the
    same words (what defeats fleetdx's per-message memo, as real logs' pids and hosts partly do). Returns the line
    count. Written in blocks (no whole file in memory)."""
    n = 0
    size = 0
    step = 389  # prime, coprime to 1,024: every rank in turn, neighbours far apart
    with open(path, "w", encoding="utf-8") as f:
        while size < target_bytes:
            block = []
            for line in lines:
                r = (n * step) % ranks
                text = _varied(line, n) if vary else line
                block.append(f"[rank{r}]:{text}\n" if r % 2 == 0 else f"{r}: {text}\n")
                n += 1
            text = "".join(block)
            f.write(text)
            size += len(text.encode("utf-8"))
    return n


class Run(NamedTuple):
    wall_s: float
    cpu_s: float  # user + sys
    rss_mib: float  # peak resident set
    exit: int
    stderr: str


def measure(argv: list[str], out: Path) -> Run:
    """Run ``argv`` (stdout to ``out``, stderr kept); its wall time, CPU seconds and peak RSS (``os.wait4``)."""
    t0 = time.perf_counter()
    with open(out, "w") as f, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=f, stderr=err, cwd=ROOT)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        err.seek(0)
        text = err.read().decode(errors="replace")
    return Run(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), text)


def _postmortem_argv(log: Path, db: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "fleetdx",
        "postmortem",
        "--logs",
        str(log),
        "--json",
        "--db",
        f"sqlite:///{db}",
        "--no-save",
    ]


def _cli_in_process(log: Path, db: Path, prof: cProfile.Profile | None = None) -> None:
    """``fleetdx postmortem --logs LOG --json`` in this process (its JSON discarded), profiled by ``prof``."""
    from fleetdx.orchestrator.cli.main import main as cli_main

    saved_out, saved_argv = sys.stdout, sys.argv
    sys.stdout = io.StringIO()
    sys.argv = ["fleetdx", *_postmortem_argv(log, db)[3:]]
    try:
        if prof is not None:
            prof.enable()
        try:
            cli_main()
        except SystemExit:
            pass
        finally:
            if prof is not None:
                prof.disable()
    finally:
        sys.stdout, sys.argv = saved_out, saved_argv


def _where(file: str, line: int, fn: str) -> str:
    rel = file.split(f"{ROOT}/")[-1]
    for marker in ("site-packages/", "lib/python3"):
        if marker in rel:
            rel = "~" + rel.split(marker)[-1]
    return f"{rel}:{line}({fn})" if line else fn


def _profile(log: Path, warm: Path, db: Path, top: int = 25) -> None:
    """cProfile of ``fleetdx postmortem --logs SLICE --json`` in this process, after an unprofiled run on the
    1-line log ``warm`` (so imports, regex compiles and the store's first open are left out): own and cumulative
    time per function as percent of the profiled total, and who calls the regex methods."""
    _cli_in_process(warm, db)
    prof = cProfile.Profile()
    _cli_in_process(log, db, prof)
    st = pstats.Stats(prof)
    total = st.total_tt  # type: ignore[attr-defined]
    rows = st.stats  # type: ignore[attr-defined]
    lines = sum(1 for _ in open(log, "rb"))
    print(
        f"\nprofile of {log.name} ({log.stat().st_size / MB:.1f} MB, {lines:,} lines; start-up excluded): "
        f"{total:.2f} s profiled (cProfile's overhead included)"
    )
    print(f"  by own time (top {top}):")
    for key, (_cc, nc, tt, ct, _callers) in sorted(rows.items(), key=lambda kv: -kv[1][2])[:top]:
        print(f"    {100 * tt / total:5.1f}% own {100 * ct / total:5.1f}% cum {nc:>10,} calls  {_where(*key)}")
    ours = ("probes/parsers/", "orchestrator/postmortem/", "orchestrator/judgement/")
    print(f"  fleetdx's parse and judgement by cumulative time (top {top}):")
    mine = [kv for kv in rows.items() if any(o in kv[0][0] for o in ours)]
    for key, (_cc, nc, tt, ct, _callers) in sorted(mine, key=lambda kv: -kv[1][3])[:top]:
        print(f"    {100 * ct / total:5.1f}% cum {100 * tt / total:5.1f}% own {nc:>10,} calls  {_where(*key)}")
    for key, (_cc, nc, tt, _ct, callers) in rows.items():
        if key[2] in ("<method 'search' of 're.Pattern' objects>", "<method 'match' of 're.Pattern' objects>"):
            print(f"  {key[2]} ({100 * tt / total:.1f}% own, {nc:,} calls, {nc / lines:.1f} a line), by caller:")
            for ck, (_c, cnc, ctt, _cct) in sorted(callers.items(), key=lambda kv: -kv[1][2])[:8]:
                print(f"    {100 * ctt / total:5.1f}% {cnc:>10,} calls  {_where(*ck)}")


def _is_report(out: Path) -> bool:
    """Whether ``out`` holds a postmortem report with findings (a run that failed early is no measurement)."""
    try:
        doc = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("kind") == "postmortem" and bool(doc.get("findings"))


def event_dense(sizes_mb: list[float], goal_mbps: float, rss_ceiling_mib: float, profile_mb: float) -> bool:
    """The event-dense case (module doc); True when the goal and the memory ceiling are met at every size."""
    from fleetdx.probes.parsers.msgcatalog import catalog

    lines = fixture_lines()
    cat = catalog()
    literal = sum(1 for line in lines if cat.may_match(line))
    print(
        f"event-dense (SYNTHESISED: {len(lines)} real fixture lines, each behind a made-up rank prefix, "
        f"{DENSE_RANKS} ranks; {100 * literal / len(lines):.0f}% of them hold a message-catalog literal)"
    )
    print(
        f"  (the {len(lines)} lines repeat: fleetdx reads the events of a repeated message body once, so this log "
        "favours it over real logs, whose bodies repeat less)"
    )
    ok = True
    with tempfile.TemporaryDirectory(prefix="fleetdx-bench-eventdense-") as tmp:
        root = Path(tmp)
        db = root / "bench.db"
        tiny = root / "synth-eventdense-1line.log"
        write_event_dense_log(tiny, 1, lines[:1])
        start = measure(_postmortem_argv(tiny, db), root / "out-1line.json")
        print(f"  start-up (a 1-line log): cpu {start.cpu_s:.2f} s, peak RSS {start.rss_mib:.0f} MiB")
        rss = []
        for mb in sizes_mb:
            log = root / f"synth-eventdense-{mb:g}mb.log"
            n = write_event_dense_log(log, int(mb * MB), lines)
            size = log.stat().st_size
            loop = measure([sys.executable, "-c", PLAIN_LOOP, str(log)], root / "loop.txt")
            fx = measure(_postmortem_argv(log, db), root / f"out-{mb:g}.json")
            if fx.exit not in (0, 1, 2) or not _is_report(root / f"out-{mb:g}.json"):
                print(f"  postmortem exited {fx.exit} without a postmortem report: {fx.stderr[-500:]}")
                ok = False
                continue
            rate = size / MB / fx.cpu_s
            net = size / MB / max(fx.cpu_s - start.cpu_s, 1e-9)
            loop_rate = size / MB / loop.cpu_s
            rss.append(fx.rss_mib)
            met = rate >= goal_mbps and fx.rss_mib <= rss_ceiling_mib
            ok = ok and met
            print(
                f"  {log.name}: {size / MB:.1f} MB, {n:,} lines | fleetdx postmortem: cpu {fx.cpu_s:.2f} s "
                f"(wall {fx.wall_s:.2f} s) = {rate:.2f} MB/s of CPU ({net:.2f} without start-up), peak RSS "
                f"{fx.rss_mib:.0f} MiB, exit {fx.exit} | plain loop: cpu {loop.cpu_s:.2f} s = "
                f"{loop_rate:.1f} MB/s of CPU, peak RSS {loop.rss_mib:.0f} MiB | loop/fleetdx "
                f"{loop_rate / rate:.1f}x"
            )
            print(
                f"    goal {goal_mbps:g} MB/s of CPU: {'met' if rate >= goal_mbps else 'MISSED'}; memory at most "
                f"{rss_ceiling_mib:g} MiB: {'met' if fx.rss_mib <= rss_ceiling_mib else 'MISSED'}"
            )
            varied = root / f"synth-eventdense-{mb:g}mb-varied.log"
            write_event_dense_log(varied, int(mb * MB), lines, vary=True)
            vx = measure(_postmortem_argv(varied, db), root / f"out-{mb:g}-varied.json")
            vsize = varied.stat().st_size
            print(
                f"    the same with every number varied (no two lines alike; for scale, not the goal's log): "
                f"cpu {vx.cpu_s:.2f} s = {vsize / MB / vx.cpu_s:.2f} MB/s of CPU, peak RSS {vx.rss_mib:.0f} MiB, "
                f"exit {vx.exit}"
            )
            varied.unlink()
        if len(rss) > 1:
            print(f"  peak RSS largest/smallest size: {rss[-1] / rss[0]:.2f} ({sizes_mb[-1] / sizes_mb[0]:g}x the log)")
        if profile_mb > 0:
            piece = root / f"synth-eventdense-{profile_mb:g}mb-profile.log"
            write_event_dense_log(piece, int(profile_mb * MB), lines)
            _profile(piece, tiny, db)
    print(f"event-dense: {'goal and memory ceiling met' if ok else 'MISSED'}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--lines-per-rank", type=int, default=300)
    ap.add_argument("--kernel-lines", type=int, default=2000)
    ap.add_argument("--goal-s", type=float, default=10.0)
    dense = ap.add_mutually_exclusive_group()
    dense.add_argument("--event-dense", action="store_true", help="run only the event-dense case")
    dense.add_argument("--no-event-dense", action="store_true", help="skip the event-dense case")
    ap.add_argument("--dense-mb", type=float, nargs="+", default=[16.0, 64.0], help="event-dense log sizes, MB")
    ap.add_argument("--dense-goal-mbps", type=float, default=25.0)
    ap.add_argument("--dense-rss-mib", type=float, default=256.0)
    ap.add_argument("--profile-mb", type=float, default=0.0, help="cProfile the postmortem on an N MB slice")
    args = ap.parse_args()
    if args.event_dense:
        return 0 if event_dense(args.dense_mb, args.dense_goal_mbps, args.dense_rss_mib, args.profile_mb) else 1
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
    if not args.no_event_dense:
        print()
        ok = event_dense(args.dense_mb, args.dense_goal_mbps, args.dense_rss_mib, args.profile_mb) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
