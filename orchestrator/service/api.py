"""The read-only HTTP API over the store (FastAPI). ``fleetdx serve`` runs it with uvicorn.

Endpoints (JSON bodies are the store's contracts):

- ``GET /healthz`` -> ``Health``: 200 when the database answers, 503 (with the reason) when it does not.
- ``GET /runs?limit=50`` -> ``list[RunSummary]``, newest first.
- ``GET /runs/{run_id}`` -> ``RunReport``; 404 for an unknown run.
- ``GET /nodes/{host}/history?limit=20`` -> ``NodeHistory``: the node's verdict and findings per run (a
  pair or group finding is in the history of each host it names).
- ``GET /findings?code=&severity=&host=&limit=100`` -> ``list[FindingRecord]``; ``host`` matches a finding
  whose ``nodes`` name it; an unknown code or severity is a 422 listing the valid values.

A malformed path or query value (a control character such as ``%00``, over 255 characters) is a 422 client
error, never a 5xx; error bodies never carry the database URL (the server's log has the full reason).

The store is passed in (:func:`create_app`), so tests and the CLI choose the database; nothing is read from
the environment here.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse

from fleetdx import __version__
from fleetdx.orchestrator.report import RunReport
from fleetdx.orchestrator.store import (
    FindingRecord,
    NodeHistory,
    RunNotFound,
    RunSummary,
    Store,
    StoreError,
)
from fleetdx.probes.contracts import Contract, FindingCode, Severity

MAX_LIMIT = 1000
#: a run id or host name: 1-255 characters, none of them a control character (PostgreSQL rejects NUL in text)
SAFE_TEXT = r"^[^\x00-\x1f\x7f]{1,255}$"

log = logging.getLogger("fleetdx.api")


class Health(Contract):
    """``status`` "ok" and the schema ``revision`` when the database answers; "error" and ``error`` if not."""

    status: str
    revision: str | None = None
    error: str | None = None


def create_app(store: Store) -> FastAPI:
    """The API app reading from ``store``. Store errors become 503 responses with a one-line ``detail``."""
    app = FastAPI(title="fleetdx", version=__version__, description="Read-only run history of fleetdx.")

    def public(exc: Exception) -> str:
        """The error's message without the database URL (logged in full)."""
        log.warning("%s", exc)
        return str(exc).replace(store.url, "the run database")

    @app.exception_handler(StoreError)
    async def _store_error(_request: Request, exc: StoreError) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": public(exc)})

    @app.get("/healthz", response_model=Health)
    def healthz() -> JSONResponse | Health:
        try:
            return Health(status="ok", revision=store.revision())
        except StoreError as e:
            return JSONResponse(status_code=503, content=Health(status="error", error=public(e)).model_dump())

    @app.get("/runs", response_model=list[RunSummary])
    def runs(limit: int = Query(50, ge=1, le=MAX_LIMIT)) -> list[RunSummary]:
        return store.list_runs(limit=limit)

    @app.get("/runs/{run_id}", response_model=RunReport)
    def run(run_id: str = Path(pattern=SAFE_TEXT)) -> RunReport:
        try:
            return store.get_run(run_id)
        except RunNotFound as e:
            raise HTTPException(status_code=404, detail=public(e)) from None

    @app.get("/nodes/{host}/history", response_model=NodeHistory)
    def node_history(
        host: str = Path(pattern=SAFE_TEXT), limit: int = Query(20, ge=1, le=MAX_LIMIT)
    ) -> NodeHistory:
        return NodeHistory(host=host, entries=store.node_history(host, limit=limit))

    @app.get("/findings", response_model=list[FindingRecord])
    def findings(
        code: FindingCode | None = None,
        severity: Severity | None = None,
        host: str | None = Query(None, pattern=SAFE_TEXT),
        limit: int = Query(100, ge=1, le=MAX_LIMIT),
    ) -> list[FindingRecord]:
        return store.find_findings(code=code, severity=severity, host=host, limit=limit)

    return app
