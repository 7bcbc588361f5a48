"""Hostile and careless inputs against the real CLI: every malformed, huge or hostile input class fleetdx is
known to meet, each run as a fresh ``python -m fleetdx`` process under a time and a memory limit.

Limits per case: ``--timeout`` seconds of wall time (default 60) and ``--max-rss-mb`` of peak resident memory
(default 1024 MiB, measured with ``wait4``); the process also runs under an address-space rlimit of 4 GiB so a
runaway cannot take the machine down.

Each case ends in one of:

* ``ok``: the command did its job (exit 0-2 with the expected output: an odd but valid input; or a pre-flight
  whose verdict is UNKNOWN, exit 3, when the stand-in tools answer nothing usable);
* ``clear error``: exit 3 (UNKNOWN: usage, input or environment error) or 4 (report not stored), with a short
  message on stderr and no traceback;
* ``traceback``: a Python traceback reached stderr;
* ``hang``: still running at the time limit (killed);
* ``over memory``: peak RSS over the limit (a case may set a lower one), or killed by the rlimit / a MemoryError;
* ``orphans``: a process a stand-in tool started (marked by a unique ``sleep`` duration) still runs after
  fleetdx returned.

Cases that need a misbehaving tool put a stand-in script first on ``PATH`` (``nvidia-smi`` that floods its
output with ``yes``, or leaves a ``setsid`` grandchild behind and returns).

The last four must be 0; the script exits 1 otherwise. Run: ``python bench/robustness.py [--only SUBSTR]``.

The hostile HTTP requests (lone surrogates, JSON nested 100,000 deep, ``1e309``, NUL in raw outputs, 100 MB
bodies with and without a length, gzip bombs, clients gone mid-body) run against one real ``fleetdx serve`` in
``bench/robustness_http.py``, which prints the same tally.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
BUNDLES = ROOT / "tests" / "fixtures" / "bundles"
AS_LIMIT = 4 << 30


@dataclass
class Case:
    name: str
    args: Callable[[Path], list[str]]  #: CLI arguments, given the scratch directory
    expect: str = "clear error"  #: "clear error" or "ok"
    bin_dir: Callable[[Path], Path] | None = None  #: a directory of stand-in tools put first on PATH
    max_rss_mb: float | None = None  #: a lower memory limit than --max-rss-mb for this case
    orphan_mark: str | None = None  #: a string in the command line of processes that must not outlive fleetdx


def _write(path: Path, data: bytes | str, times: int = 1) -> Path:
    with open(path, "wb") as f:
        chunk = data.encode() if isinstance(data, str) else data
        for _ in range(times):
            f.write(chunk)
    return path


def _fifo(d: Path) -> Path:
    p = d / "fifo"
    if not p.exists():
        os.mkfifo(p)
    return p


def _loop(d: Path) -> Path:
    p = d / "loop"
    if not p.is_symlink():
        p.symlink_to(p)
    return p


def _bundle_with_bad_entries(d: Path) -> Path:
    b = d / "badbundle"
    if not b.exists():
        shutil.copytree(BUNDLES / "h100-idle", b)
        (b / "loop.txt").symlink_to(b / "loop.txt")
        os.mkfifo(b / "pipe.txt")
        (b / "subdir").mkdir()
        (b / "nvidia-smi_topo_-m.txt").write_bytes(b"\x00\xff" * 1000)
    return b


XML_BOMB = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
    + "]><nvidia_smi_log>&lol9;</nvidia_smi_log>"
)


def _standin_bin(d: Path, name: str, body: str) -> Path:
    """``d/<name>/`` holding one stand-in ``nvidia-smi`` shell script."""
    b = d / name
    b.mkdir(exist_ok=True)
    tool = b / "nvidia-smi"
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(0o755)
    return b


#: the ``sleep`` a leaky stand-in leaves behind: a duration no other process uses
ORPHAN_MARK = "3599.17"


def _flooding_smi(d: Path) -> Path:
    return _standin_bin(d, "flood-bin", "exec yes\n")


def _leaky_smi(d: Path) -> Path:
    return _standin_bin(d, "leak-bin", f"setsid sleep {ORPHAN_MARK} >/dev/null 2>&1 </dev/null &\nexit 0\n")


def _restarted_sweep(d: Path, n_bytes: int) -> Path:
    """nccl-tests rows without their header, the 8 B..512 MiB sweep restarted until ``n_bytes``."""
    p = d / "restarted.txt"
    if not p.exists():
        src = (ROOT / "tests/fixtures/nccl/all_reduce_perf_-b8_-e512M_-f2_-g1.txt").read_text().splitlines()
        rows = "\n".join(line for line in src if line.strip()[:1].isdigit()) + "\n"
        _write(p, rows, n_bytes // len(rows) + 1)
    return p


def _bundle_with_long_nccl_line(d: Path) -> Path:
    b = d / "longline-bundle"
    if not b.exists():
        shutil.copytree(BUNDLES / "h100-idle", b)
        with open(b / "all_reduce_perf_-b8_-e512M_-f2_-g1.txt", "a") as f:
            f.write("(" * 200_000 + " [0x\n" + "x" * 200_000 + "\n")
    return b


def _gzip_bomb(d: Path) -> Path:
    import gzip

    p = d / "bomb.fleetdx-spool.json.gz"
    if not p.exists():
        with gzip.open(p, "wb", compresslevel=9) as f:
            for _ in range(1024):
                f.write(b"\0" * (4 << 20))  # 4 GiB of zeros in about 4 MB
    return p


def _fifo_spool_dir(d: Path) -> Path:
    sd = d / "fifo-spool"
    sd.mkdir(exist_ok=True)
    if not (sd / "x.fleetdx-spool.json.gz").exists():
        os.mkfifo(sd / "x.fleetdx-spool.json.gz")
    return sd


def _wrapped_log(d: Path, n_bytes: int) -> Path:
    """A job log hard-wrapped at 200 columns mid-word (a terminal's paste), every line's rest a continuation:
    the worst case of joining wrapped lines again (each logical line grows to its cap)."""
    p = d / "wrapped.log"
    if not p.exists():
        text = "watchdog caught collective operation timeout on rank three of the job " * 8
        block = "".join(text[i % 50 : i % 50 + 200] + "\n" for i in range(64)) + "x" * 120 + "\n"
        _write(p, block, n_bytes // len(block) + 1)
    return p


def _capped_lines_log(d: Path) -> Path:
    """Lines cut to one length as a reader's cap cuts them, then a CUDA error: the error is read."""
    p = d / "capped.log"
    if not p.exists():
        _write(p, "z" * 70_000 + "\n", 120)
        with open(p, "a") as f:
            f.write("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    return p


CASES = [
    Case("parse topo /dev/zero", lambda d: ["parse", "topo", "/dev/zero"]),
    Case("parse topo FIFO", lambda d: ["parse", "topo", str(_fifo(d))]),
    Case("parse nccl-tests symlink loop", lambda d: ["parse", "nccl-tests", str(_loop(d))]),
    Case("parse lscpu directory", lambda d: ["parse", "lscpu", str(d)]),
    Case("parse numactl missing file", lambda d: ["parse", "numactl", str(d / "nope.txt")]),
    Case(
        "parse nccl-tests 50 MB",
        lambda d: ["parse", "nccl-tests", str(_write(d / "nt.txt", "#  8  2  float\n", 3_500_000))],
    ),
    Case(
        "parse smi-csv 50 MB line of A", lambda d: ["parse", "smi-csv", str(_write(d / "a.csv", "A" * 1_000_000, 50))]
    ),
    Case("parse smi-xml billion laughs", lambda d: ["parse", "smi-xml", str(_write(d / "bomb.xml", XML_BOMB))]),
    Case("parse smi-xml binary garbage", lambda d: ["parse", "smi-xml", str(_write(d / "g.xml", os.urandom(65536)))]),
    Case("parse topo empty", lambda d: ["parse", "topo", str(_write(d / "empty.txt", ""))]),
    Case("parse ibstat NUL bytes", lambda d: ["parse", "ibstat", str(_write(d / "nul.txt", b"\x00" * 4096))]),
    Case(
        "parse xid 200 MB kernel log (streamed)",
        lambda d: ["parse", "xid", str(_write(d / "kern.log", "[ 1.0] usb 1-1: new device number 2\n", 5_500_000))],
        expect="ok",
    ),
    Case("parse unknown kind", lambda d: ["parse", "nosuchkind", "/etc/hostname"]),
    Case(
        "parse bundle with loop/FIFO/subdir/garbage",
        lambda d: ["parse", "bundle", str(_bundle_with_bad_entries(d))],
        "ok",
    ),
    Case(
        "analyze bundle with loop/FIFO/subdir/garbage",
        lambda d: ["analyze", str(_bundle_with_bad_entries(d)), "--json"],
        "ok",
    ),
    Case("analyze missing directory", lambda d: ["analyze", str(d / "nope")]),
    Case("analyze --gpus-per-node -3", lambda d: ["analyze", str(BUNDLES / "h100-idle"), "--gpus-per-node", "-3"]),
    Case("preflight --timeout nan", lambda d: ["preflight", "--timeout", "nan", "--no-save"]),
    Case("preflight --level bogus", lambda d: ["preflight", "--level", "bogus", "--no-save"]),
    Case("preflight bad hostlist", lambda d: ["preflight", "--nodes", "gpu[01-", "--no-save"]),
    Case("collect --out an existing file", lambda d: ["collect", "--out", str(_write(d / "file.txt", "x"))]),
    Case("history with an unusable database URL", lambda d: ["history", "h1", "--db", "nosuchdb://x"]),
    Case("history with an unreachable database", lambda d: ["history", "h1", "--db", "sqlite:////proc/nope/x.db"]),
    Case(
        "db import a garbage spool file",
        lambda d: ["db", "import", str(_write(d / "x.json.gz", os.urandom(1000))), "--db", f"sqlite:///{d}/i.db"],
    ),
    Case("topo advise on a FIFO", lambda d: ["topo", "advise", str(_fifo(d)), "--gpus", "2"]),
    Case("topo advise --gpus 0", lambda d: ["topo", "advise", str(BUNDLES / "topo-03"), "--gpus", "0"]),
    # issue 21, item 1: super-linear parsing (patterns on one long line; open tables scanned per row)
    Case(
        "parse nccl-tests 1 MB line of '('",
        lambda d: ["parse", "nccl-tests", str(_write(d / "paren.txt", "(" * 1_000_000 + "\n"))],
    ),
    Case(
        "parse nccl-tests 1 MB frame-like line",
        lambda d: ["parse", "nccl-tests", str(_write(d / "frame.txt", "a" * 1_000_000 + " [0x\n"))],
    ),
    Case(
        "parse nccl-tests 4 MiB headerless restarted sweep",
        lambda d: ["parse", "nccl-tests", str(_restarted_sweep(d, 4 << 20)), "--json"],
        "ok",
    ),
    Case(
        "analyze bundle with 200 KB nccl-tests lines", lambda d: ["analyze", str(_bundle_with_long_nccl_line(d))], "ok"
    ),
    # item 2: a tool that leaves a setsid grandchild behind
    Case(
        "collect with nvidia-smi leaving a setsid child",
        lambda d: ["collect", "--out", str(d / "leak-out"), "--replace"],
        "ok",
        bin_dir=_leaky_smi,
        orphan_mark=ORPHAN_MARK,
    ),
    Case(
        "preflight with nvidia-smi leaving a setsid child",
        lambda d: ["preflight", "--no-save", "--timeout", "20"],
        "ok",
        bin_dir=_leaky_smi,
        orphan_mark=ORPHAN_MARK,
    ),
    # item 3: db import without limits
    Case("db import /dev/zero", lambda d: ["db", "import", "/dev/zero", "--db", f"sqlite:///{d}/i.db"]),
    Case(
        "db import 4 GiB gzip bomb (4 MB)",
        lambda d: ["db", "import", str(_gzip_bomb(d)), "--db", f"sqlite:///{d}/i.db"],
    ),
    Case(
        "db import a FIFO spool file",
        lambda d: ["db", "import", str(_fifo_spool_dir(d)), "--db", f"sqlite:///{d}/i.db"],
    ),
    Case("db import /nonexistent", lambda d: ["db", "import", "/nonexistent", "--db", f"sqlite:///{d}/i.db"]),
    Case("db current on a missing SQLite file", lambda d: ["db", "current", "--db", f"sqlite:///{d}/no/dir/x.db"]),
    # item 4: a tool flooding its output; 7 nvidia-smi commands of 16 MiB kept each (was 465 MB for collect)
    Case(
        "collect with nvidia-smi flooding (yes)",
        lambda d: ["collect", "--out", str(d / "flood-out"), "--replace"],
        "ok",
        bin_dir=_flooding_smi,
        max_rss_mb=400,
    ),
    Case(
        "preflight with nvidia-smi flooding (yes)",
        lambda d: ["preflight", "--no-save", "--timeout", "20"],
        "ok",
        bin_dir=_flooding_smi,
        max_rss_mb=400,
    ),
    # issue 20: job logs as people paste them, and as no one should
    # a device or a FIFO is not read: said in missing_evidence, the verdict UNKNOWN
    Case("postmortem --logs /dev/zero", lambda d: ["postmortem", "--logs", "/dev/zero", "--no-save"], "ok"),
    Case("postmortem --logs a FIFO", lambda d: ["postmortem", "--logs", str(_fifo(d)), "--no-save"], "ok"),
    Case("postmortem --logs a missing file", lambda d: ["postmortem", "--logs", str(d / "nope.log"), "--no-save"]),
    Case(
        "postmortem --logs 64 MB in one line",
        lambda d: ["postmortem", "--logs", str(_write(d / "oneline.log", "x" * (1 << 20), 64)), "--no-save"],
        "ok",
        max_rss_mb=400,
    ),
    Case(
        "postmortem --logs 32 MB hard-wrapped at 200 columns",
        lambda d: ["postmortem", "--logs", str(_wrapped_log(d, 32 << 20)), "--no-save"],
        "ok",
        max_rss_mb=400,
    ),
    Case(
        "postmortem --logs 8 MB of lines cut to one length, then an error",
        lambda d: ["postmortem", "--logs", str(_capped_lines_log(d)), "--no-save"],
        "ok",
        max_rss_mb=400,
    ),
]


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    os.setsid()


def run_case(case: Case, scratch: Path, timeout_s: float, max_rss_mb: float) -> tuple[str, str]:
    argv = [sys.executable, "-m", "fleetdx", *case.args(scratch)]
    env = {**os.environ, "FLEETDX_DB_URL": f"sqlite:///{scratch}/bench.db", "FLEETDX_SPOOL_DIR": str(scratch / "spool")}
    if case.bin_dir is not None:
        env["PATH"] = f"{case.bin_dir(scratch)}{os.pathsep}{env.get('PATH', '')}"
    max_rss_mb = case.max_rss_mb if case.max_rss_mb is not None else max_rss_mb
    t0 = time.monotonic()
    with open(scratch / "out", "wb") as out, open(scratch / "err", "wb") as err:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=ROOT, preexec_fn=_limits
        )
        hung = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout_s:
                hung = True
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
    rss_mb = usage.ru_maxrss / 1024
    code = os.waitstatus_to_exitcode(status)
    detail = f"exit {code}, {time.monotonic() - t0:.1f} s, {rss_mb:.0f} MB"
    if hung:
        return "hang", detail
    left = _orphans(case.orphan_mark) if case.orphan_mark is not None else []
    if left:
        return "orphans", detail + f": {len(left)} processes outlived it (killed now)"
    if rss_mb > max_rss_mb:
        return "over memory", detail
    stdout = (scratch / "out").read_text(errors="replace")
    return _outcome(stdout, (scratch / "err").read_text(errors="replace"), code, detail)


def _outcome(stdout: str, stderr: str, code: int, detail: str) -> tuple[str, str]:
    if "MemoryError" in stderr or code in (-signal.SIGKILL, -signal.SIGSEGV):
        return "over memory", detail
    if "Traceback" in stderr:
        return "traceback", detail + ": " + stderr.strip().splitlines()[-1][:120]
    if code in (3, 4) and stderr.strip():
        return "clear error", detail + ": " + stderr.strip().splitlines()[0][:120]
    if code in (0, 1, 2):
        return "ok", detail
    if code == 3 and "verdict: UNKNOWN (exit 3)" in stdout:  # a run judged UNKNOWN: a verdict, not an error
        return "ok", detail + ": verdict UNKNOWN"
    return "unclear", detail + ": " + (stderr.strip().splitlines() or ["(no message)"])[0][:120]


def _orphans(mark: str) -> list[int]:
    """Kill the processes whose command line holds ``mark``; their pids."""
    time.sleep(0.2)  # a stand-in's detached child may still be starting when the command returns
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if mark in " ".join(p.info["cmdline"] or []) and p.pid != os.getpid():
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    p.kill()
                    found.append(p.pid)
            except psutil.Error:
                continue
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--max-rss-mb", type=float, default=1024.0)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    counts: Counter[str] = Counter()
    unexpected = 0
    with tempfile.TemporaryDirectory(prefix="fleetdx-robust-") as tmp:
        scratch = Path(tmp)
        for case in CASES:
            if args.only and args.only not in case.name:
                continue
            outcome, detail = run_case(case, scratch, args.timeout, args.max_rss_mb)
            counts[outcome] += 1
            mark = "" if outcome == case.expect else "   <-- expected " + case.expect
            unexpected += outcome != case.expect
            print(f"{outcome:<12} {case.name:<48} {detail}{mark}")
    tried = sum(counts.values())
    print(
        f"\ntried {tried} / clear error {counts['clear error']} / ok {counts['ok']} / unclear {counts['unclear']} / "
        f"traceback {counts['traceback']} / hang {counts['hang']} / over memory {counts['over memory']} / "
        f"orphans {counts['orphans']}"
        f"   (limits: {args.timeout:g} s, {args.max_rss_mb:g} MB RSS each)"
    )
    bad = counts["traceback"] + counts["hang"] + counts["over memory"] + counts["orphans"]
    sys.exit(1 if bad or unexpected else 0)


if __name__ == "__main__":
    main()
