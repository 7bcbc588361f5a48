"""The service's HTML pages, rendered on the server from the store (:mod:`fleetdx.orchestrator.htmlreport`):

- ``GET /``: the fleet page (nodes by state and latest verdict, one cell per node; the quarantined and
  retesting nodes and why; open findings; jobs), :func:`~fleetdx.orchestrator.htmlreport.fleet.render_fleet`.
- ``GET /nodes/{host}``: a node's state, transitions and runs as a timeline (404 for a node the store does
  not know).
- ``GET /jobs/{job_id}``: the job's pre-flights, analyze and bandwidth runs, postmortems, step analyses and its
  nodes' states, the same page ``fleetdx report --job ID --html OUT`` writes (404 for a job nothing stored names).
- ``GET /postmortems/{postmortem_id}``: a stored postmortem as its HTML report (404 when unknown).
- ``GET /steps/{analysis_id}``: a stored step analysis as its HTML report (404 when unknown).
- ``GET /static/plotly.min.js``: plotly.js from the ``plotly`` Python package, so the pages load nothing from
  another origin; open to all (it is the public library), cached by browsers for a day.

Pages follow the API's read rules (:mod:`.auth`: a token only with ``--auth-reads``) and are left out of the
OpenAPI schema (they are HTML for people, not operations for clients). Rendering reads the database and
runs in the thread pool.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response
from fastapi.responses import HTMLResponse

from fleetdx.orchestrator.service.auth import require_read
from fleetdx.orchestrator.store import RunNotFound, Store

#: where plotly.js is served; the pages link it, and each other, by relative paths, so the service also works
#: behind a proxy under a path prefix
PLOTLY_URL = "/static/plotly.min.js"
#: a host name or job id: 1-255 characters, no control character (as the JSON API's paths)
_SAFE = r"^[^\x00-\x1f\x7f]{1,255}$"
_PAGE_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


def _store(request: Request) -> Store:
    svc = getattr(request.app.state, "service", None)
    store = getattr(svc, "store", None)
    if not isinstance(store, Store):
        raise RuntimeError("the app has no Service with a store in app.state.service (build it with create_app)")
    return store


def _page(text: str) -> HTMLResponse:
    return HTMLResponse(text, headers=_PAGE_HEADERS)


def fleet_page(request: Request) -> HTMLResponse:
    """The fleet page."""
    from fleetdx.orchestrator.htmlreport.fleet import render_fleet

    return _page(render_fleet(_store(request), plotly_src=PLOTLY_URL.lstrip("/"), root=""))


def node_page(request: Request, host: str = Path(pattern=_SAFE)) -> HTMLResponse:
    """A node's page; 404 when the store knows nothing of ``host``."""
    from fleetdx.orchestrator.htmlreport.fleet import render_node

    text = render_node(_store(request), host, plotly_src=".." + PLOTLY_URL, root="../")
    if text is None:
        raise HTTPException(status_code=404, detail=f"no stored run, state or postmortem names node {host!r}")
    return _page(text)


def job_page(request: Request, job_id: str = Path(pattern=_SAFE, max_length=128)) -> HTMLResponse:
    """A job's page; 404 when no stored run, postmortem or step analysis names ``job_id``."""
    from fleetdx.orchestrator.htmlreport.job import render_job
    from fleetdx.orchestrator.store.jobs import job_report

    report = job_report(_store(request), job_id)
    if report is None:
        raise HTTPException(status_code=404, detail=f"no stored run, postmortem or step analysis names job {job_id!r}")
    root = "../" * (1 + job_id.count("/"))  # a job id may hold slashes ("namespace/name"): the page sits deeper
    return _page(render_job(report, plotly_src=root.rstrip("/") + PLOTLY_URL, root=root))


def postmortem_page(request: Request, postmortem_id: str = Path(pattern=r"^[0-9A-Za-z_.-]{1,64}$")) -> HTMLResponse:
    """A stored postmortem as its HTML report; 404 when unknown."""
    from fleetdx.orchestrator.htmlreport import render_postmortem
    from fleetdx.orchestrator.postmortem.contracts import PostmortemReport

    try:
        report = _store(request).get_postmortem(postmortem_id, PostmortemReport)
    except RunNotFound:
        raise HTTPException(status_code=404, detail=f"no stored postmortem {postmortem_id!r}") from None
    return _page(render_postmortem(report, plotly_src=".." + PLOTLY_URL))


def steps_page(request: Request, analysis_id: str = Path(pattern=r"^[0-9A-Za-z_.-]{1,64}$")) -> HTMLResponse:
    """A stored step analysis as its HTML report (without the per-step series: those are not stored); 404 when
    unknown."""
    from fleetdx.orchestrator.htmlreport import render_steps
    from fleetdx.orchestrator.steps.contracts import StepsReport

    try:
        report = _store(request).get_step_analysis(analysis_id, StepsReport)
    except RunNotFound:
        raise HTTPException(status_code=404, detail=f"no stored step analysis {analysis_id!r}") from None
    return _page(render_steps(report))


@lru_cache(maxsize=1)
def _plotly() -> tuple[bytes, str]:
    from fleetdx.orchestrator.htmlreport.page import plotly_js

    body = str(plotly_js()).encode()
    return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def plotly_script(request: Request) -> Response:
    """plotly.js as the ``plotly`` package ships it (304 when ``If-None-Match`` names its ETag)."""
    body, etag = _plotly()
    headers = {"ETag": etag, "Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="text/javascript; charset=utf-8", headers=headers)


def router() -> APIRouter:
    """The pages' routes (see the module doc), to be included by the API app."""
    read = [Depends(require_read)]
    r = APIRouter(include_in_schema=False)
    r.add_api_route("/", fleet_page, methods=["GET"], response_class=HTMLResponse, dependencies=read)
    r.add_api_route("/nodes/{host}", node_page, methods=["GET"], response_class=HTMLResponse, dependencies=read)
    r.add_api_route("/jobs/{job_id:path}", job_page, methods=["GET"], response_class=HTMLResponse, dependencies=read)
    r.add_api_route(
        "/postmortems/{postmortem_id}",
        postmortem_page,
        methods=["GET"],
        response_class=HTMLResponse,
        dependencies=read,
    )
    r.add_api_route("/steps/{analysis_id}", steps_page, methods=["GET"], response_class=HTMLResponse, dependencies=read)
    r.add_api_route(PLOTLY_URL, plotly_script, methods=["GET"])
    return r
