"""The API's own documentation: ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), with their scripts and stylesheets
served by the service itself, and a summary, a description and an example for every operation of
``/openapi.json``.

A cluster's service often has no internet access: FastAPI's default pages load Swagger UI and ReDoc from a CDN
(cdn.jsdelivr.net) and ReDoc's fonts from Google Fonts, so they stay blank there. Here the assets come from the
``fastapi-offline`` package (in the ``[server]`` extra; it ships ``swagger-ui-bundle.js``, ``swagger-ui.css``,
``redoc.standalone.js`` and a favicon) and are served under :data:`ASSETS_URL`; the pages name no other origin
(Swagger UI's validator badge, which calls validator.swagger.io, is turned off; ReDoc's Google Fonts are not
loaded, and the one image its script fetches from cdn.redoc.ly is pointed at the favicon served here). The
pages and ``/openapi.json`` need no token, even with ``auth_reads``: they describe the API, they hold no data.

:data:`OPERATIONS` gives each operation its summary, its description (Markdown, for the person reading the
page; the route's docstring stays the developer's) and examples of its request and answers. The examples are
real answers of this service (a pre-flight of one node stored in an empty database, a placement over a
hostlist), and tests/test_api_docs.py validates each against its contract so that they cannot drift from the
models. An operation missing from the table keeps its docstring and FastAPI's generated summary, and that test
fails until it has an example.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

#: where the Swagger UI and ReDoc assets are served
ASSETS_URL = "/docs-assets"
#: the asset files, in the ``fastapi_offline`` package's ``static`` folder
SWAGGER_JS = "swagger-ui-bundle.js"
SWAGGER_CSS = "swagger-ui.css"
REDOC_JS = "redoc.standalone.js"
FAVICON = "favicon.png"
#: ReDoc's script, served from memory with its one reference to another origin (the "API docs by Redocly"
#: logo, fetched from cdn.redoc.ly by its sidebar; ReDoc has no option to leave it out) pointed at our favicon
REDOC_JS_URL = "/docs-redoc/redoc.standalone.js"
REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
#: Swagger UI's settings: no validator badge (it would send the schema's URL to validator.swagger.io)
SWAGGER_UI_PARAMETERS: dict[str, Any] = {"validatorUrl": None, "defaultModelsExpandDepth": 0}


@dataclass(frozen=True)
class OperationDoc:
    """What the docs say of one operation: a one-line ``summary``, a Markdown ``description``, an example of its
    JSON request body (``request``, ``None`` when it takes none) and of its answers by HTTP status
    (``responses``: status -> example body; a ``str`` is a text body)."""

    summary: str
    description: str
    responses: dict[int, Any]
    request: Any = None
    request_model: str | None = None  #: the request body's component schema when the route reads it by hand
    response_media: dict[int, str] = field(default_factory=dict)  #: status -> media type, when not JSON


_HOST = "gpu07"
_RUN_ID = "pf-20261127-0412-gpu07"
_STARTED = 1795752731.0
_FINDING: dict[str, Any] = {
    "code": "TOPO_AFFINITY_MISSING",
    "severity": "warning",
    "scope": "node",
    "nodes": [_HOST],
    "subject": "GPU0",
    "message": "GPU0 has no GPU NUMA ID (N/A) in nvidia-smi topo -m",
    "action": "bind each local rank to the NUMA node of its GPU (numactl --cpunodebind/--membind, `fleetdx topo "
    "advise`)",
    "details": {"cells": ["0-15", "0", "N/A"], "file": "nvidia-smi_topo_-m.txt"},
}
#: a quick pre-flight of one H100 node with one warning (RunReport)
RUN_REPORT: dict[str, Any] = {
    "kind": "preflight",
    "verdict": "WARNING",
    "exit_code": 1,
    "findings": [_FINDING],
    "run_id": _RUN_ID,
    "started_at": _STARTED,
    "finished_at": _STARTED + 3.25,
    "level": "quick",
    "nodes": [
        {
            "host": _HOST,
            "verdict": "WARNING",
            "probes": [
                {"name": "nvidia-smi topo -m", "status": "ok", "duration_s": 0.049},
                {"name": "nvidia-smi -q -x", "status": "ok", "duration_s": 0.118},
                {"name": "ibstat", "status": "skipped", "error": "ibstat: not installed (no InfiniBand)"},
            ],
        }
    ],
    "recommendations": [
        {
            "node": _HOST,
            "kind": "rank-binding",
            "subject": "local rank 0",
            "message": "bind local rank 0 to CPUs 0-15 (NUMA node 0)",
            "data": {"gpu": 0, "cpus": "0-15", "numa_node": 0},
        }
    ],
}
RUN_SUMMARY: dict[str, Any] = {
    "run_id": _RUN_ID,
    "kind": "preflight",
    "level": "quick",
    "schedule": None,
    "started_at": _STARTED,
    "finished_at": _STARTED + 3.25,
    "verdict": "WARNING",
    "exit_code": 1,
    "simulated": False,
    "exclude": "",
    "job_id": "4711",
    "node_count": 1,
    "finding_count": 1,
}
NODE_HISTORY: dict[str, Any] = {
    "host": _HOST,
    "entries": [
        {
            "run_id": _RUN_ID,
            "kind": "preflight",
            "level": "quick",
            "started_at": _STARTED,
            "verdict": "WARNING",
            "findings": [_FINDING],
        }
    ],
}
FINDING_RECORD: dict[str, Any] = {"run_id": _RUN_ID, "started_at": _STARTED, "finding": _FINDING}
PLACEMENT_REQUEST: dict[str, Any] = {"nodes": 2, "gpus_per_node": 8, "hostlist": "gpu[01-03]"}


def _advice(host: str, rank: int) -> dict[str, Any]:
    return {
        "host": host,
        "node_rank": rank,
        "penalty": 0.5,
        "health": "no stored run: health unknown",
        "history": "never seen: +0.5",
        "gpu_note": f"no nvidia-smi_topo_-m.txt of {host} in the store: GPU subset not advised; bind by the "
        "scheduler's GRES",
    }


#: the answer of an empty store to :data:`PLACEMENT_REQUEST` (PlacementAnswer)
PLACEMENT_ANSWER: dict[str, Any] = {
    "request": PLACEMENT_REQUEST,
    "source": "hostlist",
    "placed": True,
    "exit_code": 0,
    "nodes": [_advice("gpu01", 0), _advice("gpu02", 1)],
    "slurm": {"nodelist": "gpu[01-02]", "argv": ["--nodes=2", "--nodelist=gpu[01-02]"]},
    "kubernetes_affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu01", "gpu02"]}
                        ]
                    }
                ]
            }
        }
    },
    "reasons": [
        "2 fit node(s) of lowest history penalty",
        "history penalties of the chosen nodes: gpu01 0.5, gpu02 0.5",
    ],
    "warnings": [
        "candidates from the hostlist only: scheduler states (drain, down) were not checked",
        "no cluster topology: nodes ranked by history only, network locality unknown",
    ],
    "policy": {},
}
METRICS_TEXT = (
    "# HELP fleetdx_node_verdict Verdict of the node in its latest fleetdx run: 0 OK, 1 WARNING, 2 CRITICAL, "
    "3 UNKNOWN (Nagios).\n"
    "# TYPE fleetdx_node_verdict gauge\n"
    'fleetdx_node_verdict{node="gpu07"} 1.0\n'
    "# HELP fleetdx_node_open_findings Findings of the node's latest fleetdx run that name the node, by code and "
    "severity.\n"
    "# TYPE fleetdx_node_open_findings gauge\n"
    'fleetdx_node_open_findings{code="TOPO_AFFINITY_MISSING",node="gpu07",severity="warning"} 1.0\n'
)
_TOKEN = "Needs a `read` token only when the service runs with `--auth-reads`."
_WRITE = "Needs a `write` token (`fleetdx token create NAME --scope write`), sent as `Authorization: Bearer TOKEN`."

#: (method, path) -> what the docs say of it
LIVE_JOB: dict[str, Any] = {
    "job_id": "4242",
    "watcher_host": "login-01",
    "started_at": _STARTED,
    "updated_at": _STARTED + 600,
    "state": "running",
    "ranks": 16,
    "last_step": 1842,
    "step_median_ms": 412.5,
    "verdict": "WARNING",
    "findings": [],
}

OPERATIONS: dict[tuple[str, str], OperationDoc] = {
    ("get", "/healthz"): OperationDoc(
        "Is the service up and its database reachable",
        "200 with the database's schema revision when the database answers, 503 with the reason (the database "
        "URL left out) when it does not. Never needs a token: load balancers and Kubernetes probes call it.",
        {200: {"status": "ok", "revision": "0006"}, 503: {"status": "error", "error": "cannot reach the run database"}},
    ),
    ("get", "/runs"): OperationDoc(
        "List stored runs, newest first",
        "Pre-flights, analyze and bandwidth runs as summaries (verdict, node and finding counts), newest first; "
        f"`job` keeps one scheduler job's runs. {_TOKEN}",
        {200: [RUN_SUMMARY]},
    ),
    ("get", "/runs/{run_id}"): OperationDoc(
        "One run's full report",
        f"The stored `RunReport`: every node's verdict and probes, the findings with their evidence, the "
        f"recommendations and busbw curves. 404 for an unknown `run_id`. {_TOKEN}",
        {200: RUN_REPORT, 404: {"detail": "no run pf-unknown in the run database"}},
    ),
    ("get", "/nodes/{host}/history"): OperationDoc(
        "A node's verdicts and findings, run by run",
        "The node's verdict and findings in each stored run that checked it, newest first; a pair or group "
        f"finding (e.g. a slow link between two nodes) is in the history of every host it names. {_TOKEN}",
        {200: NODE_HISTORY},
    ),
    ("get", "/findings"): OperationDoc(
        "Search stored findings",
        "Findings newest first, filtered by `code` (see `fleetdx codes`), `severity` and `host` (a finding "
        f"matches every host it names). An unknown code or severity is a 422 listing the valid ones. {_TOKEN}",
        {200: [FINDING_RECORD]},
    ),
    ("get", "/metrics"): OperationDoc(
        "Prometheus metrics",
        "The fleet's state from the store (each node's newest verdict, its open findings by code) and the "
        "service's request "
        f"latency, in the Prometheus text exposition format. {_TOKEN}",
        {200: METRICS_TEXT},
        response_media={200: "text/plain; version=0.0.4"},
    ),
    ("get", "/placement"): OperationDoc(
        "Where a job should go (query string)",
        "The nodes, GPUs and Slurm/Kubernetes arguments for a job of `nodes` x `gpus_per_node` GPUs, ranked by "
        "the nodes' stored health and history (and switch hops when the service has a topology). Candidates "
        "come from Slurm when the service runs with `--slurm`, else from `hostlist`. Not enough fit nodes is a "
        "200 with `placed` false. Answers carry an `ETag`; `If-None-Match` gets a 304 while nothing changed. "
        f"{_TOKEN}",
        {200: PLACEMENT_ANSWER, 422: {"detail": "no hostlist and no scheduler: nothing to place on"}},
    ),
    ("post", "/placement"): OperationDoc(
        "Where a job should go (JSON body)",
        f"The same answer as `GET /placement`, asked with a `PlacementRequest` body. A read: it changes nothing. "
        f"{_TOKEN}",
        {200: PLACEMENT_ANSWER},
        request=PLACEMENT_REQUEST,
    ),
    ("post", "/reports"): OperationDoc(
        "Push one run's report",
        "Store a run's `RunReport` with its raw tool outputs (`raw`: host -> bundle file name -> text), as "
        "`fleetdx preflight --report-to URL` sends it; `Content-Encoding: gzip` is taken. 201 when stored, 200 "
        "with `inserted` false when that `run_id` is already stored (a retried push never duplicates). A "
        "CRITICAL pre-flight stored here fires the service's webhooks. 413 over the body limit, 415 for "
        f"another content type, 422 for a body that is not a report. {_WRITE}",
        {201: {"run_id": _RUN_ID, "inserted": True}, 200: {"run_id": _RUN_ID, "inserted": False}},
        request={"report": RUN_REPORT, "raw": {_HOST: {"nvidia-smi_topo_-m.txt": "\tGPU0\tCPU Affinity\t..."}}},
        request_model="ReportUpload",
    ),
    ("post", "/postmortems"): OperationDoc(
        "Postmortem of uploaded job logs",
        "The body is one job log (`text/plain`) or a tar archive of a job's logs (`application/x-tar`, "
        "`application/gzip` for `.tar.gz`, or `Content-Encoding: gzip`). fleetdx names the rank, host and cause "
        "that failed first, adds the blamed hosts' stored history, keeps the postmortem and answers where to "
        "read it (`page`, relative to the service). `job_id` records the job. 400 for an archive that does not "
        f"open or holds no file, 413 over the body limit, 415 for another media type. {_WRITE}",
        {
            201: {
                "postmortem_id": "5f0c2a9e41b34f0e9d6a7c1b2e3f4a5b",
                "job_id": "4242",
                "verdict": "CRITICAL",
                "first_cause": "OOM_GPU",
                "causes": 2,
                "page": "postmortems/5f0c2a9e41b34f0e9d6a7c1b2e3f4a5b",
            }
        },
    ),
    ("post", "/steps"): OperationDoc(
        "Step analysis of uploaded traces or step logs",
        "The body is a tar archive of one run's PyTorch profiler traces (`rank-N.json[.gz]`), StepTimer logs "
        "(`steps-rank-N.jsonl`) or training logs printing step times, or one training log (`text/plain`). "
        "fleetdx names the stalling stage of the step and any straggler rank (as `fleetdx steps`), keeps the "
        "analysis and answers where to read it (`page`). 400 when nothing could be decomposed into steps, 413 "
        f"over the body limit, 415 for another media type. {_WRITE}",
        {
            201: {
                "analysis_id": "9b1d3c0e7a2f4e5d8c6b4a3f2e1d0c9b",
                "job_id": "4242",
                "verdict": "WARNING",
                "first_finding": "STEP_STRAGGLER_RANK",
                "ranks": 4,
                "page": "steps/9b1d3c0e7a2f4e5d8c6b4a3f2e1d0c9b",
            }
        },
    ),
    ("post", "/live"): OperationDoc(
        "Push a running job's live state",
        "What `fleetdx watch --report-to URL` sends every few seconds and at each finding: the job's state "
        "(`running`, `hung`, `ended`), how many ranks report steps, the newest step, the median step time and the "
        "newest findings. Kept as the job's latest state (an older push changes nothing); the fleet page and the "
        "job's page show it. A job first seen `hung` fires the service's webhooks (`job.hang`). 422 for a body "
        f"that is not a live state. {_WRITE}",
        {200: {"job_id": "4242"}},
        request=LIVE_JOB,
        request_model="LiveJobRecord",
    ),
    ("get", "/live"): OperationDoc(
        "Running jobs' live state",
        "The live states `fleetdx watch --report-to` pushed in the last `since` seconds (default an hour), "
        f"newest first. {_TOKEN}",
        {200: [LIVE_JOB]},
    ),
    ("post", "/analyze"): OperationDoc(
        "Diagnose uploaded node bundles",
        "The body is a tar archive of node bundles (one folder per node, the files `fleetdx collect` or the "
        "epilog writes). The pre-flight diagnosis runs offline over them and the run is stored as an `analyze` "
        "run, as a pushed report would be; the answer gives its `run_id`, verdict and report path. 400 when a "
        f"folder is not a node bundle, 413 over the body limit, 415 for another media type. {_WRITE}",
        {
            201: {
                "run_id": _RUN_ID.replace("pf-", "an-"),
                "verdict": "WARNING",
                "nodes": 1,
                "report": "runs/" + _RUN_ID.replace("pf-", "an-"),
            }
        },
    ),
}


def _assets() -> str:
    """The folder of the asset files (raises ModuleNotFoundError without the ``[server]`` extra)."""
    return str(resources.files("fastapi_offline") / "static")


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs``, ``/redoc`` and their assets from this service, and document every operation of
    ``app.openapi()`` from :data:`OPERATIONS` (build ``app`` with ``docs_url=None, redoc_url=None``)."""
    app.mount(ASSETS_URL, StaticFiles(directory=_assets()), name="docs-assets")
    redoc_js = _redoc_script()

    async def redoc_script() -> Response:
        return Response(
            redoc_js, media_type="text/javascript; charset=utf-8", headers={"Cache-Control": "max-age=3600"}
        )

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS_URL}/{SWAGGER_JS}",
            swagger_css_url=f"{root}{ASSETS_URL}/{SWAGGER_CSS}",
            swagger_favicon_url=f"{root}{ASSETS_URL}/{FAVICON}",
            swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
        )

    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            redoc_js_url=f"{root}{REDOC_JS_URL}",
            redoc_favicon_url=f"{root}{ASSETS_URL}/{FAVICON}",
            with_google_fonts=False,
        )

    app.add_api_route("/docs", swagger_ui, methods=["GET"], include_in_schema=False)
    app.add_api_route("/redoc", redoc, methods=["GET"], include_in_schema=False)
    app.add_api_route(REDOC_JS_URL, redoc_script, methods=["GET"], include_in_schema=False)
    app.openapi = _documented(app.openapi)  # type: ignore[method-assign]


def _redoc_script() -> bytes:
    """ReDoc's standalone script with its CDN logo replaced by the favicon served here (a path relative to the
    page, so that it holds behind a reverse proxy's prefix too). Raises ModuleNotFoundError without the
    ``[server]`` extra."""
    text = (resources.files("fastapi_offline") / "static" / REDOC_JS).read_text(encoding="utf-8")
    return text.replace(REDOC_CDN_LOGO, f"{ASSETS_URL.lstrip('/')}/{FAVICON}").encode("utf-8")


def _documented(build: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """``build`` (FastAPI's schema maker, which caches its result) with :func:`document` applied once."""
    done: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not done:
            done.update(document(build()))
        return done

    return openapi


def document(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (an OpenAPI document, changed in place and returned) with each operation of
    :data:`OPERATIONS` given its summary, description and examples."""
    for (method, path), doc in OPERATIONS.items():
        op = schema.get("paths", {}).get(path, {}).get(method)
        if op is None:
            continue
        op["summary"] = doc.summary
        op["description"] = doc.description
        for status, example in doc.responses.items():
            media = doc.response_media.get(status, "application/json")
            answer = op.setdefault("responses", {}).setdefault(str(status), {"description": _reason(status)})
            content = answer.setdefault("content", {})
            if media != "application/json":
                content.pop("application/json", None)
            content.setdefault(media, {})["example"] = example
        if doc.request is not None:
            body = op.setdefault("requestBody", {"required": True, "content": {}})
            entry = body["content"].setdefault("application/json", {})
            if doc.request_model is not None:
                entry["schema"] = {"$ref": f"#/components/schemas/{doc.request_model}"}
                _add_component(schema, doc.request_model)
            entry["example"] = doc.request
    return schema


def _reason(status: int) -> str:
    from http import HTTPStatus

    return HTTPStatus(status).phrase


def _add_component(schema: dict[str, Any], name: str) -> None:
    """Put the JSON schema of contract ``name`` (and of the models it refers to) in ``components/schemas``."""
    from fleetdx.orchestrator.service.ingest import ReportUpload
    from fleetdx.orchestrator.store.records import LiveJobRecord

    models: dict[str, Any] = {"ReportUpload": ReportUpload, "LiveJobRecord": LiveJobRecord}
    model_schema = models[name].model_json_schema(ref_template="#/components/schemas/{model}", mode="validation")
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for def_name, definition in model_schema.pop("$defs", {}).items():
        components.setdefault(def_name, definition)
    components[name] = model_schema
