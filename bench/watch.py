"""Benchmark of ``fleetdx watch``: the online rules on real step-time noise, and the watcher's CPU per rank.

    .venv/bin/python bench/watch.py [--ranks 1024] [--steps 60] [--json]

1. **False alarms on real noise**: the real StepTimer logs of tests/fixtures/traces (4-rank gloo DDP runs
   captured on this 2-core machine, shared with other work: ``cpu-gloo-clean-600`` is 600 steps of the clean
   run, ``cpu-gloo-clean`` and ``cpu-gloo-tiny-ops`` 14 each; and the H100 runs of one rank) are **replayed**
   through :class:`~fleetdx.orchestrator.watch.detect.OnlineDetector` step by step, as the watcher feeds it.
   Every finding there is a false alarm (the runs have no fault); the rate is per 1,000 rank-steps judged
   (after warm-up). To judge more rank-steps than one capture holds, the 600-step run is also replayed
   **recombined**: each rank's series rotated by a different number of steps (``shift``), which keeps each
   rank's own real noise but breaks the ranks' common pace (named ``recombined`` in the output).
2. **Detection delay**: the same 600-step replay with a shift **injected** into one rank's stage from an onset
   step on (+10, +20, +40 ms into ``data``, where the real run spends 0.03 ms, and into ``forward``, where it
   spends 39 +- 30 ms); the peers' ``backward`` grows by the same amount (under DDP they wait for the slow rank
   at the end of backward). Each combination runs with the slow rank 0..3 and onsets 100, 250, 400: the delay
   is ``detected_at_step - onset`` of the first ``STEP_STRAGGLER_RANK`` naming that rank and stage, a miss when
   none within 50 steps; an alarm naming another rank counts as a false alarm.
3. **CPU per rank** at ``--ranks`` (1,024) ranks: a temporary folder of one StepTimer file per rank, each
   grown by 10 steps between two watcher rounds (lines replayed from the real 600-step run, rank r taking real
   rank r % 4's line), ``--steps`` steps in all; the CPU seconds (``time.process_time``, not wall) of the
   watcher's rounds (:meth:`~fleetdx.orchestrator.watch.run.Watcher.tick`: folder scan, tails, JSON, the
   rules) against a baseline in the same run: a plain loop that stats each file, reads what was appended and
   ``json.loads`` each line, nothing else. Printed: CPU per rank-step, and the share of one core the watcher
   needs per rank at a 1 s step.
4. **StepTimer's dump-request thread**: the CPU of its check (one ``stat`` per second by default), measured by
   running it every millisecond for 2 s, as a share of a 100 ms step's second.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fleetdx.orchestrator.judgement import FindingCode  # noqa: E402
from fleetdx.orchestrator.watch.detect import OnlineDetector, StepObs  # noqa: E402
from fleetdx.orchestrator.watch.follow import steptimer_obs  # noqa: E402

TRACES = ROOT / "tests" / "fixtures" / "traces"
LONG = "cpu-gloo-clean-600"
CLEAN = ("cpu-gloo-clean-600", "cpu-gloo-clean", "cpu-gloo-tiny-ops", "h100-nccl1-slow-data", "h100-nccl1-h2d")


def load(folder: str) -> dict[int, list[StepObs]]:
    """rank -> its real steps, from ``steps-rank-N.jsonl`` or ``.jsonl.gz``."""
    out: dict[int, list[StepObs]] = {}
    for p in sorted((TRACES / folder).glob("steps-rank-*.jsonl*")):
        text = gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" else p.read_text()
        obs = [o for o in (steptimer_obs(x, p.name) for x in text.splitlines()) if o is not None]
        out[obs[0].rank or 0] = obs
    return out


def replay(ranks: dict[int, list[StepObs]], det: OnlineDetector | None = None) -> tuple[list[Any], int]:
    """Feed the series step by step, rank by rank; (findings with their step, rank-steps judged)."""
    det = det or OnlineDetector()
    n = min(len(v) for v in ranks.values())
    found = []
    for i in range(n):
        for _r, series in sorted(ranks.items()):
            o = series[i]
            found += [(i, f) for f in det.observe(o._replace(step=i), now=float(i))]
    judged = max(0, n - det.policy.warmup_steps) * len(ranks)
    return found, judged


def rotate(ranks: dict[int, list[StepObs]], shift: int) -> dict[int, list[StepObs]]:
    """Each rank's series rotated by ``shift * rank`` steps (after its warm-up): a recombination of real noise."""
    w = 5
    out = {}
    for r, s in ranks.items():
        body = s[w:]
        k = (shift * r) % len(body)
        out[r] = s[:w] + body[k:] + body[:k]
    return out


def inject(
    ranks: dict[int, list[StepObs]], slow: int, stage: str, extra: float, onset: int
) -> dict[int, list[StepObs]]:
    out = {}
    for r, s in ranks.items():
        new = []
        for i, o in enumerate(s):
            if i >= onset:
                st = dict(o.stages_ms)
                key = stage if r == slow else "backward"
                st[key] = st.get(key, 0.0) + extra
                o = o._replace(stages_ms=st, step_ms=o.step_ms + extra)
            new.append(o)
        out[r] = new
    return out


def false_alarms() -> dict[str, Any]:
    rows: dict[str, Any] = {}
    total_alarms = total_steps = 0
    for folder in CLEAN:
        ranks = load(folder)
        found, judged = replay(ranks)
        rows[folder] = {"ranks": len(ranks), "rank_steps": judged, "alarms": [f"{f.code.value}@{i}" for i, f in found]}
        total_alarms += len(found)
        total_steps += judged
    long = load(LONG)
    rec_alarms = rec_steps = 0
    straggler = 0
    for shift in range(1, 40):
        found, judged = replay(rotate(long, shift * 7))
        rec_alarms += len(found)
        straggler += sum(f.code is FindingCode.STEP_STRAGGLER_RANK for _, f in found)
        rec_steps += judged
    return {
        "replays": rows,
        "alarms": total_alarms,
        "rank_steps": total_steps,
        "per_1000_rank_steps": round(1000 * total_alarms / max(1, total_steps), 3),
        "recombined": {
            "replays": 39,
            "alarms": rec_alarms,
            "straggler_alarms": straggler,
            "rank_steps": rec_steps,
            "per_1000_rank_steps": round(1000 * rec_alarms / max(1, rec_steps), 3),
        },
    }


def delays() -> dict[str, Any]:
    long = load(LONG)
    out: dict[str, Any] = {}
    for stage in ("data", "forward"):
        for extra in (10.0, 20.0, 40.0):
            got: list[int] = []
            misses = wrong = 0
            for slow in range(4):
                for onset in (100, 250, 400):
                    found, _ = replay(inject(long, slow, stage, extra, onset))
                    hits = [
                        i - onset
                        for i, f in found
                        if f.code is FindingCode.STEP_STRAGGLER_RANK
                        and f.rank == slow
                        and f.details.get("stage") == stage
                        and onset <= i <= onset + 50
                    ]
                    wrong += sum(f.code is FindingCode.STEP_STRAGGLER_RANK and f.rank != slow for _, f in found)
                    if hits:
                        got.append(hits[0])
                    else:
                        misses += 1
            got.sort()
            out[f"{stage}+{extra:g}ms"] = {
                "runs": 12,
                "detected": len(got),
                "missed": misses,
                "delay_steps_median": got[len(got) // 2] if got else None,
                "delay_steps_max": got[-1] if got else None,
                "other_rank_alarms": wrong,
            }
    return out


def cpu(n_ranks: int, steps: int) -> dict[str, Any]:
    from fleetdx.orchestrator.watch.run import Watcher, WatchRequest

    src = load(LONG)
    lines = {
        r: [
            (TRACES / LONG / f"steps-rank-{r}.jsonl.gz").read_bytes()
            and gzip.decompress((TRACES / LONG / f"steps-rank-{r}.jsonl.gz").read_bytes()).decode().splitlines()
        ][0]
        for r in src
    }
    tmp = Path(tempfile.mkdtemp(prefix="fleetdx-bench-watch-"))
    try:
        files = [tmp / f"steps-rank-{r}.jsonl" for r in range(n_ranks)]
        for f in files:
            f.touch()
        watcher = Watcher(WatchRequest(paths=[tmp], hang_min_s=3600), lambda _f: None)
        offsets = dict.fromkeys(files, 0)
        w_cpu = b_cpu = 0.0
        parsed = 0
        for chunk in range(0, steps, 10):
            for r, f in enumerate(files):
                base = lines[r % 4]
                with f.open("a") as fh:
                    for s in range(chunk, chunk + 10):
                        d = json.loads(base[s % len(base)])
                        d["rank"], d["step"] = r, s
                        fh.write(json.dumps(d) + "\n")
            t = time.process_time()
            watcher.tick()
            w_cpu += time.process_time() - t
            t = time.process_time()
            for f in files:  # the baseline: stat, read what was appended, json.loads each line
                size = f.stat().st_size
                if size == offsets[f]:
                    continue
                with f.open("rb") as fh:
                    fh.seek(offsets[f])
                    data = fh.read()
                offsets[f] += len(data)
                for line in data.splitlines():
                    json.loads(line)
                    parsed += 1
            b_cpu += time.process_time() - t
        rank_steps = n_ranks * steps
        assert watcher.steps_read == rank_steps == parsed, (watcher.steps_read, rank_steps, parsed)
        per = w_cpu / rank_steps
        return {
            "ranks": n_ranks,
            "steps": steps,
            "watcher_cpu_s": round(w_cpu, 3),
            "baseline_cpu_s": round(b_cpu, 3),
            "ratio": round(w_cpu / b_cpu, 2) if b_cpu else None,
            "watcher_us_per_rank_step": round(1e6 * per, 1),
            "baseline_us_per_rank_step": round(1e6 * b_cpu / rank_steps, 1),
            "core_share_per_rank_at_1s_steps_pct": round(100 * per, 4),
            "cores_for_all_ranks_at_1s_steps": round(per * n_ranks, 3),
            "findings": [f.code.value for f in watcher.findings],
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def dump_thread() -> dict[str, Any]:
    from fleetdx.probes.steptimer import TRIGGER_NAME, _DumpRequests

    tmp = Path(tempfile.mkdtemp(prefix="fleetdx-bench-dumpthread-"))
    try:
        th = _DumpRequests(tmp / TRIGGER_NAME, 0, 0.001)
        t0, c0 = time.monotonic(), time.process_time()
        th.start()
        time.sleep(2.0)
        th.stop.set()
        th.join()
        wall, used = time.monotonic() - t0, time.process_time() - c0
        checks = wall / 0.001
        per_check = used / checks
        return {
            "cpu_us_per_check": round(1e6 * per_check, 2),
            "checks": int(checks),
            "share_of_a_100ms_step_at_1_check_per_s_pct": round(100 * per_check / 1.0, 5),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = {
        "false_alarms": false_alarms(),
        "delays": delays(),
        "cpu": cpu(a.ranks, a.steps),
        "dump_thread": dump_thread(),
    }
    if a.json:
        print(json.dumps(res, indent=2))
        return
    fa = res["false_alarms"]
    print("1. false alarms on real step-time noise (replays of real StepTimer logs, no fault):")
    for k, v in fa["replays"].items():
        print(f"   {k}: {v['ranks']} ranks, {v['rank_steps']} rank-steps judged, alarms: {v['alarms'] or 'none'}")
    print(f"   total: {fa['alarms']} alarms in {fa['rank_steps']} rank-steps = {fa['per_1000_rank_steps']} per 1,000")
    rc = fa["recombined"]
    print(
        f"   recombined (each rank's real series rotated, 39 replays): {rc['alarms']} alarms "
        f"({rc['straggler_alarms']} straggler) in {rc['rank_steps']} rank-steps = {rc['per_1000_rank_steps']} per 1,000"
    )
    print("2. detection delay of an injected shift (600-step real replay, 4 slow ranks x 3 onsets):")
    for k, v in res["delays"].items():
        print(
            f"   {k}: detected {v['detected']}/{v['runs']}, delay median {v['delay_steps_median']} steps, max "
            f"{v['delay_steps_max']}, alarms on another rank {v['other_rank_alarms']}"
        )
    c = res["cpu"]
    print(f"3. CPU at {c['ranks']} ranks x {c['steps']} steps (process CPU, not wall):")
    print(
        f"   watcher {c['watcher_cpu_s']} s ({c['watcher_us_per_rank_step']} us per rank-step) against a plain "
        f"read + json.loads loop {c['baseline_cpu_s']} s ({c['baseline_us_per_rank_step']} us): x{c['ratio']}"
    )
    print(
        f"   at 1 s steps: {c['core_share_per_rank_at_1s_steps_pct']}% of a core per rank, "
        f"{c['cores_for_all_ranks_at_1s_steps']} cores for all {c['ranks']} ranks; findings: {c['findings'] or 'none'}"
    )
    d = res["dump_thread"]
    print(
        f"4. StepTimer's dump-request check: {d['cpu_us_per_check']} us of CPU per check; at one check per second "
        f"{d['share_of_a_100ms_step_at_1_check_per_s_pct']}% of the training process's CPU time"
    )


if __name__ == "__main__":
    main()
