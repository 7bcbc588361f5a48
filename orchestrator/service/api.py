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
- ``GET /docs`` (Swagger UI), ``GET /redoc`` (ReDoc), ``GET /openapi.json``: the API's documentation, its
  scripts and stylesheets served by this service (:mod:`fleetdx.orchestrator.service.docs`: no CDN).
- ``GET /`` (the fleet page), ``GET /nodes/{host}``, ``GET /jobs/{job_id}``, ``GET /postmortems/{id}``: HTML
  pages (:mod:`fleetdx.orchestrator.service.pages`), reads like the JSON endpoints.
- ``POST /postmortems`` and ``POST /analyze`` (write token): a postmortem of uploaded job logs, an offline
  diagnosis of uploaded node bundles, each stored (:mod:`fleetdx.orchestrator.service.uploads`).
- ``POST /live`` (write token) and ``GET /live``: running jobs' live state, pushed by ``fleetdx watch
  --report-to`` (:mod:`fleetdx.orchestrator.service.live`).
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
  Concurrent uploads are committed together (:mod:`fleetdx.orchestrator.service.writer`); each is answered
  after its own run was committed. A CRITICAL pre-flight, when first stored, is sent to the webhooks
  (:mod:`fleetdx.orchestrator.service.alerts`), in the background.

Authentication (:mod:`fleetdx.orchestrator.service.auth`): every write needs a ``write`` bearer token; reads
(``/runs``, ``/nodes``, ``/findings``, ``/metrics``, ``/placement``) need a ``read`` or ``write`` token only when
``auth_reads`` is set. 401 without a token or with an invalid or revoked one, 403 with a read token on a write.

A client's mistake is a 4xx with a one-line ``detail`` (a string, never a list), never a 5xx: a malformed path,
query or body value (a control character such as ``%00``, a lone UTF-16 surrogate such as ``"\\ud800"``, over
255 characters, a number out of range such as ``1e309``) is 422, JSON nested too deeply 400, a bad upload
400/413/415/422. Any body over ``max_body_bytes`` is 413 on every route, said before the body is read when its
``Content-Length`` gives it away, and after the rest of the body was read and dropped otherwise (up to
:data:`DRAIN_MAX_BYTES` more), so a client that sends its whole body before reading the answer (or asked for
``Connection: close``) reads the 413 instead of a connection reset. Error bodies never carry the database URL
(the server's log has the full reason); an unexpected error is a 500 saying only "internal error".

The store is passed in (:func:`create_app`), so tests and the CLI choose the database and the settings;
nothing is read from the environment here.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from hostlist import BadHostlist, expand_hostlist
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from fleetdx import __version__
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.notify import Notifier, default_notifier
from fleetdx.orchestrator.placement.contracts import PlacementAnswer, PlacementRequest
from fleetdx.orchestrator.placement.job import PlacementInputError, place
from fleetdx.orchestrator.report import RunReport
from fleetdx.orchestrator.service import live, pages, uploads
from fleetdx.orchestrator.service.alerts import preflight_critical
from fleetdx.orchestrator.service.auth import Auth, require_read, require_write
from fleetdx.orchestrator.service.docs import install_docs
from fleetdx.orchestrator.service.ingest import (
    MAX_UPLOAD_BYTES,
    IngestResult,
    UploadRejected,
    decode_body,
    parse_upload,
)
from fleetdx.orchestrator.service.metrics import CONTENT_TYPE, RequestMetrics, exposition
from fleetdx.orchestrator.service.placement_cache import (
    DEFAULT_TTL_S,
    Coalesced,
    EncodedAnswer,
    PlacementCache,
    SnapshotKeeper,
)
from fleetdx.orchestrator.service.writer import ReportWriter
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
#: the same for text from a JSON body, which can also carry a lone UTF-16 surrogate (``"\\ud800"``): it cannot
#: be encoded as UTF-8, so neither a database nor a JSON answer can take it (a path or query never holds one:
#: Starlette decodes those with replacement characters)
_BODY_NAME = re.compile(r"[^\x00-\x1f\x7f\ud800-\udfff]{1,255}")
_BODY_HOSTLIST = re.compile(r"[^\x00-\x1f\x7f\ud800-\udfff]{1,65536}")
#: how much more of an over-limit body is read (and dropped) before the 413 is sent, so that the client, still
#: sending, is not reset; a longer body is answered at once
DRAIN_MAX_BYTES = 1 << 30
#: an uploaded report up to this size (decompressed JSON) is parsed on the event loop (about 0.2 ms for a
#: one-node pre-flight with its raw ``topo -m``), a larger one in the thread pool
INLINE_PARSE_BYTES = 64 * 1024

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


class _BodyLimitMiddleware:
    """Every request body at most ``limit`` bytes, else a 413 with a one-line ``detail`` (see the module doc).

    A declared ``Content-Length`` over the limit is answered before the app runs: at once when the client waits
    for ``100 Continue`` (it then sends nothing), else after reading and dropping the body (at most
    :data:`DRAIN_MAX_BYTES`). A body without a length (chunked) is counted as the app reads it; past the limit
    the rest is dropped the same way and the route answers 413 (raised from ``receive``)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = _content_length(headers.get(b"content-length"))
        if declared is not None and declared > self.limit:
            if headers.get(b"expect", b"").lower() != b"100-continue" and declared - self.limit <= DRAIN_MAX_BYTES:
                await _drain(receive, DRAIN_MAX_BYTES)
            detail = f"the body is {declared} bytes, over the limit of {self.limit}"
            await JSONResponse(status_code=413, content={"detail": detail})(scope, receive, send)
            return
        received = 0

        async def limited() -> dict[str, Any]:
            nonlocal received
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    if message.get("more_body", False):
                        await _drain(receive, DRAIN_MAX_BYTES)
                    raise HTTPException(status_code=413, detail=f"the body is over the limit of {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


def _content_length(value: bytes | None) -> int | None:
    """The declared body length, ``None`` when absent (the HTTP server has already refused a malformed one)."""
    if value is None or not value.strip().isdigit():
        return None
    return int(value)


async def _drain(receive: Any, most: int) -> None:
    """Read and drop the rest of a request body (at most ``most`` bytes): the client is then done sending and
    reads the answer, where closing the connection under it would reset it."""
    dropped = 0
    while dropped <= most:
        message = await receive()
        if message["type"] != "http.request":
            return
        dropped += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


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
        max_body_bytes: int = MAX_UPLOAD_BYTES,
        notifier: Notifier | None = None,
    ) -> None:
        self.store = store
        self.notifier = notifier if notifier is not None else default_notifier()
        self.max_body_bytes = max_body_bytes
        self.cluster = cluster
        self.scheduler_nodes = scheduler_nodes
        self.answers = PlacementCache(placement_cache_s)
        self.snapshots = SnapshotKeeper(placement_cache_s)
        self.generations = Coalesced(store.newest_run_pk)
        self.writer = ReportWriter(store)
        self.requests = requests

    def public(self, exc: Exception) -> str:
        """The error's message without the database URL (logged in full)."""
        log.warning("%s", exc)
        return str(exc).replace(self.store.url, "the run database")

    async def placement(self, request: PlacementRequest, if_none_match: str | None = None) -> Response:
        """The placement answer as JSON with its ``ETag`` (a 304 without a body when ``if_none_match`` names
        it), cached while the store and the scheduler's nodes are unchanged (:mod:`.placement_cache`). Only the
        work that may block (the scheduler, the store generation, a computed answer) goes to the thread pool; a
        cached answer is sent as its kept bytes.

        Raises:
            HTTPException: 503 when the scheduler does not answer, 422 for a request that cannot be answered
                (one whose text no database or JSON answer can hold included: a control character or a lone
                surrogate in ``partition``, ``hostlist`` or ``exclude``).
            StoreError: the database does not answer (the app's handler makes it a 503).
        """
        problem = _placement_text_problem(request)
        if problem is not None:
            raise HTTPException(status_code=422, detail=problem)
        candidates = None
        if self.scheduler_nodes is not None:
            try:
                candidates = await run_in_threadpool(self.scheduler_nodes)
            except ConfigError as e:  # Slurm missing, failing or timing out: the service's trouble, not the client's
                raise HTTPException(status_code=503, detail=self.public(e)) from None
        generation = await self.generations.get()
        key = PlacementCache.key(request, candidates, generation)
        encoded = self.answers.cached(key)
        if encoded is None:
            try:
                encoded = await run_in_threadpool(self._compute, request, candidates, generation, key)
            except PlacementInputError as e:
                raise HTTPException(status_code=422, detail=str(e)) from None
        headers = {"ETag": encoded.etag, "Cache-Control": "no-cache"}
        if if_none_match is not None and _etag_matches(if_none_match, encoded.etag):
            return Response(status_code=304, headers=headers)
        return Response(encoded.body, media_type="application/json", headers=headers)

    def _compute(
        self,
        request: PlacementRequest,
        candidates: Sequence[SlurmNode] | None,
        generation: int | None,
        key: tuple[str, str, int | None],
    ) -> EncodedAnswer:
        """:func:`place` over the kept snapshot (blocking: it may read the store), encoded and kept."""
        started = time.monotonic()
        snapshot = self.snapshots.get(self.store, generation)
        answer = place(request, store=self.store, candidates=candidates, cluster=self.cluster, snapshot=snapshot)
        encoded = EncodedAnswer.of(answer)
        self.answers.keep(key, encoded, started)
        return encoded


def _etag_matches(if_none_match: str, etag: str) -> bool:
    """Whether an ``If-None-Match`` value (``*`` or a list of tags) names ``etag`` (weak comparison, RFC 9110)."""
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))


def _placement_text_problem(request: PlacementRequest) -> str | None:
    """Why the request's text cannot be used (``None`` when it can): each name 1-255 characters, the hostlist
    at most 65536, none with a control character or a lone surrogate (a JSON body can carry both)."""
    texts = [("partition", _BODY_NAME, request.partition), ("hostlist", _BODY_HOSTLIST, request.hostlist)]
    texts += [("exclude", _BODY_NAME, host) for host in request.exclude]
    for what, allowed, text in texts:
        if text is not None and allowed.fullmatch(text) is None:
            return f"{what}: {text[:40]!r} is empty, too long, or holds a control character or a lone surrogate"
    return None


async def service(request: Request) -> Service:
    """FastAPI dependency: the app's :class:`Service` (a coroutine: FastAPI runs a plain function's dependency
    in the thread pool, a hop per request for a lookup)."""
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


async def placement_query(
    svc: ServiceDep,
    nodes: int = Query(ge=1, le=100_000),
    gpus_per_node: int = Query(ge=1, le=1024),
    partition: str | None = Query(None, pattern=SAFE_TEXT),
    hostlist: str | None = Query(None, max_length=65536, pattern=r"^[^\x00-\x1f\x7f]+$"),
    exclude: list[str] = Query([]),  # noqa: B008  (not default_factory: pydantic inspects the factory per request)
    ib_port: int = Query(1, ge=1, le=255),
    if_none_match: str | None = Header(None),
) -> Response:
    """Where a job of ``nodes`` x ``gpus_per_node`` GPUs should go (each ``exclude`` a Slurm hostlist): a
    ``PlacementAnswer`` with its ``ETag``, 304 when ``If-None-Match`` names it."""
    bad = [h for h in exclude if not re.match(SAFE_TEXT, h)]
    if bad:
        raise HTTPException(status_code=422, detail=f"exclude: {bad[0][:40]!r} is not a host name")
    try:  # each value a Slurm hostlist, as `fleetdx place --exclude` takes it; a range may be long: not on the loop
        plain = not any(c in text for text in exclude for c in "[],")  # one host name each: itself
        ruled_out = list(exclude) if plain else await run_in_threadpool(_expand, exclude)
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
    return await svc.placement(request, if_none_match)


def _expand(hostlists: list[str]) -> list[str]:
    """Every host of the Slurm hostlists, in order (raises :class:`BadHostlist`)."""
    return [h for text in hostlists for h in expand_hostlist(text)]


async def placement_body(
    svc: ServiceDep, request: PlacementRequest, if_none_match: str | None = Header(None)
) -> Response:
    """Where a job should go, asked with a ``PlacementRequest`` body (a read: it changes nothing)."""
    return await svc.placement(request, if_none_match)


async def post_report(svc: ServiceDep, request: Request) -> JSONResponse:
    """Ingest one run's report and raw outputs: 201 when stored, 200 with ``inserted`` false when a run with that
    ``run_id`` is already stored (a retried push never duplicates)."""
    limit = svc.max_body_bytes
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:  # (the app's body limit has said so already; this holds for a bare call too)
                raise HTTPException(status_code=413, detail=f"the report is over {limit} bytes")
    except ClientDisconnect:  # gone while sending: nobody reads this answer, and it is no server error
        raise HTTPException(status_code=400, detail="the client disconnected before the body ended") from None
    try:
        headers = request.headers
        data = decode_body(bytes(body), headers.get("content-type"), headers.get("content-encoding"), limit)
        # a pre-flight's report (a few KiB) parses in well under a millisecond: on the event loop, without the
        # hop to the thread pool; a large one (an analyze of many bundles) in the pool, not blocking the loop
        upload = parse_upload(data) if len(data) <= INLINE_PARSE_BYTES else await run_in_threadpool(parse_upload, data)
    except UploadRejected as e:
        raise HTTPException(status_code=e.status, detail=e.reason) from None
    inserted = await svc.writer.save(upload.report, upload.raw)  # with the uploads waiting beside it
    event = preflight_critical(upload.report) if inserted else None
    if event is not None:
        svc.notifier.notify(event)  # queued: a slow or dead webhook never delays nor fails the push
    result = IngestResult(run_id=upload.report.run_id, inserted=inserted)
    return JSONResponse(status_code=201 if inserted else 200, content=result.model_dump(mode="json"))


def one_line(text: str, most: int = 300) -> str:
    """``text`` as one line of at most ``most`` characters that encodes as UTF-8: line breaks become spaces, a
    lone surrogate its ``\\udXXX`` escape (a client's JSON can carry one; an answer echoing it could not be
    sent)."""
    flat = " ".join(text.encode("utf-8", "backslashreplace").decode("utf-8").split())
    return flat if len(flat) <= most else flat[: most - 3] + "..."


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return JSONResponse(status_code=exc.status_code, content={"detail": one_line(detail)}, headers=exc.headers)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's list of validation errors as one line: the first error's place and message and how many there
    were. The offending input is left out: it may be what cannot be sent back (``1e309`` parses to infinity,
    which JSON cannot hold; a lone surrogate)."""
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if not errors:
        return JSONResponse(status_code=422, content={"detail": "invalid request"})
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "request"
    more = f" ({len(errors)} errors)" if len(errors) > 1 else ""
    return JSONResponse(status_code=422, content={"detail": one_line(f"{where}: {first.get('msg', 'invalid')}{more}")})


def _router() -> APIRouter:
    r = APIRouter()
    r.add_api_route("/healthz", healthz, methods=["GET"], response_model=Health)
    r.add_api_route("/runs", list_runs, methods=["GET"], response_model=list[RunSummary], dependencies=READ)
    r.add_api_route("/runs/{run_id}", get_run, methods=["GET"], response_model=RunReport, dependencies=READ)
    r.add_api_route(
        "/nodes/{host}/history", node_history, methods=["GET"], response_model=NodeHistory, dependencies=READ
    )
    r.add_api_route("/findings", list_findings, methods=["GET"], response_model=list[FindingRecord], dependencies=READ)
    r.add_api_route("/metrics", metrics, methods=["GET"], response_class=Response, dependencies=READ)
    r.add_api_route("/placement", placement_query, methods=["GET"], response_model=PlacementAnswer, dependencies=READ)
    r.add_api_route("/placement", placement_body, methods=["POST"], response_model=PlacementAnswer, dependencies=READ)
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
    max_body_bytes: int = MAX_UPLOAD_BYTES,
    notifier: Notifier | None = None,
) -> FastAPI:
    """The API app over ``store``: the routes above (plain functions, importable by tests) with the app's
    :class:`Service` and :class:`~fleetdx.orchestrator.service.auth.Auth` in ``app.state``. ``auth_reads``:
    reads need a token too. ``request_metrics``: where request latency goes (default: a histogram of this
    process). ``cluster``: the switch tree placement ranks by (built once). ``scheduler_nodes``: asked at each
    placement query for the scheduler's nodes (``None``: the request's hostlist is the candidate list).
    ``placement_cache_s``: how long an unchanged placement answer is reused, and the store state distinct
    queries share (:mod:`~fleetdx.orchestrator.service.placement_cache`; 0: never). ``max_body_bytes``: the
    largest request body (and decompressed report) taken; a longer one is a 413 (``fleetdx serve
    --max-body-mib``). ``notifier``: where the webhook events go (a CRITICAL pre-flight pushed to ``POST
    /reports``; default: the process's, :func:`fleetdx.orchestrator.notify.default_notifier`). Store errors
    become 503 responses with a one-line ``detail``; every error ``detail`` is one line of text that can be
    encoded (see the module doc)."""
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, not {max_body_bytes}")
    requests = request_metrics or RequestMetrics()
    svc = Service(
        store,
        cluster=cluster,
        scheduler_nodes=scheduler_nodes,
        placement_cache_s=placement_cache_s,
        requests=requests,
        max_body_bytes=max_body_bytes,
        notifier=notifier,
    )
    app = FastAPI(
        title="fleetdx",
        version=__version__,
        description="Run history, report ingestion, placement advice and metrics of a GPU fleet.",
        docs_url=None,  # /docs and /redoc are served with their own assets (docs.install_docs): no CDN
        redoc_url=None,
    )
    app.state.service = svc
    app.state.auth = Auth(store, reads_need_token=auth_reads)
    app.add_middleware(_BodyLimitMiddleware, limit=max_body_bytes)
    app.add_middleware(_LatencyMiddleware, requests=requests)  # outermost: it times the 413s too

    async def store_error(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": svc.public(exc)})

    async def internal_error(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error: %s", exc)
        return JSONResponse(status_code=500, content={"detail": "internal error (see the server's log)"})

    app.add_exception_handler(StoreError, store_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, internal_error)
    app.include_router(_router())
    app.include_router(pages.router())  # GET /, /nodes/{host}, /jobs/{job_id}: HTML for people
    app.include_router(uploads.router())  # POST /postmortems, /steps, /analyze: the jobs over HTTP
    app.include_router(live.router())  # POST /live, GET /live: running jobs' state from fleetdx watch
    install_docs(app)
    return app
