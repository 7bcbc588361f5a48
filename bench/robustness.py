"""Hostile and careless inputs against the real CLI: every malformed, huge or hostile input class fleetdx is
known to meet, each run as a fresh ``python -m fleetdx`` process under a time and a memory limit.

Limits per case: ``--timeout`` seconds of wall time (default 60) and ``--max-rss-mb`` of peak resident memory
(default 1024 MiB, measured with ``wait4``); the process also runs under an address-space rlimit of 4 GiB so a
runaway cannot take the machine down.

Each case ends in one of:

* ``ok``: the command did its job (exit 0-2 with the expected output: an odd but valid input);
* ``clear error``: exit 3 (UNKNOWN: usage, input or environment error) or 4 (report not stored), with a short
  message on stderr and no traceback;
* ``traceback``: a Python traceback reached stderr;
* ``hang``: still running at the time limit (killed);
* ``over memory``: peak RSS over the limit, or killed by the rlimit / a MemoryError.

The last three must be 0; the script exits 1 otherwise. Run: ``python bench/robustness.py [--only SUBSTR]``.

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

ROOT = Path(__file__).resolve().parent.parent
BUNDLES = ROOT / "tests" / "fixtures" / "bundles"
AS_LIMIT = 4 << 30


@dataclass
class Case:
    name: str
    args: Callable[[Path], list[str]]  #: CLI arguments, given the scratch directory
    expect: str = "clear error"  #: "clear error" or "ok"


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
]


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    os.setsid()


def run_case(case: Case, scratch: Path, timeout_s: float, max_rss_mb: float) -> tuple[str, str]:
    argv = [sys.executable, "-m", "fleetdx", *case.args(scratch)]
    env = {**os.environ, "FLEETDX_DB_URL": f"sqlite:///{scratch}/bench.db", "FLEETDX_SPOOL_DIR": str(scratch / "spool")}
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
    stderr = (scratch / "err").read_text(errors="replace")
    rss_mb = usage.ru_maxrss / 1024
    code = os.waitstatus_to_exitcode(status)
    detail = f"exit {code}, {time.monotonic() - t0:.1f} s, {rss_mb:.0f} MB"
    if hung:
        return "hang", detail
    if rss_mb > max_rss_mb or "MemoryError" in stderr or code in (-signal.SIGKILL, -signal.SIGSEGV):
        return "over memory", detail
    if "Traceback" in stderr:
        return "traceback", detail + ": " + stderr.strip().splitlines()[-1][:120]
    if code in (3, 4) and stderr.strip():
        return "clear error", detail + ": " + stderr.strip().splitlines()[0][:120]
    if code in (0, 1, 2):
        return "ok", detail
    return "unclear", detail + ": " + (stderr.strip().splitlines() or ["(no message)"])[0][:120]


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
        f"traceback {counts['traceback']} / hang {counts['hang']} / over memory {counts['over memory']}"
        f"   (limits: {args.timeout:g} s, {args.max_rss_mb:g} MB RSS each)"
    )
    bad = counts["traceback"] + counts["hang"] + counts["over memory"]
    sys.exit(1 if bad or unexpected else 0)


if __name__ == "__main__":
    main()
