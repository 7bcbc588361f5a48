"""Held-out evaluation of ``fleetdx postmortem`` on real failed-job logs it was not built from.

    .venv/bin/python bench/postmortem_wild.py [--dir tests/fixtures/joblogs_wild] [--only SUBSTRING] [--json]
                                              [--src TREE]

The logs of tests/fixtures/joblogs_wild/ are real: each is a log block copied from a public GitHub thread of one
of many projects (SOURCES.md lists them), kept out of the shared fixtures so that no pattern was written against
them. LABELS.yaml holds, per file, what the log and its thread show: the failure class (a fleetdx finding code),
the first failing rank and the host at fault where the log shows them (null where it does not), and why.

For each file this runs ``fleetdx postmortem --logs FILE --json --no-save`` (a subprocess, the installed CLI; with
``--src TREE``, ``python -m fleetdx`` with TREE first on ``PYTHONPATH``, e.g. a ``git archive HEAD`` export, so
that a shared working tree that others are editing does not change the figures mid-run) and compares the
**first cause** of the JSON (``causes[0]``; none: ``UNKNOWN``) with the label:

- class right: the first cause's ``code`` equals the labelled class;
- rank right: compared only where a rank is labelled: the first cause's ``rank`` equals it;
- host right: compared only where a host is labelled: the labelled host is one of the first cause's ``nodes``
  (case-insensitive; a node such as ``HOST-ib`` or ``HOST.domain`` counts as HOST);
- all right: class right and every labelled field right.

Files whose label has ``seen`` (the same thread was already used to build fleetdx: a catalog row's
``fixture_source`` or a variant test) are not held out: the totals are printed for all files and for the unseen
ones alone. Printed: one line per file (ok / MISS and which part, ``(seen)`` marked), the totals, then one line
per miss with what fleetdx said (code, rank, nodes and the start of its message). Exit 0 always (this measures;
it is not a gate). A fleetdx run that fails (no JSON) counts as wrong in every compared part and is shown as such.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = ROOT / "tests" / "fixtures" / "joblogs_wild"
FLEETDX = ROOT / ".venv" / "bin" / "fleetdx"


@dataclass
class Result:
    """One file's comparison: what was labelled, what fleetdx said, and which parts agree."""

    name: str
    label: dict[str, Any]
    code: str
    rank: int | None
    nodes: list[str]
    message: str
    error: str = ""
    class_ok: bool = False
    rank_ok: bool | None = None  # None: no rank labelled, not compared
    host_ok: bool | None = None  # None: no host labelled, not compared
    misses: list[str] = field(default_factory=list)

    @property
    def all_ok(self) -> bool:
        return self.class_ok and self.rank_ok is not False and self.host_ok is not False


def _same_host(label: str, node: str) -> bool:
    a, b = label.lower(), node.lower()
    if a == b:
        return True
    for sep in (".", "-ib"):
        if b.startswith(a + sep):
            return True
    return False


def run_one(path: Path, src: Path | None = None) -> tuple[dict[str, Any] | None, str]:
    """Run the postmortem on one file; returns (the first cause or {}, error text)."""
    args = ["postmortem", "--logs", str(path.resolve()), "--json", "--no-save"]
    env = dict(os.environ)
    if src is None:
        cmd, cwd = [str(FLEETDX), *args], ROOT
    else:
        cmd, cwd = [sys.executable, "-m", "fleetdx", *args], src
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(src.resolve()), env.get("PYTHONPATH", "")) if p)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=cwd, env=env)
    except subprocess.TimeoutExpired:
        return None, "timed out after 300 s"
    try:
        doc = json.loads(res.stdout)
    except json.JSONDecodeError:
        return None, f"exit {res.returncode}, no JSON: {(res.stderr or res.stdout).strip()[:200]}"
    causes = doc.get("causes") or []
    return (causes[0] if causes else {}), ""


def judge(name: str, label: dict[str, Any], cause: dict[str, Any] | None, error: str) -> Result:
    """Compare the first cause with the label (see the module docstring for the rules)."""
    cause = cause or {}
    code = str(cause.get("code") or ("ERROR" if error else "UNKNOWN"))
    rank = cause.get("rank")
    nodes = [str(n) for n in (cause.get("nodes") or [])]
    r = Result(name, label, code, rank, nodes, str(cause.get("message") or ""), error)
    r.class_ok = not error and code == label["class"]
    if not r.class_ok:
        r.misses.append("class")
    if label.get("rank") is not None:
        r.rank_ok = not error and rank == label["rank"]
        if not r.rank_ok:
            r.misses.append("rank")
    if label.get("host") is not None:
        r.host_ok = not error and any(_same_host(str(label["host"]), n) for n in nodes)
        if not r.host_ok:
            r.misses.append("host")
    return r


def _totals(results: list[Result]) -> dict[str, int]:
    return {
        "files": len(results),
        "class_right": sum(r.class_ok for r in results),
        "rank_labelled": sum(r.rank_ok is not None for r in results),
        "rank_right": sum(r.rank_ok is True for r in results),
        "host_labelled": sum(r.host_ok is not None for r in results),
        "host_right": sum(r.host_ok is True for r in results),
        "all_right": sum(r.all_ok for r in results),
    }


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "0/0"


def _print_totals(title: str, t: dict[str, int]) -> None:
    n = t["files"]
    print(f"{title}: {n} files")
    print(f"  class right      {_pct(t['class_right'], n)}")
    print(f"  rank right       {_pct(t['rank_right'], t['rank_labelled'])}  (of files with a labelled rank)")
    print(f"  host right       {_pct(t['host_right'], t['host_labelled'])}  (of files with a labelled host)")
    print(f"  all three right  {_pct(t['all_right'], n)}  (class, and rank/host where labelled)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="folder with the .log files and LABELS.yaml")
    ap.add_argument("--only", default="", help="run only the files whose name contains this")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead")
    ap.add_argument("--src", type=Path, default=None, help="run fleetdx from this source tree (python -m fleetdx)")
    args = ap.parse_args(argv)

    labels: dict[str, dict[str, Any]] = yaml.safe_load((args.dir / "LABELS.yaml").read_text())
    results: list[Result] = []
    for name in sorted(labels):
        if args.only and args.only not in name:
            continue
        cause, error = run_one(args.dir / name, args.src)
        r = judge(name, labels[name], cause, error)
        results.append(r)
        if not args.json:
            mark = "ok  " if r.all_ok else "MISS"
            seen = " (seen)" if r.label.get("seen") else ""
            print(f"{mark} {name[:70]:70s} {'' if r.all_ok else ','.join(r.misses)}{seen}", flush=True)

    totals = _totals(results)
    unseen = _totals([r for r in results if not r.label.get("seen")])
    if args.json:
        out = {
            "totals": totals,
            "totals_unseen": unseen,
            "results": [
                {
                    "file": r.name,
                    "label": {k: r.label.get(k) for k in ("class", "rank", "host", "seen")},
                    "said": {"code": r.code, "rank": r.rank, "nodes": r.nodes, "message": r.message},
                    "error": r.error,
                    "misses": r.misses,
                }
                for r in results
            ],
        }
        print(json.dumps(out, indent=2))
        return 0

    print()
    _print_totals("all files", totals)
    _print_totals("unseen files only (held out: no label 'seen')", unseen)
    misses = [r for r in results if not r.all_ok]
    if misses:
        print()
        print("misses (label -> what fleetdx said):")
    for r in misses:
        lab = r.label
        said = r.error or f"{r.code} rank={r.rank} nodes={r.nodes} | {r.message[:160]}"
        seen = " (seen)" if lab.get("seen") else ""
        print(f"- {r.name}{seen}: {lab['class']} rank={lab.get('rank')} host={lab.get('host')} -> {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
