"""The API's documentation works without internet access: /docs and /redoc name no other origin, their assets
are served by the service itself, and every operation has a summary, a description and an example that
validates against its contract."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, TypeAdapter

from fleetdx.orchestrator.placement.contracts import PlacementAnswer, PlacementRequest
from fleetdx.orchestrator.report import NodeHistory, RunReport
from fleetdx.orchestrator.service import docs
from fleetdx.orchestrator.service.api import Health, create_app
from fleetdx.orchestrator.service.ingest import IngestResult, ReportUpload
from fleetdx.orchestrator.service.live import LiveStored
from fleetdx.orchestrator.service.uploads import AnalyzeUploaded, PostmortemUploaded, StepsUploaded
from fleetdx.orchestrator.store import FindingRecord, RunSummary, Store
from fleetdx.orchestrator.store.records import LiveJobRecord
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from tests.store_samples import migrated

#: a reference in HTML to a script, stylesheet, image or frame: src="..." / href="..."
_REF = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']+)["']""", re.I)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with Store.open(migrated(f"sqlite:///{tmp_path}/docs.db")) as store:
        yield TestClient(create_app(store))


def _refs(html: str) -> list[str]:
    return _REF.findall(html)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_only_from_this_service(client: TestClient, page: str) -> None:
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    refs = _refs(r.text)
    assert refs, "the page names no script or stylesheet at all"
    foreign = [u for u in refs if _SCHEME.match(u) or u.startswith("//")]
    assert foreign == [], f"{page} loads from another origin: {foreign}"
    assert "fonts.googleapis" not in r.text and "cdn.jsdelivr" not in r.text
    for url in refs:  # every asset it names is served, with the right type
        asset = client.get(url)
        assert asset.status_code == 200, url
        kind = asset.headers["content-type"]
        if url.endswith(".js"):
            assert kind.startswith(("text/javascript", "application/javascript")) and len(asset.content) > 100_000
        elif url.endswith(".css"):
            assert kind.startswith("text/css") and len(asset.content) > 10_000
    scripts = [u for u in refs if u.endswith(".js")]
    assert scripts and all(u.startswith((docs.ASSETS_URL + "/", docs.REDOC_JS_URL)) for u in scripts)


def test_redoc_script_names_no_cdn(client: TestClient) -> None:
    """ReDoc's sidebar logo is fetched from cdn.redoc.ly by its script: the script served here points it at the
    favicon (Chromium's test, tests/test_api_docs_browser.py, sees every request the page makes)."""
    script = client.get(docs.REDOC_JS_URL).text
    assert docs.REDOC_CDN_LOGO not in script and f"docs-assets/{docs.FAVICON}" in script


def test_swagger_ui_has_no_validator_badge(client: TestClient) -> None:
    """Swagger UI's default validator badge sends the schema's URL to validator.swagger.io."""
    assert '"validatorUrl": null' in client.get("/docs").text


def test_docs_follow_a_root_path(tmp_path: Path) -> None:
    """Behind a reverse proxy at /fleetdx the page's assets and schema are under that prefix."""
    with Store.open(migrated(f"sqlite:///{tmp_path}/docs.db")) as store:
        c = TestClient(create_app(store), root_path="/fleetdx")
        html = c.get("/docs").text
    assert "/fleetdx/docs-assets/swagger-ui-bundle.js" in html and "'/fleetdx/openapi.json'" in html


def _operations(schema: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            yield method, path, op


def _examples(op: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """Every (where, media type, example) of an operation: its request body's and its answers'."""
    found = []
    body = op.get("requestBody", {}).get("content", {})
    for media, entry in body.items():
        found += [("request", media, entry["example"])] if "example" in entry else []
        found += [("request", media, e["value"]) for e in entry.get("examples", {}).values()]
    for status, answer in op.get("responses", {}).items():
        for media, entry in answer.get("content", {}).items():
            found += [(status, media, entry["example"])] if "example" in entry else []
            found += [(status, media, e["value"]) for e in entry.get("examples", {}).values()]
    return found


def test_every_operation_has_a_summary_a_description_and_an_example(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    ops = list(_operations(schema))
    assert len(ops) >= 9
    lacking = []
    for method, path, op in ops:
        summary, description = op.get("summary", ""), op.get("description", "")
        generated = summary == " ".join(w.capitalize() for w in op.get("operationId", "").split("_")[:-2])
        if not summary or generated or len(description) < 40 or not _examples(op):
            lacking.append(f"{method.upper()} {path}")
    assert lacking == [], f"no summary, description or example (see orchestrator/service/docs.py): {lacking}"


#: (method, path) -> status -> the contract its example must validate as
_CONTRACTS: dict[tuple[str, str], dict[str, Any]] = {
    ("get", "/healthz"): {"200": Health, "503": Health},
    ("get", "/runs"): {"200": list[RunSummary]},
    ("get", "/runs/{run_id}"): {"200": RunReport},
    ("get", "/nodes/{host}/history"): {"200": NodeHistory},
    ("get", "/findings"): {"200": list[FindingRecord]},
    ("get", "/placement"): {"200": PlacementAnswer},
    ("post", "/placement"): {"200": PlacementAnswer, "request": PlacementRequest},
    ("post", "/reports"): {"201": IngestResult, "200": IngestResult, "request": ReportUpload},
    ("post", "/postmortems"): {"201": PostmortemUploaded},
    ("post", "/analyze"): {"201": AnalyzeUploaded},
    ("post", "/steps"): {"201": StepsUploaded},
    ("post", "/live"): {"200": LiveStored, "request": LiveJobRecord},
    ("get", "/live"): {"200": list[LiveJobRecord]},
}


def test_examples_are_valid_contracts(client: TestClient) -> None:
    """An example that drifted from its model fails here (the contracts forbid unknown fields)."""
    schema = client.get("/openapi.json").json()
    checked = 0
    for method, path, op in _operations(schema):
        for where, media, example in _examples(op):
            model = _CONTRACTS.get((method, path), {}).get(where)
            if model is None:
                assert "json" not in media or "detail" in example, (method, path, where)
                continue
            if isinstance(model, type) and issubclass(model, BaseModel):
                model.model_validate(example)
            else:
                TypeAdapter(model).validate_python(example)
            checked += 1
    assert checked >= 10


def test_the_request_examples_are_taken_as_given(tmp_path: Path) -> None:
    """The request example of POST /reports is stored (and read back as given), and POST /placement's answers
    with the example's Slurm arguments."""
    with Store.open(migrated(f"sqlite:///{tmp_path}/docs.db")) as store:
        token = create_token(store, "docs", TokenScope.WRITE).token
        client = TestClient(create_app(store))
        schema = client.get("/openapi.json").json()
        example = schema["paths"]["/reports"]["post"]["requestBody"]["content"]["application/json"]["example"]
        assert schema["components"]["schemas"]["ReportUpload"]["properties"]["report"]
        r = client.post("/reports", json=example, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 201 and r.json() == {"run_id": docs.RUN_REPORT["run_id"], "inserted": True}
        stored = client.get(f"/runs/{docs.RUN_REPORT['run_id']}").json()
        assert RunReport.model_validate(stored) == RunReport.model_validate(docs.RUN_REPORT)
        answer = client.post("/placement", json=docs.PLACEMENT_REQUEST).json()
        assert answer["slurm"]["argv"] == docs.PLACEMENT_ANSWER["slurm"]["argv"]


def test_metrics_example_is_what_metrics_prints(client: TestClient) -> None:
    op = client.get("/openapi.json").json()["paths"]["/metrics"]["get"]
    assert list(op["responses"]["200"]["content"]) == ["text/plain; version=0.0.4"]
    names = set(re.findall(r"^# TYPE (\S+)", docs.METRICS_TEXT, re.M))
    assert names <= set(re.findall(r"^# TYPE (\S+)", client.get("/metrics").text, re.M))


def test_docs_need_no_token_even_when_reads_do(tmp_path: Path) -> None:
    """With --auth-reads the data needs a token; the documentation, which holds none, does not."""
    with Store.open(migrated(f"sqlite:///{tmp_path}/docs.db")) as store:
        c = TestClient(create_app(store, auth_reads=True))
        assert c.get("/runs").status_code == 401
        for url in ("/docs", "/redoc", "/openapi.json", docs.REDOC_JS_URL, f"{docs.ASSETS_URL}/{docs.SWAGGER_CSS}"):
            assert c.get(url).status_code == 200, url
