"""The HTTP API over the store (FastAPI). ``fleetdx serve`` runs it with uvicorn.

Endpoints (JSON bodies are the store's contracts):

- ``GET /healthz`` -> ``Health``: 200 when the database answers, 503 (with the reason) when it does not.
  Never needs a token (load balancers and liveness probes call it).
- ``GET /runs?limit=50`` -> ``list[RunSummary]``, newest first.
- ``GET /runs/{run_id}`` -> ``RunReport``; 404 for an unknown run.
- ``GET /nodes/{host}/history?limit=20`` -> ``NodeHistory``: the node's verdict and findings per run (a
  pair or group finding is in the history of each host it names).
- ``GET /findings?code=&severity=&host=&limit=100`` -> ``list[FindingRecord]``; ``host`` matches a finding
  whose ``nodes`` name it; an unknown code or severity is a 422 listing the valid values.
- ``GET /metrics``: the Prometheus text format (:mod:`fleetdx.orchestrator.service.metrics`).
- ``GET /placement?nodes=N&gpus_per_node=K[&partition=&hostlist=&exclude=HOSTLIST&ib_port=1]`` and
  ``POST /placement`` (a ``PlacementRequest`` body) -> ``PlacementAnswer``: where a job should go
  (:func:`fleetdx.orchestrator.placement.job.place` over the store's health and history, the cluster topology
  the service was started with, and the Slurm nodes when it was started with Slurm; else the request's
  ``hostlist`` is the candidate list). Not enough fit nodes is a 200 answer with ``placed`` false; a request
  that cannot be answered (no hostlist and no Slurm, a bad hostlist) is a 422 with the reason, Slurm not
  answering a 503. A placement query changes nothing, so it is a read (POST included).
- ``POST /reports`` (write token): ingest one run's report and raw outputs
  (:mod:`fleetdx.orchestrator.service.ingest`): 201 ``IngestResult`` when stored, 200 with ``inserted``
  false when a run with that ``run_id`` is already stored (idempotent: a retried push never duplicates).

Authentication (:mod:`fleetdx.orchestrator.service.auth`): every write needs a ``write`` bearer token; reads
(``/runs``, ``/nodes``, ``/findings``, ``/metrics``, ``/placement``) need a ``read`` or ``write`` token only when
``auth_reads`` is set. 401 without a token or with an invalid or revoked one, 403 with a read token on a write.

A client's mistake is a 4xx with a one-line ``detail``, never a 5xx: a malformed path or query value (a
control character such as ``%00``, over 255 characters) is 422, a bad upload 400/413/415/422. Error bodies
never carry the database URL (the server's log has the full reason); an unexpected error is a 500 saying only
"internal error".

The store is passed in (:func:`create_app`), so tests and the CLI choose the database and the settings;
nothing is read from the environment here.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from hostlist import BadHostlist, expand_hostlist

from fleetdx import __version__
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.placement.contracts import PlacementAnswer, PlacementRequest
from fleetdx.orchestrator.placement.job import PlacementInputError, place
from fleetdx.orchestrator.report import RunReport
from fleetdx.orchestrator.service.auth import Auth, require_read, require_write
from fleetdx.orchestrator.service.ingest import (
    MAX_UPLOAD_BYTES,
    IngestResult,
    UploadRejected,
    decode_body,
    parse_upload,
)
from fleetdx.orchestrator.service.metrics import CONTENT_TYPE, RequestMetrics, exposition
from fleetdx.orchestrator.service.placement_cache import DEFAULT_TTL_S, PlacementCache, SnapshotKeeper
from fleetdx.orchestrator.store import (
    FindingRecord,
    NodeHistory,
    RunNotFound,
    RunSummary,
    Store,
    StoreError,
)
from fleetdx.orchestrator.store.fleet import fleet_state
from fleetdx.probes.contracts import Contract, Severity
from fleetdx.probes.errors import ConfigError
from fleetdx.probes.parsers.slurm_nodes import SlurmNode
from fleetdx.topology.cluster import ClusterIndex

MAX_LIMIT = 1000
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: a run id or host name: 1-255 characters, none of them a control character (PostgreSQL rejects NUL in text)
SAFE_TEXT = r"^[^\x00-\x1f\x7f]{1,255}$"

log = logging.getLogger("fleetdx.api")


class Health(Contract):
    """``status`` "ok" and the schema ``revision`` when the database answers; "error" and ``error`` if not."""

    status: str
    revision: str | None = None
    error: str | None = None


class _LatencyMiddleware:
    """Each request's latency into the histogram, by method, route template and status. A plain ASGI middleware:
    Starlette's ``BaseHTTPMiddleware`` (``@app.middleware("http")``) runs every request through an extra task
    and body stream, a cost bench/api.py measured beside the placement answer itself."""

    def __init__(self, app: Any, requests: RequestMetrics) -> None:
        self.app = app
        self.requests = requests

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            template = getattr(scope.get("route"), "path", None) or "unmatched"  # set by the router
            method = scope.get("method", "")
            method = method if method in HTTP_METHODS else "other"  # bounded label values
            self.requests.observe(method, template, status, time.perf_counter() - start)


class Service:
    """What the routes of one app share (``app.state.service``): the store, the placement caches and inputs,
    and how a store error is said to a client (:meth:`public`)."""

    def __init__(
        self,
        store: Store,
        *,
        cluster: ClusterIndex | None,
        scheduler_nodes: Callable[[], Sequence[SlurmNode]] | None,
        placement_cache_s: float,
        requests: RequestMetrics,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.scheduler_nodes = scheduler_nodes
        self.answers = PlacementCache(placement_cache_s)
        self.snapshots = SnapshotKeeper(placement_cache_s)
        self.requests = requests

    def public(self, exc: Exception) -> str:
        """The error's message without the database URL (logged in full)."""
        log.warning("%s", exc)
        return str(exc).replace(self.store.url, "the run database")

    def place(self, request: PlacementRequest) -> PlacementAnswer:
        """The placement answer (cached while the store and the scheduler's nodes are unchanged).

        Raises:
            HTTPException: 503 when the scheduler does not answer, 422 for a request that cannot be answered.
        """
        try:
            candidates = self.scheduler_nodes() if self.scheduler_nodes is not None else None
        except ConfigError as e:  # Slurm missing, failing or timing out: the service's trouble, not the client's
            raise HTTPException(status_code=503, detail=self.public(e)) from None
        try:
            generation = self.store.newest_run_pk()
            snapshot = self.snapshots.get(self.store, generation)
            return self.answers.answer(
                request,
                candidates,
                generation,
                lambda: place(
                    request, store=self.store, candidates=candidates, cluster=self.cluster, snapshot=snapshot
                ),
            )
        except PlacementInputError as e:
            raise HTTPException(status_code=422, detail=str(e)) from None


def service(request: Request) -> Service:
    """FastAPI dependency: the app's :class:`Service`."""
    svc = getattr(request.app.state, "service", None)
    if not isinstance(svc, Service):
        raise RuntimeError("the app has no Service in app.state.service (build it with create_app)")
    return svc


ServiceDep = Annotated[Service, Depends(service)]
READ = [Depends(require_read)]
WRITE = [Depends(require_write)]


def healthz(svc: ServiceDep) -> JSONResponse | Health:
    """200 with the schema revision when the database answers, 503 with the reason when it does not. Never needs
    a token (load balancers and liveness probes call it)."""
    try:
        return Health(status="ok", revision=svc.store.revision())
    except StoreError as e:
        return JSONResponse(status_code=503, content=Health(status="error", error=svc.public(e)).model_dump())


def list_runs(
    svc: ServiceDep,
    limit: int = Query(50, ge=1, le=MAX_LIMIT),
    job: str | None = Query(None, pattern=SAFE_TEXT, max_length=128),
) -> list[RunSummary]:
    """Stored runs, newest first (only the job's with ``job``)."""
    return svc.store.list_runs(limit=limit, job_id=job)


def get_run(svc: ServiceDep, run_id: str = Path(pattern=SAFE_TEXT)) -> RunReport:
    """One stored run's report; 404 for an unknown run."""
    try:
        return svc.store.get_run(run_id)
    except RunNotFound as e:
        raise HTTPException(status_code=404, detail=svc.public(e)) from None


def node_history(
    svc: ServiceDep,
    host: str = Path(pattern=SAFE_TEXT),
    limit: int = Query(20, ge=1, le=MAX_LIMIT),
    job: str | None = Query(None, pattern=SAFE_TEXT, max_length=128),
) -> NodeHistory:
    """A node's verdict and findings per run (a pair or group finding is in the history of each host it names)."""
    return NodeHistory(host=host, entries=svc.store.node_history(host, limit=limit, job_id=job))


def list_findings(
    svc: ServiceDep,
    code: FindingCode | None = None,
    severity: Severity | None = None,
    host: str | None = Query(None, pattern=SAFE_TEXT),
    limit: int = Query(100, ge=1, le=MAX_LIMIT),
) -> list[FindingRecord]:
    """Stored findings, newest first; ``host`` matches a finding whose ``nodes`` name it."""
    return svc.store.find_findings(code=code, severity=severity, host=host, limit=limit)


def metrics(svc: ServiceDep) -> Response:
    """The Prometheus text format (:mod:`fleetdx.orchestrator.service.metrics`)."""
    return Response(exposition(fleet_state(svc.store), svc.requests), media_type=CONTENT_TYPE)


def placement_query(
    svc: ServiceDep,
    nodes: int = Query(ge=1, le=100_000),
    gpus_per_node: int = Query(ge=1, le=1024),
    partition: str | None = Query(None, pattern=SAFE_TEXT),
    hostlist: str | None = Query(None, max_length=65536, pattern=r"^[^\x00-\x1f\x7f]+$"),
    exclude: list[str] = Query(default_factory=list),  # noqa: B008
    ib_port: int = Query(1, ge=1, le=255),
) -> PlacementAnswer:
    """Where a job of ``nodes`` x ``gpus_per_node`` GPUs should go (each ``exclude`` a Slurm hostlist)."""
    bad = [h for h in exclude if not re.match(SAFE_TEXT, h)]
    if bad:
        raise HTTPException(status_code=422, detail=f"exclude: {bad[0][:40]!r} is not a host name")
    try:  # each value a Slurm hostlist, as `fleetdx place --exclude` takes it
        ruled_out = [h for text in exclude for h in expand_hostlist(text)]
    except BadHostlist as e:
        raise HTTPException(status_code=422, detail=f"exclude: bad hostlist: {e}") from None
    request = PlacementRequest(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        partition=partition,
        hostlist=hostlist,
        exclude=ruled_out,
        ib_port=ib_port,
    )
    return svc.place(request)


def placement_body(svc: ServiceDep, request: PlacementRequest) -> PlacementAnswer:
    """Where a job should go, asked with a ``PlacementRequest`` body (a read: it changes nothing)."""
    return svc.place(request)


async def post_report(svc: ServiceDep, request: Request) -> JSONResponse:
    """Ingest one run's report and raw outputs: 201 when stored, 200 with ``inserted`` false when a run with that
    ``run_id`` is already stored (a retried push never duplicates)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_UPLOAD_BYTES:
            raise HTTPException(status_code=413, detail=f"the report is over {MAX_UPLOAD_BYTES} bytes")
    try:
        data = decode_body(bytes(body), request.headers.get("content-type"), request.headers.get("content-encoding"))
        upload = await run_in_threadpool(parse_upload, data)
    except UploadRejected as e:
        raise HTTPException(status_code=e.status, detail=e.reason) from None
    inserted = await run_in_threadpool(svc.store.save_report, upload.report, upload.raw)
    result = IngestResult(run_id=upload.report.run_id, inserted=inserted)
    return JSONResponse(status_code=201 if inserted else 200, content=result.model_dump(mode="json"))


def _router() -> APIRouter:
    r = APIRouter()
    r.add_api_route("/healthz", healthz, methods=["GET"], response_model=Health)
    r.add_api_route("/runs", list_runs, methods=["GET"], response_model=list[RunSummary], dependencies=READ)
    r.add_api_route("/runs/{run_id}", get_run, methods=["GET"], response_model=RunReport, dependencies=READ)
    r.add_api_route(
        "/nodes/{host}/history", node_history, methods=["GET"], response_model=NodeHistory, dependencies=READ
    )
    r.add_api_route(
        "/findings", list_findings, methods=["GET"], response_model=list[FindingRecord], dependencies=READ
    )
    r.add_api_route("/metrics", metrics, methods=["GET"], response_class=Response, dependencies=READ)
    r.add_api_route(
        "/placement", placement_query, methods=["GET"], response_model=PlacementAnswer, dependencies=READ
    )
    r.add_api_route(
        "/placement", placement_body, methods=["POST"], response_model=PlacementAnswer, dependencies=READ
    )
    r.add_api_route(
        "/reports",
        post_report,
        methods=["POST"],
        response_model=IngestResult,
        status_code=201,
        dependencies=WRITE,
        responses={200: {"model": IngestResult, "description": "already stored"}},
    )
    return r


def create_app(
    store: Store,
    *,
    auth_reads: bool = False,
    request_metrics: RequestMetrics | None = None,
    cluster: ClusterIndex | None = None,
    scheduler_nodes: Callable[[], Sequence[SlurmNode]] | None = None,
    placement_cache_s: float = DEFAULT_TTL_S,
) -> FastAPI:
    """The API app over ``store``: the routes above (plain functions, importable by tests) with the app's
    :class:`Service` and :class:`~fleetdx.orchestrator.service.auth.Auth` in ``app.state``. ``auth_reads``:
    reads need a token too. ``request_metrics``: where request latency goes (default: a histogram of this
    process). ``cluster``: the switch tree placement ranks by (built once). ``scheduler_nodes``: asked at each
    placement query for the scheduler's nodes (``None``: the request's hostlist is the candidate list).
    ``placement_cache_s``: how long an unchanged placement answer is reused, and the store state distinct
    queries share (:mod:`~fleetdx.orchestrator.service.placement_cache`; 0: never). Store errors become 503
    responses with a one-line ``detail``."""
    requests = request_metrics or RequestMetrics()
    svc = Service(
        store, cluster=cluster, scheduler_nodes=scheduler_nodes, placement_cache_s=placement_cache_s, requests=requests
    )
    app = FastAPI(title="fleetdx", version=__version__, description="Run history, report ingestion and metrics.")
    app.state.service = svc
    app.state.auth = Auth(store, reads_need_token=auth_reads)
    app.add_middleware(_LatencyMiddleware, requests=requests)

    async def store_error(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": svc.public(exc)})

    async def internal_error(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error: %s", exc)
        return JSONResponse(status_code=500, content={"detail": "internal error (see the server's log)"})

    app.add_exception_handler(StoreError, store_error)
    app.add_exception_handler(Exception, internal_error)
    app.include_router(_router())
    return app
