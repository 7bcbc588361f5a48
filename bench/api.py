"""Benchmark of the HTTP service (``fleetdx serve``) on 127.0.0.1 over a throwaway PostgreSQL.

SYNTHETIC fleet: 1,000 nodes x 8 GPUs (``node[0001-1000]``), each with ``--history`` pre-flights (default 10),
one report per node as a Slurm prolog pushes them (``fleetdx preflight --report-to``): nodes x history runs.
About 3 % of node entries carry a WARNING finding and 1 % a CRITICAL one (random, seeded); every node entry
carries the raw ``nvidia-smi topo -m`` of a real HGX H100 (tests/fixtures/topo/21_h100-sxm_8gpu-9nic_...txt)
so placement has a matrix to advise from. The switch tree is bench/topology.py's synthetic 3-level
``topology.conf``.

Measured (bounded: a fixed number of requests, each with a timeout):

- **ingestion**: the whole history is pushed through ``POST /reports`` (a write token, gzip JSON with the raw
  outputs, as ``fleetdx preflight --report-to`` sends it) by ``--ingest-concurrency`` clients: reports/s
  (goal >= 200); then ``--wide`` allocation-wide reports of 8 nodes each (one pre-flight of a whole job);
- **/metrics**: ``--scrapes`` sequential scrapes of the 1,000-node fleet: p50/p99 time, size, series;
- **placement** (when the service has ``/placement``): ``GET /placement?nodes=2&gpus_per_node=8&hostlist=
  node[0001-1000]`` at concurrency 1 and 16: p50/p99 (goal p99 <= 20 ms and >= 500 queries/s at 16), for the
  same query (the answer cache), distinct queries (each excludes another node) and distinct shapes (1-16 nodes x
  1-8 GPUs, each excluding another node), and distinct queries while ``--push-rate`` one-node reports a second
  are pushed (a prolog's traffic: each is a new run); with the CPU time the service's processes (uvicorn
  workers) spent per query;
- **baseline**: ``GET /healthz`` (no token, one ``SELECT`` of the schema revision: the service's cheapest answer)
  measured in the same run at the same concurrencies, before the placement phases; every placement line prints
  its p99, throughput and service CPU as ratios to the baseline's, so figures from a loaded, shared machine
  compare.

The query phases use a minimal keep-alive HTTP/1.1 client on raw sockets (:class:`RawClient`, one connection per
client thread), not httpx: httpx costs about 1-2 ms of CPU a request, on the same 2 cores as the service. The
bench's own CPU per query is printed beside the service's.

PostgreSQL is started as ``.ci/start-postgres.sh`` does and stopped at the end (``.ci/stop-postgres.sh``);
it needs root or the postgres user. Run: ``.venv/bin/python bench/api.py [--nodes N] [--workers W]``.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from fleetdx.orchestrator.judgement import Finding, FindingCode  # noqa: E402
from fleetdx.orchestrator.report import ProbeSummary, RunKind, assemble_report  # noqa: E402
from fleetdx.orchestrator.service.ingest import ReportUpload  # noqa: E402
from fleetdx.probes.catalog import TOPO_FILE  # noqa: E402
from fleetdx.probes.contracts import Level, RunStatus, Severity  # noqa: E402
from topology import synthetic_conf  # noqa: E402  (bench/topology.py: the same synthetic switch tree)

REAL_TOPO = ROOT / "tests" / "fixtures" / "topo" / "21_h100-sxm_8gpu-9nic_sglang-env_ansi-remnants_bond.txt"
PER_RUN = 8
INGEST_GOAL = 200.0
PLACEMENT_GOAL_P99_MS = 20.0
PLACEMENT_GOAL_QPS = 500.0
PROBES = ["nvidia-smi -L", "nvidia-smi topo -m", "nvidia-smi -q -x", "numactl -H", "lscpu -J", "dmesg"]


def host(i: int) -> str:
    return f"node{i:04d}"


def fleet_uploads(nodes: int, history: int, seed: int, per_run: int = 1, tag: str = "bench") -> list[bytes]:
    """The history as gzip JSON bodies, oldest first, ``per_run`` nodes a report (synthetic verdicts, real
    topo -m text)."""
    rng = random.Random(seed)
    topo = REAL_TOPO.read_text(encoding="utf-8")
    t0 = time.time() - history * 86400.0
    bodies = []
    for round_ in range(history):
        for start in range(1, nodes + 1, per_run):
            hosts = [host(i) for i in range(start, min(start + per_run, nodes + 1))]
            findings = []
            for h in hosts:
                r = rng.random()
                if r < 0.01:
                    findings.append(
                        Finding(
                            code=FindingCode.GPU_ECC_UNCORRECTABLE,
                            severity=Severity.CRITICAL,
                            nodes=[h],
                            subject=f"GPU{rng.randrange(8)}",
                            message="synthetic: volatile uncorrectable ECC errors",
                            details={"synthetic": True},
                        )
                    )
                elif r < 0.04:
                    findings.append(
                        Finding(
                            code=FindingCode.GPU_CLOCKS_THROTTLED,
                            severity=Severity.WARNING,
                            nodes=[h],
                            subject=f"GPU{rng.randrange(8)}",
                            message="synthetic: HW slowdown",
                            details={"synthetic": True},
                        )
                    )
            report = assemble_report(
                RunKind.PREFLIGHT,
                hosts,
                findings,
                started_at=t0 + round_ * 86400.0 + start,
                probes={h: [ProbeSummary(name=p, status=RunStatus.OK, duration_s=0.05) for p in PROBES] for h in hosts},
                level=Level.QUICK,
                run_id=f"{tag}-{round_:03d}-{start:04d}",
            )
            upload = ReportUpload(report=report, raw={h: {TOPO_FILE: topo} for h in hosts})
            bodies.append(gzip.compress(upload.model_dump_json().encode("utf-8"), compresslevel=6, mtime=0))
    return bodies


@contextmanager
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL (.ci/start-postgres.sh), stopped and removed at the end; yields its URL."""
    out = subprocess.run(
        ["bash", str(ROOT / ".ci" / "start-postgres.sh")], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    env = dict(line.removeprefix("export ").split("=", 1) for line in out.splitlines() if line.startswith("export "))
    try:
        yield env["FLEETDX_TEST_PG_URL"]
    finally:
        subprocess.run(
            ["bash", str(ROOT / ".ci" / "stop-postgres.sh")],
            env={**os.environ, "FLEETDX_CI_PG_DIR": env["FLEETDX_CI_PG_DIR"]},
            capture_output=True,
            timeout=120,
        )


def service_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its children so far (``fleetdx serve`` and its
    uvicorn workers)."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


@contextmanager
def service(db: str, port: int, workers: int, topology: Path | None) -> Iterator[tuple[str, int]]:
    cmd = [sys.executable, "-m", "fleetdx", "serve", "--db", db, "--port", str(port), "--workers", str(workers)]
    cmd.append("--no-access-log")  # a line per request to a file would be measured with the service
    if topology is not None:
        cmd += ["--topology-conf", str(topology)]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None:
                log.seek(0)
                raise SystemExit(f"fleetdx serve exited: {log.read().decode()[-2000:]}")
            time.sleep(0.2)
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


class RawClient:
    """One keep-alive HTTP/1.1 connection to ``127.0.0.1:port``: GET a path, read the status and the body (by
    ``Content-Length``, which every answer of the service carries). A few microseconds of CPU a request where
    httpx takes a millisecond or two; errors raise (the bench is bounded by the socket timeout)."""

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.port, self.timeout = port, timeout
        self.sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock, self.file = sock, sock.makefile("rb")
        return sock

    def get(self, target: str) -> tuple[int, bytes]:
        sock = self.sock or self._connect()
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode("latin-1"))
        status_line = self.file.readline(65536)
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split()[1])
        length = None
        while True:
            line = self.file.readline(65536)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        if length is None:
            raise ConnectionError(f"an answer without Content-Length (status {status})")
        return status, self.file.read(length)

    def close(self) -> None:
        if self.sock is not None:
            self.file.close()
            self.sock.close()
            self.sock = None


def timed(
    n: int, concurrency: int, call: Callable[[Any, int], None], client: Callable[[], Any] | None = None
) -> tuple[list[float], float]:
    """Run ``call`` n times over ``concurrency`` threads (one client each, ``client()``'s, default an
    ``httpx.Client``); per-call seconds and wall time."""
    times: list[float] = []
    lock = threading.Lock()
    made = [client() if client is not None else httpx.Client(timeout=30) for _ in range(concurrency)]
    clients = list(made)
    local = threading.local()
    counter = iter(range(n))
    pick = threading.Lock()

    def worker(_: int) -> None:
        if not hasattr(local, "client"):
            with pick:
                local.client = clients.pop()
        while True:
            with pick:
                i = next(counter, None)
            if i is None:
                return
            t = time.perf_counter()
            call(local.client, i)
            with lock:
                times.append(time.perf_counter() - t)

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, range(concurrency)))
    wall = time.perf_counter() - start
    for c in made:
        c.close()
    return times, wall


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1] if len(xs) > 1 else xs[0]


def ingest_baseline(port: int, concurrency: int, n: int, pid: int, ingestion: tuple[float, float]) -> None:
    """``GET /healthz`` (the service's cheapest answer) at the ingestion's concurrency, ``n`` requests, in the same
    run: the one-node ingestion's rate and service CPU per report (``ingestion``) as ratios to it."""
    rate, cpu_ms = ingestion

    def healthz(client: RawClient, _: int) -> None:
        status, body = client.get("/healthz")
        if status != 200:
            raise RuntimeError(f"/healthz {status} {body[:300]!r}")

    timed(min(n, 50), concurrency, healthz, lambda: RawClient(port))  # warm-up, not measured
    cpu = service_cpu_s(pid)
    times, wall = timed(n, concurrency, healthz, lambda: RawClient(port))
    base_ms = (service_cpu_s(pid) - cpu) / n * 1e3
    print(f"/healthz, concurrency {concurrency}: {n} queries, {n / wall:.0f} queries/s, p99 "
          f"{pct(times, 99) * 1e3:.1f} ms, service CPU {base_ms:.2f} ms/query [baseline]; one-node ingestion: "
          f"{rate / (n / wall):.2f}x its rate, {cpu_ms / base_ms:.1f}x its service CPU")  # fmt: skip


def ingest(url: str, auth: dict[str, str], pid: int, batches: list[tuple[str, list[bytes], int]], concurrency: int
           ) -> list[tuple[float, float]]:  # fmt: skip
    """Push each batch of gzip bodies through ``POST /reports`` at ``concurrency``; print and return, per batch,
    reports/s and the service's CPU ms per report."""
    out = []
    for label, batch, per in batches:
        failures: list[str] = []

        def push(client: httpx.Client, i: int, batch: list[bytes] = batch, failures: list[str] = failures) -> None:
            r = client.post(f"{url}/reports", content=batch[i], headers=auth)
            if r.status_code != 201:
                failures.append(f"{r.status_code} {r.text[:200]}")

        cpu = service_cpu_s(pid)
        times, wall = timed(len(batch), concurrency, push)
        rate = len(batch) / wall
        cpu_ms = (service_cpu_s(pid) - cpu) / len(batch) * 1e3
        print(f"ingestion of {label} reports: {len(batch)} in {wall:.1f} s = {rate:.0f} reports/s "
              f"({rate * per:.0f} node entries/s) at concurrency {concurrency}; "
              f"p50 {pct(times, 50) * 1e3:.1f} ms, p99 {pct(times, 99) * 1e3:.1f} ms per report; "
              f"service CPU {cpu_ms:.2f} ms/report; "
              f"goal >= {INGEST_GOAL:.0f}/s: {rate / INGEST_GOAL:.2f}x; failures {len(failures)}")  # fmt: skip
        if failures:
            print("  first failure:", failures[0])
        out.append((rate, cpu_ms))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--history", type=int, default=10, help="pre-flights per node")
    ap.add_argument("--workers", type=int, default=2, help="uvicorn workers")
    ap.add_argument("--ingest-concurrency", type=int, default=8)
    ap.add_argument("--wide", type=int, default=250, help="allocation-wide reports (8 nodes each) to ingest")
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--placements", type=int, default=200, help="placement queries at concurrency 1 (x4 at 16)")
    ap.add_argument("--push-rate", type=float, default=10.0, help="reports/s pushed during the last placement phase")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--ingest-only",
        action="store_true",
        help="measure ingestion, and /healthz at the same concurrency as its baseline, then stop",
    )
    args = ap.parse_args()

    from fleetdx.orchestrator.store import Store
    from fleetdx.orchestrator.store.tokens import TokenScope, create_token

    print(f"SYNTHETIC fleet: {args.nodes} nodes x 8 GPUs, {args.history} pre-flights per node, "
          f"{args.workers} uvicorn workers, PostgreSQL 15 on 127.0.0.1; {os.cpu_count()} CPUs")  # fmt: skip
    t = time.perf_counter()
    bodies = fleet_uploads(args.nodes, args.history, args.seed)
    wide = fleet_uploads(args.nodes, -(-args.wide * PER_RUN // args.nodes), args.seed + 1, PER_RUN, "wide")
    wide = wide[: args.wide]
    print(f"built {len(bodies)} one-node reports ({sum(map(len, bodies)) / len(bodies) / 1024:.1f} KiB gzip each, "
          f"with raw topo -m) and {len(wide)} {PER_RUN}-node reports in {time.perf_counter() - t:.1f} s")  # fmt: skip

    with postgres() as db, tempfile.TemporaryDirectory() as tmp:
        with Store.open(db, check_schema=False) as store:
            store.upgrade()
            token = create_token(store, "bench", TokenScope.WRITE).token
        conf = Path(tmp) / "topology.conf"
        conf.write_text(synthetic_conf(args.nodes), encoding="utf-8")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        has_topology_option = (
            "--topology-conf"
            in subprocess.run(
                [sys.executable, "-m", "fleetdx", "serve", "--help"], capture_output=True, text=True
            ).stdout
        )
        with service(db, port, args.workers, conf if has_topology_option else None) as (url, pid):
            auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Content-Encoding": "gzip"}
            batches = [("one-node", bodies, 1), (f"{PER_RUN}-node", wide, PER_RUN)]
            figures = ingest(url, auth, pid, batches[:1] if args.ingest_only else batches, args.ingest_concurrency)
            if args.ingest_only:
                ingest_baseline(port, args.ingest_concurrency, len(bodies), pid, figures[0])
                return

            sizes: list[int] = []
            series: list[int] = []

            def scrape(client: httpx.Client, _: int) -> None:
                r = client.get(f"{url}/metrics")
                r.raise_for_status()
                sizes.append(len(r.content))
                series.append(sum(1 for line in r.text.splitlines() if line and not line.startswith("#")))

            times, _ = timed(args.scrapes, 1, scrape)
            print(f"/metrics: {args.scrapes} scrapes of {args.nodes} nodes: p50 {pct(times, 50) * 1e3:.1f} ms, "
                  f"p99 {pct(times, 99) * 1e3:.1f} ms; {sizes[-1] / 1024:.0f} KiB, {series[-1]} series")  # fmt: skip

            spec = httpx.get(f"{url}/openapi.json", timeout=10).json()
            if "/placement" not in spec.get("paths", {}):
                print("placement: the service has no /placement endpoint; not measured")
                return
            params = {"nodes": 2, "gpus_per_node": 8, "hostlist": f"node[0001-{args.nodes:04d}]"}
            bad: list[str] = []

            def check(status: int, body: bytes) -> None:
                # the answer's compact JSON; a substring test keeps the bench's CPU per query small
                if status != 200 or b'"placed":true' not in body:
                    bad.append(f"{status} {body[:300]!r}")

            def healthz(client: RawClient, _: int) -> None:
                status, body = client.get("/healthz")
                if status != 200:
                    bad.append(f"/healthz {status} {body[:300]!r}")

            def placement(client: RawClient, _: int) -> None:
                check(*client.get(f"/placement?{urlencode(params)}"))

            def distinct(client: RawClient, i: int) -> None:
                # each query excludes another node: never the same question twice, so never a cached answer
                check(*client.get(f"/placement?{urlencode({**params, 'exclude': f'node{i % args.nodes + 1:04d}'})}"))

            def shapes(client: RawClient, i: int) -> None:
                # 1-16 nodes x 1-8 GPUs, each excluding another node: never the same question twice either
                q = {**params, "nodes": 1 + i % 16, "gpus_per_node": 1 << (i // 16) % 4,
                     "exclude": f"node{(i * 7) % args.nodes + 1:04d}"}  # fmt: skip
                check(*client.get(f"/placement?{urlencode(q)}"))

            live = iter(fleet_uploads(args.nodes, 1, args.seed + 2, tag="live"))  # new runs, one node each
            pushed: list[int] = []

            def pusher(stop: threading.Event) -> None:
                """One prolog's worth of traffic: a one-node report every 1/--push-rate s while the phase runs."""
                with httpx.Client(timeout=30) as client:
                    while not stop.wait(1.0 / args.push_rate):
                        body = next(live, None)
                        if body is None:
                            return
                        r = client.post(f"{url}/reports", content=body, headers=auth)
                        pushed.append(r.status_code)

            phases = (
                ("baseline", "GET /healthz (no token, one SELECT)", healthz, False),
                ("2 x 8 GPUs", "the same query (answer cache)", placement, False),
                ("2 x 8 GPUs", "distinct queries", distinct, False),
                ("1-16 nodes x 1-8 GPUs", "distinct shapes", shapes, False),
                ("2 x 8 GPUs", f"distinct queries while {args.push_rate:g} reports/s are pushed", distinct, True),
            )
            base: dict[int, tuple[float, float, float]] = {}  # concurrency -> p99 ms, queries/s, CPU ms/query
            for shape, label, query, pushing in phases:
                for concurrency, n in ((1, args.placements), (16, args.placements * 4)):
                    timed(min(n, 50), concurrency, query, lambda: RawClient(port))  # warm-up, not measured
                    stop = threading.Event()
                    feeder = threading.Thread(target=pusher, args=(stop,))
                    if pushing:
                        feeder.start()
                    cpu, own = service_cpu_s(pid), time.process_time()
                    times, wall = timed(n, concurrency, query, lambda: RawClient(port))
                    cpu_ms = (service_cpu_s(pid) - cpu) / n * 1e3
                    own_ms = (time.process_time() - own) / n * 1e3
                    stop.set()
                    if pushing:
                        feeder.join()
                    p99, rate = pct(times, 99) * 1e3, n / wall
                    what = "/healthz" if shape == "baseline" else f"placement ({shape} among {args.nodes}), {label}"
                    line = (f"{what}, concurrency {concurrency}: {n} queries, p50 {pct(times, 50) * 1e3:.1f} ms, "
                            f"p99 {p99:.1f} ms, {rate:.0f} queries/s, service CPU {cpu_ms:.2f} ms/query "
                            f"(the bench's own {own_ms:.2f} ms)")  # fmt: skip
                    if shape == "baseline":
                        base[concurrency] = (p99, rate, cpu_ms)
                        print(line + " [baseline]")
                        continue
                    b99, brate, bcpu = base[concurrency]
                    line += (f"; x baseline: p99 {p99 / b99:.2f}, queries/s {rate / brate:.2f}, "
                             f"CPU {cpu_ms / bcpu:.2f}")  # fmt: skip
                    if concurrency == 16:
                        line += (f"; goal p99 <= {PLACEMENT_GOAL_P99_MS:.0f} ms: {p99 / PLACEMENT_GOAL_P99_MS:.2f}x,"
                                 f" >= {PLACEMENT_GOAL_QPS:.0f} q/s: {rate / PLACEMENT_GOAL_QPS:.2f}x")  # fmt: skip
                    print(line + f"; not placed or failed: {len(bad)}")
            if pushed:
                stored = sum(c == 201 for c in pushed)
                print(f"  reports pushed during the last phase: {len(pushed)}, {stored} stored "
                      "(the service CPU above includes their ingestion)")  # fmt: skip
            if bad:
                print("  first:", bad[0])
    with open("/proc/loadavg", encoding="ascii") as f:
        print(f"load average at the end: {' '.join(f.read().split()[:3])}")
    print("command:", shlex.join([sys.executable, *sys.argv]))


if __name__ == "__main__":
    main()
