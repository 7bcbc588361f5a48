"""Hostile HTTP requests against a real ``fleetdx serve`` (the HTTP half of ``bench/robustness.py``, whose
cases each run one CLI process; these share one server, as clients do).

The server runs on a free loopback port over a fresh SQLite database (``--db`` to use another, PostgreSQL
included) with a write token, under an address-space rlimit of 4 GiB. Each case sends one request with
``http.client`` (it sends the whole body before reading the answer, as most clients do) and ends in one of:

* ``ok``: the request was served (2xx), or the client gave up mid-body and the server stayed healthy;
* ``clear error``: a 4xx whose JSON ``detail`` is one line of text;
* ``unclear``: a 4xx without such a detail, or no answer the client could read (a connection reset);
* ``traceback``: a 5xx, or a Python traceback in the server's log during the case;
* ``hang``: no answer within ``--timeout`` seconds;
* ``over memory``: the server's peak RSS (``VmHWM``) past ``--max-rss-mb``, or the server died.

The last three must be 0; the script exits 1 otherwise (or when a case ends other than as expected).
Run: ``python bench/robustness_http.py [--only SUBSTR] [--db URL]``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.store_samples: a valid report to mutate

from tests.store_samples import migrated, preflight_raw, preflight_run  # noqa: E402

AS_LIMIT = 4 << 30
BIG = 100 << 20  #: the "100 MB body" of issue 21


@dataclass
class Request:
    path: str
    body: bytes | Callable[[], Iterator[bytes]] | None = None  #: a callable: sent chunked, without a length
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    hang_up_after: int | None = None  #: send this many body bytes, then close the connection (a client gone)


@dataclass
class Case:
    name: str
    request: Request
    expect: str = "clear error"


def _upload(run_id: str) -> dict[str, Any]:
    return {"report": preflight_run(run_id, 1_763_800_000.0).model_dump(mode="json"), "raw": preflight_raw()}


def _report_with(run_id: str, edit: Callable[[dict[str, Any]], None], raw_json: str | None = None) -> bytes:
    """A valid upload edited by ``edit``; the string "MARK" then replaced by ``raw_json`` (JSON text that
    json.dumps would not write: a lone surrogate escape, deep nesting)."""
    doc = copy.deepcopy(_upload(run_id))
    edit(doc)
    text = json.dumps(doc)
    return (text.replace('"MARK"', raw_json) if raw_json is not None else text).encode()


def _set(*keys: str | int, value: Any = "MARK") -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        node: Any = doc
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return edit


def _nul_in_raw(doc: dict[str, Any]) -> None:
    host = next(iter(doc["raw"]))
    name = next(iter(doc["raw"][host]))
    doc["raw"][host][name] = "GPU0 X\n\x00 NV18"


def _chunks(total: int, size: int = 1 << 20) -> Callable[[], Iterator[bytes]]:
    def gen() -> Iterator[bytes]:
        block = b" " * size
        for _ in range(total // size):
            yield block

    return gen


def _gzip_bomb(inflated: int) -> bytes:
    """gzip of ``inflated`` spaces (about 1 MB per GiB), made without holding them."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * (1 << 20)
    parts = [packer.compress(block) for _ in range(inflated // len(block))]
    return b"".join([*parts, packer.flush()])


def _cases() -> list[Case]:
    deep = b"[" * 100_000 + b"]" * 100_000
    place = '{"nodes": 1, "gpus_per_node": 1, "hostlist": "gpu[1-2]", %s}'
    message = _set("report", "findings", 0, "message")
    details = _set("report", "findings", 0, "details")
    big = b" " * BIG
    close = {"Connection": "close"}
    deep_list = '{"x": ' + "[" * 10_000 + "]" * 10_000 + "}"
    bomb = _gzip_bomb(1 << 30)
    return [
        Case(
            "report: lone surrogate in run_id",
            Request("/reports", _report_with("x", _set("report", "run_id"), '"\\ud800"')),
        ),
        Case("report: lone surrogate in a message", Request("/reports", _report_with("s1", message, '"a\\udc00"'))),
        Case("report: JSON 100,000 deep", Request("/reports", deep)),
        Case("report: 10,000-deep list in a finding", Request("/reports", _report_with("d1", details, deep_list))),
        Case("report: NUL in raw outputs", Request("/reports", _report_with("n1", _nul_in_raw))),
        Case("report: NaN time", Request("/reports", _report_with("t1", _set("report", "started_at"), "NaN"))),
        Case("report: 100 MB body, Connection: close", Request("/reports", big, headers=close)),
        Case("report: 100 MB body, keep-alive", Request("/reports", big)),
        Case("report: 100 MB chunked body", Request("/reports", _chunks(BIG), headers=close)),
        Case("report: 100 MB body, Expect: 100-continue", Request("/reports", big, headers={"Expect": "100-continue"})),
        Case("report: gzip bomb (1 GiB inflated)", Request("/reports", bomb, headers={"Content-Encoding": "gzip"})),
        Case("report: not JSON", Request("/reports", b"\xff\xfe{")),
        Case("report: client gone mid-body", Request("/reports", b" " * (8 << 20), hang_up_after=1 << 20), expect="ok"),
        Case("report: a valid report", Request("/reports", json.dumps(_upload("ok-1")).encode()), expect="ok"),
        Case(
            "placement: nodes 1e309",
            Request("/placement", b'{"nodes": 1e309, "gpus_per_node": 8, "hostlist": "gpu[1-4]"}'),
        ),
        Case("placement: JSON 100,000 deep", Request("/placement", deep)),
        Case(
            "placement: lone surrogate in hostlist",
            Request("/placement", (place % '"partition": "p"').replace("gpu[1-2]", "\\ud800").encode()),
        ),
        Case("placement: NUL in partition", Request("/placement", (place % '"partition": "\\u0000"').encode())),
        Case(
            "placement: lone surrogate in exclude", Request("/placement", (place % '"exclude": ["\\udfff"]').encode())
        ),
        Case("placement: 100 MB body, Connection: close", Request("/placement", big, headers=close)),
        Case("placement: a valid query", Request("/placement", (place % '"ib_port": 1').encode()), expect="ok"),
        Case("GET /runs/%00", Request("/runs/%00", method="GET")),
        Case("GET /runs/<UTF-8 of a surrogate>", Request("/runs/%ED%A0%80", method="GET")),
        Case("GET /placement nodes=1e309", Request("/placement?nodes=1e309&gpus_per_node=1&hostlist=a", method="GET")),
        Case("GET /findings?severity=<300 x>", Request("/findings?severity=" + "x" * 300, method="GET")),
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    os.setsid()


def _peak_rss_mb(pid: int) -> float:
    """The server's peak resident memory so far (``VmHWM``), MiB; the whole uvicorn process."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _send(port: int, req: Request, token: str, timeout_s: float) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", **req.headers}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        if req.hang_up_after is not None:
            assert isinstance(req.body, bytes)
            conn.putrequest(req.method, req.path)
            for k, v in {**headers, "Content-Length": str(len(req.body))}.items():
                conn.putheader(k, v)
            conn.endheaders()
            conn.send(req.body[: req.hang_up_after])
            return 0, b""
        if req.headers.get("Expect") == "100-continue":
            return _send_expecting_continue(conn, req, headers)
        body = req.body() if callable(req.body) else req.body
        conn.request(req.method, req.path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def _send_expecting_continue(
    conn: http.client.HTTPConnection, req: Request, headers: dict[str, str]
) -> tuple[int, bytes]:
    """curl's way: headers only, then the body only once the server answers ``100 Continue`` (http.client
    would skip that interim answer and wait for a final one forever)."""
    assert isinstance(req.body, bytes)
    conn.connect()
    sock = conn.sock
    head = f"{req.method} {req.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(req.body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sock.sendall(head.encode())
    reader = sock.makefile("rb")
    status, length = _read_head(reader)
    if status == 100:
        sock.sendall(req.body)
        status, length = _read_head(reader)
    return status, reader.read(length)


def _read_head(reader: Any) -> tuple[int, int]:
    """The status and Content-Length of the next answer on ``reader`` (its head read)."""
    status = int(reader.readline().split()[1])
    length = 0
    while (line := reader.readline().strip()) != b"":
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, length


def _judge(status: int, body: bytes, case: Case, logged: str, healthy: bool) -> tuple[str, str]:
    if "Traceback" in logged or status >= 500:
        tail = [line for line in logged.splitlines() if line.strip()][-1:] or [body[:120].decode(errors="replace")]
        return "traceback", f"{status}: {tail[0][:120]}"
    if case.request.hang_up_after is not None:
        return ("ok", "server healthy after the client left") if healthy else ("unclear", "server unhealthy")
    if 200 <= status < 300:
        return "ok", str(status)
    try:
        detail = json.loads(body)["detail"]
    except (ValueError, KeyError, TypeError):
        return "unclear", f"{status}: {body[:120]!r}"
    if 400 <= status < 500 and isinstance(detail, str) and "\n" not in detail:
        return "clear error", f"{status}: {detail[:110]}"
    return "unclear", f"{status}: {str(detail)[:110]}"


@dataclass
class Server:
    """The ``fleetdx serve`` under test: its process, port, write token and log file."""

    proc: subprocess.Popen[bytes]
    port: int
    token: str
    log: Path


def run_case(case: Case, srv: Server, args: Any) -> tuple[str, str]:
    port, token, server, log = srv.port, srv.token, srv.proc, srv.log
    start = log.stat().st_size
    t0 = time.monotonic()
    try:
        status, body = _send(port, case.request, token, args.timeout)
    except TimeoutError:
        return "hang", f"no answer in {args.timeout:g} s"
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        status, body = -1, f"{type(e).__name__}: {e}".encode()
    wall = time.monotonic() - t0
    time.sleep(0.2)  # the server's log lines of this request
    with open(log, "rb") as f:
        f.seek(start)
        logged = f.read().decode(errors="replace")
    if server.poll() is not None:
        return "over memory", f"the server died (exit {server.returncode})"
    rss = _peak_rss_mb(server.pid)
    if rss > args.max_rss_mb:
        return "over memory", f"server peak RSS {rss:.0f} MB"
    healthy = _healthy(port)
    if status == -1:
        return "unclear", body.decode()[:120]
    outcome, detail = _judge(status, body, case, logged, healthy)
    return outcome, f"{wall:.1f} s, peak {rss:.0f} MB, {detail}"


def _healthy(port: int) -> bool:
    with contextlib.suppress(OSError, http.client.HTTPException):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    return False


def _start_server(db: str, scratch: Path) -> Server:
    from fleetdx.orchestrator.store import Store
    from fleetdx.orchestrator.store.tokens import TokenScope, create_token

    with Store.open(migrated(db)) as store:
        token = create_token(store, "bench", TokenScope.WRITE).token
    port = _free_port()
    log = scratch / "server.log"
    cmd = [sys.executable, "-m", "fleetdx", "serve", "--port", str(port), "--db", db, "--no-access-log"]
    with open(log, "wb") as out:
        server = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_limits
        )
    for _ in range(300):
        if _healthy(port):
            return Server(server, port, token, log)
        if server.poll() is not None:
            break
        time.sleep(0.2)
    server.kill()
    raise SystemExit(f"fleetdx serve did not start: {log.read_text()[-500:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--max-rss-mb", type=float, default=1024.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--db", default="", help="database URL (default: a fresh SQLite file)")
    args = ap.parse_args()
    counts: Counter[str] = Counter()
    unexpected = 0
    with tempfile.TemporaryDirectory(prefix="fleetdx-robust-http-") as tmp:
        scratch = Path(tmp)
        srv = _start_server(args.db or f"sqlite:///{scratch}/bench.db", scratch)
        try:
            for case in _cases():
                if args.only and args.only not in case.name:
                    continue
                outcome, detail = run_case(case, srv, args)
                counts[outcome] += 1
                mark = "" if outcome == case.expect else "   <-- expected " + case.expect
                unexpected += outcome != case.expect
                print(f"{outcome:<12} {case.name:<44} {detail}{mark}", flush=True)
        finally:
            srv.proc.terminate()
            srv.proc.wait(timeout=30)
    tried = sum(counts.values())
    print(
        f"\ntried {tried} / clear error {counts['clear error']} / ok {counts['ok']} / unclear {counts['unclear']} / "
        f"traceback {counts['traceback']} / hang {counts['hang']} / over memory {counts['over memory']}"
        f"   (limits: {args.timeout:g} s each, {args.max_rss_mb:g} MB server RSS)"
    )
    bad = counts["traceback"] + counts["hang"] + counts["over memory"]
    sys.exit(1 if bad or unexpected else 0)


if __name__ == "__main__":
    main()
