"""``fleetdx serve``: the HTTP API (:mod:`fleetdx.orchestrator.service.api`) over the store, with uvicorn.

Each uvicorn worker builds its app with :func:`app_from_env` from the settings this command puts in the
environment (``FLEETDX_DB_URL``, ``FLEETDX_API_AUTH_READS``, ``FLEETDX_API_MAX_BODY_BYTES``, ...), so
``--workers N`` runs N stateless processes over one database (PostgreSQL in production): tokens, reports and
the metrics' fleet series live in the database; only request latency is per process, summed across workers
through prometheus-client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, a fresh temporary directory
unless set).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetdx.orchestrator.cli.common import err_console, fail, handle_errors
from fleetdx.orchestrator.cli.conventions import DB_HELP

if TYPE_CHECKING:
    from fastapi import FastAPI

    from fleetdx.probes.parsers.slurm_nodes import SlurmNode

AUTH_READS_ENV = "FLEETDX_API_AUTH_READS"
TOPOLOGY_ENV = "FLEETDX_API_TOPOLOGY_CONF"
SLURM_ENV = "FLEETDX_API_SLURM"
PLACEMENT_CACHE_ENV = "FLEETDX_API_PLACEMENT_CACHE_S"
MAX_BODY_ENV = "FLEETDX_API_MAX_BODY_BYTES"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
DB_URL_ENV = "FLEETDX_DB_URL"


def register(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""
    app.command("serve")(serve)


def app_from_env() -> FastAPI:
    """The app of one uvicorn worker, from the environment that :func:`serve` set (a uvicorn factory)."""
    from fleetdx.orchestrator.cli.topo_cmd import _load_cluster
    from fleetdx.orchestrator.notify import WEBHOOK_FORMAT_ENV, WEBHOOKS_ENV, configure, parse_webhooks
    from fleetdx.orchestrator.service.api import create_app
    from fleetdx.orchestrator.service.ingest import MAX_UPLOAD_BYTES
    from fleetdx.orchestrator.service.metrics import RequestMetrics
    from fleetdx.orchestrator.service.placement_cache import DEFAULT_TTL_S
    from fleetdx.orchestrator.store import Store
    from fleetdx.topology.cluster import ClusterIndex

    store = Store.open(os.environ.get(DB_URL_ENV) or None)
    auth_reads = os.environ.get(AUTH_READS_ENV, "") == "1"
    metrics = RequestMetrics(multiprocess_dir=os.environ.get(MULTIPROC_ENV) or None)
    conf = os.environ.get(TOPOLOGY_ENV)
    cluster = ClusterIndex(_load_cluster(Path(conf))) if conf else None
    scheduler_nodes = None
    if os.environ.get(SLURM_ENV) == "1":
        from fleetdx.orchestrator.scheduler.slurm_nodes import slurm_candidates
        from fleetdx.probes.runner import SubprocessRunner

        runner = SubprocessRunner()

        def scheduler_nodes() -> list[SlurmNode]:
            return slurm_candidates(runner)

    # the process's notifier (fleetdx.orchestrator.notify.notify sends through it too)
    notifier = configure(parse_webhooks(os.environ.get(WEBHOOKS_ENV), os.environ.get(WEBHOOK_FORMAT_ENV) or "generic"))
    app = create_app(
        store,
        notifier=notifier,
        auth_reads=auth_reads,
        request_metrics=metrics,
        cluster=cluster,
        scheduler_nodes=scheduler_nodes,
        placement_cache_s=float(os.environ.get(PLACEMENT_CACHE_ENV) or DEFAULT_TTL_S),
        max_body_bytes=int(os.environ.get(MAX_BODY_ENV) or MAX_UPLOAD_BYTES),
    )
    app.router.add_event_handler("shutdown", store.close)
    app.router.add_event_handler("shutdown", lambda: notifier.close(timeout_s=10))
    return app


@handle_errors
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port to listen on.")] = 8000,
    db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
    auth_reads: Annotated[
        bool,
        typer.Option(
            "--auth-reads",
            help="Reads (GET /runs, /nodes, /findings, /metrics, /placement, the pages) need a read or write "
            "token too; writes always need a write token. /healthz stays open.",
        ),
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            "--workers", min=1, max=64, help="uvicorn worker processes (stateless; use PostgreSQL for more than 1)."
        ),
    ] = 1,
    topology_conf: Annotated[
        Path | None,
        typer.Option(
            "--topology-conf",
            help="Slurm topology.conf, saved `scontrol show topology`, or a .yaml/.json switch map: placement "
            "ranks nodes by its switch hops.",
        ),
    ] = None,
    slurm: Annotated[
        bool,
        typer.Option(
            "--slurm", help="Placement candidates from this host's Slurm (`scontrol show node`) at each query."
        ),
    ] = False,
    placement_cache: Annotated[
        float,
        typer.Option(
            "--placement-cache",
            min=0,
            max=3600,
            help="Seconds an unchanged placement answer is reused (same request and candidates, no new run in "
            "the store); 0: compute every query.",
        ),
    ] = 5.0,
    max_body_mib: Annotated[
        int,
        typer.Option(
            "--max-body-mib",
            min=1,
            max=4096,
            help="Largest request body, in MiB (a gzip report: once decompressed); a longer one is answered 413.",
        ),
    ] = 64,
    ssl_certfile: Annotated[
        Path | None, typer.Option("--ssl-certfile", help="Serve HTTPS with this PEM certificate (chain).")
    ] = None,
    ssl_keyfile: Annotated[
        Path | None, typer.Option("--ssl-keyfile", help="The certificate's PEM private key.")
    ] = None,
    webhook: Annotated[
        list[str] | None,
        typer.Option(
            "--webhook",
            metavar="URL",
            envvar="FLEETDX_WEBHOOKS",
            show_envvar=False,
            help="POST an event here when a pushed pre-flight is CRITICAL (repeatable; or $FLEETDX_WEBHOOKS, "
            "URLs separated by spaces, which keeps them out of the process list). Retried with backoff in the "
            "background; logs show only the URL's host.",
        ),
    ] = None,
    webhook_format: Annotated[
        str,
        typer.Option(
            "--webhook-format",
            metavar="<generic|slack>",
            envvar="FLEETDX_WEBHOOK_FORMAT",
            show_envvar=False,
            help='The webhook body: generic (the event as JSON) or slack ({"text": ...}, also Mattermost).',
        ),
    ] = "generic",
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log/--no-access-log",
            help="One stderr line per request (uvicorn's access log); /metrics counts requests either way.",
        ),
    ] = True,
) -> None:
    """Serve the run history, report ingestion and Prometheus metrics over HTTP.

    GET /runs, /runs/{id}, /nodes/{host}/history, /findings, /metrics, /healthz, GET/POST /placement;
    POST /reports (write token). /docs and /redoc: the API's documentation, served offline.
    GET /: the fleet page (nodes by state and verdict), /nodes/{host}, /jobs/{job_id}: HTML pages.
    --webhook URL: an event when a pushed pre-flight is CRITICAL.
    Tokens: `fleetdx token create NAME --scope write`. TLS: --ssl-certfile/--ssl-keyfile, or a reverse proxy.
    """
    import uvicorn

    from fleetdx.orchestrator.store import Store

    if (ssl_certfile is None) != (ssl_keyfile is None):
        raise fail("--ssl-certfile and --ssl-keyfile go together")
    for path in (ssl_certfile, ssl_keyfile):
        if path is not None and not path.is_file():
            raise fail(f"{path}: no such file")
    from fleetdx.orchestrator.notify import WEBHOOK_FORMAT_ENV, WEBHOOKS_ENV, parse_webhooks

    try:
        parse_webhooks(" ".join(webhook or []), webhook_format)  # a bad URL or format fails here, in one line
    except ValueError as e:
        raise fail(str(e)) from None
    os.environ[WEBHOOKS_ENV] = " ".join(webhook or [])
    os.environ[WEBHOOK_FORMAT_ENV] = webhook_format
    if topology_conf is not None:
        from fleetdx.orchestrator.cli.topo_cmd import _load_cluster

        _load_cluster(topology_conf)  # a bad file fails here, in one line, not in every worker
        os.environ[TOPOLOGY_ENV] = str(topology_conf.resolve())
    os.environ[SLURM_ENV] = "1" if slurm else "0"
    os.environ[PLACEMENT_CACHE_ENV] = repr(placement_cache)
    os.environ[MAX_BODY_ENV] = str(max_body_mib * 1024 * 1024)
    with Store.open(db) as store:  # fail here, in one line, when the database is unreachable or outdated
        url = store.url
    os.environ[DB_URL_ENV] = db or os.environ.get(DB_URL_ENV, "")
    os.environ[AUTH_READS_ENV] = "1" if auth_reads else "0"
    try:
        listener = _listening_socket(host, port) if workers > 1 else None
    except OSError as e:
        raise fail(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    own_dir = None
    if workers > 1 and not os.environ.get(MULTIPROC_ENV):
        own_dir = tempfile.mkdtemp(prefix="fleetdx-prometheus-")
        os.environ[MULTIPROC_ENV] = own_dir
    scheme = "https" if ssl_certfile else "http"
    err_console.print(
        f"fleetdx API on {scheme}://{host}:{port} ({workers} worker{'s' * (workers > 1)}) over {url}"
        + ("; reads need a token" if auth_reads else ""),
        highlight=False,
    )
    try:
        uvicorn.run(
            f"{__name__}:app_from_env",
            factory=True,
            host=host,
            port=port,
            fd=listener.fileno() if listener is not None else None,
            workers=workers,
            log_level="info",
            access_log=access_log,
            log_config=stderr_logging(),
            ssl_certfile=str(ssl_certfile) if ssl_certfile else None,
            ssl_keyfile=str(ssl_keyfile) if ssl_keyfile else None,
        )
    finally:
        if listener is not None:
            listener.close()
        _drop_multiproc_dir(own_dir)


def _drop_multiproc_dir(own_dir: str | None) -> None:
    """Remove the multiprocess folder serve made (``None``: it made none) and its variable: a process started
    from here later (a Ray head, a test's next server) must not be pointed at a removed folder
    (prometheus-client fails opening its files there)."""
    if own_dir is None:
        return
    shutil.rmtree(own_dir, ignore_errors=True)
    if os.environ.get(MULTIPROC_ENV) == own_dir:
        del os.environ[MULTIPROC_ENV]


def stderr_logging() -> dict[str, Any]:
    """uvicorn's logging configuration with its access log on stderr, beside its other lines (uvicorn writes the
    access log to stdout): stdout stays free for output a script reads, and the README's promise holds."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    return config


def _listening_socket(host: str, port: int) -> socket.socket:
    """The TCP socket the workers share, with TCP_NODELAY set (Linux copies it to each accepted connection).

    uvicorn's own socket for ``--workers`` is made with protocol 0, so asyncio does not recognise it as TCP and
    never sets TCP_NODELAY on its connections: each response then waits for the client's delayed ACK
    (measured here: every request about 45 ms with 2 workers, 2 ms with one)."""
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)[0]
    sock = socket.socket(info[0], socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(info[4])
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock
