"""Benchmark of the pre-flight: the whole command as a user runs it, then the orchestration inside it.

Part 1, the whole command (``--whole``, default on): ``fleetdx preflight`` in a fresh process, timed from
process start to exit -- interpreter and imports, Ray start and stop, probes, diagnosis, and the save into a
fresh SQLite file -- for this machine, side by side on its two paths (a live run, real commands; no GPU here,
so the verdict is UNKNOWN): the local path (the default for one node: probes in-process, no Ray) and the Ray
path (``--ray-address local``: a private local Ray is started and stopped), and for ``--simulate`` runs of 1,
2 and 4 nodes replaying the idle H100 bundle (Ray's local cluster start is part of the figure). Each is run
with and without ``--no-save`` (the difference is the save) next to ``fleetdx --version`` (process start and CLI
import alone).

Part 2, the orchestration alone, on one simulated cluster kept up: the time from "all nodes joined" to the
verdict (quick level) for 1, 2, 4 and 8 nodes, and the orchestrator's own overhead per node.

One simulated cluster of 8 nodes (``ray.cluster_utils.Cluster``); each node replays a copy of the real idle
H100 bundle (tests/fixtures/bundles/h100-idle), so the probes themselves cost almost nothing and what is timed
is fleetdx: Ray task submission and pinning, the in-node ``collect`` over the replay runner, moving the raw
bundle back, parsing (``node_facts``) and the diagnosis. Runs on the first N nodes of the cluster,
``--repeat``times each (median reported, the first run of each size included: Ray starts workers lazily).

Columns: ``wall_s`` run_preflight end to end; ``fanout_s`` Ray fan-out until the last bundle is back;
``collect_s`` slowest node's in-task collect time (from its bundle's command timestamps); ``diagnose_s``
parse + rules; ``overhead_ms_per_node`` = (wall_s - collect_s) / N * 1000, the orchestrator's own cost
per node.

This measures the orchestration on this machine (2 cores shared by every simulated node), not a real GPU
node's probe time (quick-level commands take about 0.3 s on an H100 node, bench/MEASUREMENTS.md).

Run: ``.venv/bin/python bench/preflight.py [--repeat 3] [--sizes 1,2,4,8] [--no-whole]``.

Part 3, Ray on a Slurm allocation (``--allocation``, run inside one: ``sbatch -N4 --wrap
".venv/bin/python bench/preflight.py --allocation --repeat 3"``, e.g. on the throwaway cluster of
``bash .ci/slurm-cluster.sh start DIR``): the time for every node of the allocation to join Ray, fleetdx's way
(:func:`fleetdx.orchestrator.cluster.allocation.ray_on_allocation`: head, ``srun --overlap`` workers, polling,
retries, its output to a log) beside a bare join on the same allocation (``ray start --head --block`` here and
one ``srun --overlap ... ray start --address=HEAD --block`` per other node, ``ray.init`` and ``ray.nodes()``
polled until all are alive; the workers started once the head says it is up, as after a plain
``ray start --head``), alternated, each stopped before the next. Printed: median wall seconds of each,
the ratio fleetdx / bare, and this process's CPU seconds (itself and its children: the head's processes; the
workers run under slurmd, not counted).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fleetdx.orchestrator.cluster.fanout import OutcomeKind, fan_out, match_hosts, ray_node_hosts
from fleetdx.orchestrator.cluster.simulate import sim_nodes, simulated_cluster
from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import diagnose
from fleetdx.orchestrator.preflight.run import NodeJob, collect_on_node
from fleetdx.probes.bundle import BundleData
from fleetdx.probes.contracts import Level
from fleetdx.probes.facts import node_facts

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "tests" / "fixtures" / "bundles" / "h100-idle"


def _collect_s(b: BundleData) -> float:
    spans = [(c.started_at, c.started_at + (c.duration_s or 0.0)) for c in b.commands if c.started_at]
    return max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0.0


def _one(jobs: dict[str, NodeJob]) -> dict[str, float]:
    nodes = match_hosts(list(jobs), ray_node_hosts(include_real=False))
    t0 = time.perf_counter()
    outcomes = fan_out(jobs, collect_on_node, nodes=nodes, run_timeout_s=120)
    t1 = time.perf_counter()
    bundles = [o.value for o in outcomes.values() if o.kind is OutcomeKind.DONE and o.value is not None]
    if len(bundles) != len(jobs):
        raise SystemExit(f"lost nodes: {[o for o in outcomes.values() if o.kind is not OutcomeKind.DONE]}")
    diagnose(Fleet(nodes=[node_facts(b) for b in bundles]))
    t2 = time.perf_counter()
    collect = max(_collect_s(b) for b in bundles)
    return {
        "wall_s": t2 - t0,
        "fanout_s": t1 - t0,
        "collect_s": collect,
        "diagnose_s": t2 - t1,
        "overhead_ms_per_node": (t2 - t0 - collect) / len(jobs) * 1000,
    }


def _command(args: list[str], db: Path | None) -> tuple[float, int]:
    """Wall seconds and exit code of ``fleetdx ARGS`` in a fresh process (``--db`` a fresh SQLite file, or
    ``--no-save`` when ``db`` is None, for the commands that save)."""
    argv = [sys.executable, "-m", "fleetdx", *args]
    if args and args[0] == "preflight":
        argv += ["--no-save"] if db is None else ["--db", f"sqlite:///{db}"]
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT)
    return time.perf_counter() - t0, res.returncode


def whole_command(tmp: Path, repeat: int) -> None:
    """Part 1 (see the module doc)."""
    cases: list[tuple[str, list[str]]] = [("fleetdx --version (process start)", ["--version"])]
    cases.append(("preflight of this machine (local path, no Ray)", ["preflight", "--json"]))
    cases.append(("preflight of this machine (Ray path)", ["preflight", "--json", "--ray-address", "local"]))
    for n in (1, 2, 4):
        dirs = []
        for i in range(n):
            d = tmp / f"whole{n}" / f"node{i + 1:02d}"
            shutil.copytree(BUNDLE, d)
            dirs.append(str(d))
        cases.append((f"preflight --simulate, {n} node(s)", ["preflight", "--json", "--simulate", *dirs]))
    print(f"whole command, fresh process each time, median of {repeat} (exit code in brackets)")
    print(f"{'command':<48} {'with save (s)':>14} {'--no-save (s)':>14} {'save (s)':>9}")
    for i, (name, args) in enumerate(cases):
        saved = [_command(args, tmp / f"db{i}-{k}.sqlite") for k in range(repeat)]
        if args[0] != "preflight":
            print(f"{name:<48} {statistics.median(t for t, _ in saved):>14.2f}")
            continue
        unsaved = [_command(args, None) for _ in range(repeat)]
        ws, wn = statistics.median(t for t, _ in saved), statistics.median(t for t, _ in unsaved)
        print(f"{name:<48} {ws:>14.2f} {wn:>14.2f} {ws - wn:>9.2f}   [{saved[0][1]}]")


def _bare_join(hosts: list[str], tmp: Path) -> tuple[float, list[str]]:
    """Seconds for a bare ``ray start`` head here plus one ``srun --overlap ... ray start`` per other host until
    ``ray.nodes()`` shows every host alive (Part 3), and the hosts whose ``ray start`` gave up before that (a
    bare join does not try again: the seconds are then until it gave up); everything started is stopped."""
    import os
    import socket

    import ray

    from fleetdx.orchestrator.cluster.allocation import ray_executable
    from fleetdx.probes.runner import Background, stop_background

    here = socket.gethostname().split(".", 1)[0]
    ip = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]
    with socket.socket() as sock:
        sock.bind(("", 0))
        port = int(sock.getsockname()[1])
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"}  # RAY_AUTH_MODE: set by allocation_join
    temp = Path(tempfile.mkdtemp(prefix="fdx-bare-", dir="/tmp"))
    ray_bin, common = ray_executable(), ["--block", "--disable-usage-stats"]
    procs = []
    workers: dict[str, Background] = {}
    t0 = time.perf_counter()
    try:
        head = [ray_bin, "start", "--head", f"--port={port}", f"--node-ip-address={ip}", f"--temp-dir={temp}"]
        procs.append(Background([*head, "--include-dashboard=false", *common], env, open(tmp / "bare-head.log", "w+b")))  # noqa: SIM115
        deadline = time.monotonic() + 600
        while b"Ray runtime started" not in (tmp / "bare-head.log").read_bytes():  # as `ray start --head` returns
            if procs[0].poll() is not None or time.monotonic() > deadline:
                return time.perf_counter() - t0, [f"{here} (the head)"]
            time.sleep(0.25)
        for h in hosts:
            if h.split(".", 1)[0] != here:
                argv = ["srun", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={h}", ray_bin, "start"]
                log = open(tmp / f"bare-{h}.log", "w+b")  # noqa: SIM115
                workers[h] = Background([*argv, f"--address={ip}:{port}", *common], env, log)
                procs.append(workers[h])
        while True:
            try:
                ray.init(address=f"{ip}:{port}", log_to_driver=False, logging_level=logging.ERROR)
                break
            except Exception:  # noqa: BLE001 - the head is still starting: a bare loop, as a user's script would
                ray.shutdown()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        want = {h.split(".", 1)[0] for h in hosts}
        while {str(n["NodeManagerHostname"]).split(".", 1)[0] for n in ray.nodes() if n["Alive"]} < want:
            gave_up = [h for h, w in workers.items() if w.poll() is not None]
            if gave_up or time.monotonic() > deadline:
                return time.perf_counter() - t0, gave_up or ["(600 s deadline)"]
            time.sleep(0.25)
        return time.perf_counter() - t0, []
    finally:
        ray.shutdown()
        stop_background(list(reversed(procs)), 15.0)
        shutil.rmtree(temp, ignore_errors=True)


def _fleetdx_join(hosts: list[str]) -> float:
    """Seconds fleetdx's :func:`ray_on_allocation` took until every host joined (its ``join_s``)."""
    from fleetdx.orchestrator.cluster.allocation import ray_on_allocation

    with ray_on_allocation(hosts, join_timeout_s=600) as up:
        if up.lost:
            raise SystemExit(f"fleetdx: {sorted(up.lost)} did not join")
        return up.join_s


def allocation_join(repeat: int) -> None:
    """Part 3 (see the module doc)."""
    import os
    import resource

    from fleetdx.orchestrator.scheduler.targets import expand_hostlist

    os.environ.setdefault("RAY_AUTH_MODE", "token")  # Ray 2.60: before `import ray`, as fleetdx does
    hosts = expand_hostlist(os.environ["SLURM_JOB_NODELIST"])
    bare: list[float] = []
    failed: list[str] = []
    fdx: list[float] = []
    cpu: dict[str, float] = {"bare": 0.0, "fleetdx": 0.0}

    def cpu_now() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    with tempfile.TemporaryDirectory(prefix="fleetdx-bench-") as tmp:
        for _ in range(repeat):
            c0 = cpu_now()
            took, gave_up = _bare_join(hosts, Path(tmp))
            if gave_up:
                failed.append(f"{','.join(gave_up)} gave up after {took:.1f} s")
            else:
                bare.append(took)
            c1 = cpu_now()
            fdx.append(_fleetdx_join(hosts))
            cpu["bare"] += c1 - c0
            cpu["fleetdx"] += cpu_now() - c1
    b, f = (statistics.median(bare) if bare else float("nan")), statistics.median(fdx)
    print(f"Ray join on the allocation {os.environ['SLURM_JOB_NODELIST']} ({len(hosts)} nodes), median of {repeat}")
    print(f"  bare srun ray start: {b:7.1f} s wall  {cpu['bare'] / repeat:6.1f} s CPU here   runs {bare}")
    print(f"  fleetdx            : {f:7.1f} s wall  {cpu['fleetdx'] / repeat:6.1f} s CPU here   runs {fdx}")
    print(f"  fleetdx / bare     : {f / b:7.2f}")
    if failed:
        print(f"  bare joins that never completed (no retry; left out of the median): {failed}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="1,2,4,8")
    ap.add_argument("--whole", action=argparse.BooleanOptionalAction, default=True, help="time the whole command")
    ap.add_argument("--allocation", action="store_true", help="only Part 3: Ray joins on this Slurm allocation")
    args = ap.parse_args()
    if args.allocation:
        allocation_join(args.repeat)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="fleetdx-bench-") as tmp:
        if args.whole:
            whole_command(Path(tmp), args.repeat)
            print()
        dirs = []
        for i in range(max(sizes)):
            d = Path(tmp) / f"sim{i + 1:02d}"
            shutil.copytree(BUNDLE, d)
            dirs.append(d)
        t0 = time.perf_counter()
        nodes = sim_nodes(dirs)
        with simulated_cluster(nodes):
            print(
                f"simulated cluster of {len(nodes)} nodes up in {time.perf_counter() - t0:.1f} s "
                f"(replaying {BUNDLE.name}; level quick; median of {args.repeat})"
            )
            cols = ["wall_s", "fanout_s", "collect_s", "diagnose_s", "overhead_ms_per_node"]
            print(f"{'nodes':>5} " + " ".join(f"{c:>20}" for c in cols))
            for n in sizes:
                jobs = {s.host: NodeJob(host=s.host, level=Level.QUICK, bundle_dir=s.bundle_dir) for s in nodes[:n]}
                runs = [_one(jobs) for _ in range(args.repeat)]
                med = {c: statistics.median(r[c] for r in runs) for c in cols}
                print(
                    f"{n:>5} "
                    + " ".join(f"{med[c]:>20.3f}" for c in cols)
                    + f"   (first run: wall {runs[0]['wall_s']:.3f} s)"
                )


if __name__ == "__main__":
    main()
