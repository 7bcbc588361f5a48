"""Running jobs over HTTP: ``fleetdx watch --report-to URL`` pushes each watched job's live state here, and the
fleet and job pages show it.

- ``POST /live`` (write token): a :class:`~fleetdx.orchestrator.store.records.LiveJobRecord` as JSON (gzip
  taken); kept as the job's latest state (a push older than the stored one changes nothing): 200 with the job
  id. A ``hung`` state first seen for a job fires the service's webhooks (``job.hang``), in the background.
- ``GET /live?since=S&limit=N`` (read, with ``--auth-reads``): the live states pushed in the last ``since``
  seconds (default 3600), newest first.

Bodies are read within the service's body limit; a body that is not a live state is a 422 with one line.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from fleetdx.orchestrator.service.auth import require_read, require_write
from fleetdx.orchestrator.service.uploads import body_of, service_of
from fleetdx.orchestrator.store.records import LiveJobRecord
from fleetdx.probes.contracts import Contract


class LiveStored(Contract):
    """The answer to ``POST /live``: the job whose state was kept."""

    job_id: str


def _hang_event(record: LiveJobRecord) -> Any:
    """The ``job.hang`` webhook event of a hung job's first hung push."""
    from fleetdx.orchestrator.notify import Event, EventKind

    first = next((f for f in record.findings if f.code.value == "STEP_HANG"), None)
    return Event(
        kind=EventKind.JOB_HANG,
        summary=f"job {record.job_id} hangs: " + (first.message if first else "no rank completes a step"),
        job_id=record.job_id,
        codes=["STEP_HANG"],
        hosts=sorted({h for f in record.findings for h in f.nodes}),
    )


async def post_live(request: Request) -> LiveStored:
    """Keep a watched job's live state (module doc)."""
    svc = service_of(request)
    data = await body_of(request, svc.max_body_bytes)
    try:
        record = LiveJobRecord.model_validate_json(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        raise HTTPException(status_code=422, detail=f"not a live job state: {where}: {first.get('msg')}") from None
    before = await run_in_threadpool(svc.store.get_live_job, record.job_id)
    await run_in_threadpool(svc.store.save_live_job, record)
    if record.state == "hung" and (before is None or before.state != "hung"):
        svc.notifier.notify(_hang_event(record))  # queued: a dead webhook never delays the push
    return LiveStored(job_id=record.job_id)


async def list_live(
    request: Request,
    since: float = Query(3600.0, gt=0, le=366 * 86400, description="Seconds back from now."),
    limit: int = Query(100, ge=1, le=1000),
) -> list[LiveJobRecord]:
    """The live states pushed in the last ``since`` seconds, newest first."""
    store = service_of(request).store
    return await run_in_threadpool(store.list_live_jobs, time.time() - since, limit)


def router() -> APIRouter:
    r = APIRouter()
    r.add_api_route(
        "/live", post_live, methods=["POST"], response_model=LiveStored, dependencies=[Depends(require_write)]
    )
    r.add_api_route(
        "/live", list_live, methods=["GET"], response_model=list[LiveJobRecord], dependencies=[Depends(require_read)]
    )
    return r
