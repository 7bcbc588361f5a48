"""/docs and /redoc as a person sees them, in headless Chromium against a running ``fleetdx serve`` app
(uvicorn in a thread): every operation is drawn, no console or page error, and no request leaves the
service's origin (a cluster without internet access sees the same page). Screenshots are kept like
tests/test_htmlreport_browser.py's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store
from tests.browser import chromium, require_chromium, served, shots_dir
from tests.store_samples import migrated

pytestmark = pytest.mark.chromium

sync_api = require_chromium()


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("docs") / "docs.db"
    with Store.open(migrated(f"sqlite:///{db}")) as store, served(create_app(store)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(sync_api) as b:
        yield b


def _shots() -> Path:
    return shots_dir("api-docs-screenshots")


def _open(browser: Any, url: str, ready: str, count: int) -> tuple[Any, list[str], list[str]]:
    """Open ``url``, wait until ``count`` elements match ``ready``; the page, its errors and its requests."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(url, wait_until="networkidle", timeout=60_000)
    page.wait_for_function(f"document.querySelectorAll({ready!r}).length >= {count}", timeout=60_000)
    return page, errors, requests


def _operation_count(base_url: str) -> int:
    import httpx

    schema = httpx.get(f"{base_url}/openapi.json", timeout=30).json()
    return sum(len(ops) for ops in schema["paths"].values())


@pytest.mark.parametrize(("path", "ready"), [("/docs", ".opblock"), ("/redoc", "[data-section-id^='operation/']")])
def test_docs_render_offline_in_chromium(browser: Any, base_url: str, path: str, ready: str) -> None:
    count = _operation_count(base_url)
    page, errors, requests = _open(browser, base_url + path, ready, count)
    shot = _shots() / f"api{path.replace('/', '-')}.png"
    page.screenshot(path=str(shot), full_page=False)
    print(f"screenshot: {shot}")
    origin = urlsplit(base_url).netloc
    foreign = [u for u in requests if urlsplit(u).scheme in ("http", "https") and urlsplit(u).netloc != origin]
    assert foreign == [], f"{path} asked another origin: {foreign}"
    assert errors == [], errors
    text = page.inner_text("body")
    assert "Push one run's report" in text and "Where a job should go" in text
    page.close()
