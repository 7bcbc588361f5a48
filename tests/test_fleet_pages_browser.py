"""The fleet page and a job page as a person sees them: headless Chromium (Debian's ``chromium``, driven by
Playwright) against a running ``fleetdx serve`` app (uvicorn in a thread) over a store with a job's runs, a
postmortem and a quarantined node. Each page draws with no console or page error, asks nothing of another
origin, draws its charts, and shows what matters in the first 1280x900 screen: the fleet's nodes by state
(the fleet page), the job's verdict and its nodes (the job page). Screenshots are kept like
tests/test_htmlreport_browser.py's ($FLEETDX_TEST_ARTIFACTS, else a new /tmp folder; ``pytest -rP`` prints
the path)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store
from tests.browser import chromium, require_chromium, served, shots_dir
from tests.store_samples import migrated, preflight_raw, preflight_run
from tests.test_fleet_pages import JOB, fill

pytestmark = pytest.mark.chromium

sync_api = require_chromium()

VIEWPORT = {"width": 1280, "height": 900}


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("fleet") / "fleet.db"
    with Store.open(migrated(f"sqlite:///{db}")) as store:
        fill(store)
        store.save_report(preflight_run("pf-1", 1_763_800_000.0).model_copy(update={"job": JOB}), preflight_raw())
        with served(create_app(store)) as url:
            yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(sync_api) as b:
        yield b


@pytest.fixture(scope="module")
def shots() -> Path:
    return shots_dir("fleet-page-screenshots")


def _open(browser: Any, url: str, charts: int) -> tuple[Any, list[str], list[str]]:
    """Open ``url`` at 1280x900 and wait until ``charts`` plotly charts are drawn: the page, its errors and
    every URL it requested."""
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(url, wait_until="networkidle", timeout=60_000)
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {charts}", timeout=60_000)
    return page, errors, requests


def _above_the_fold(page: Any, selector: str) -> bool:
    box = page.locator(selector).first.bounding_box()
    return box is not None and box["height"] > 0 and box["y"] + min(box["height"], 40) <= VIEWPORT["height"]


def _foreign(requests: list[str], base_url: str) -> list[str]:
    origin = urlsplit(base_url).netloc
    return [u for u in requests if urlsplit(u).scheme not in ("data", "blob") and urlsplit(u).netloc != origin]


def test_fleet_page_in_chromium(browser: Any, base_url: str, shots: Path) -> None:
    page, errors, requests = _open(browser, base_url + "/", charts=1)
    shot = shots / "fleet.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert errors == [], errors
    assert _foreign(requests, base_url) == []
    assert any(u.endswith("/static/plotly.min.js") for u in requests)
    # the first screen: how many nodes in which state, and the cells of the quarantined node
    assert _above_the_fold(page, "#fleet-summary") and _above_the_fold(page, "#state-quarantined .grid a")
    assert "quarantined" in page.inner_text("#fleet-summary")
    cell = page.locator('#state-quarantined .grid a[href="nodes/gpu07"]')
    assert cell.count() == 1 and cell.get_attribute("title") == "gpu07: quarantined, CRITICAL"
    cell.click()  # a cell leads to its node's page, which draws its timeline
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 1", timeout=60_000)
    assert page.url == base_url + "/nodes/gpu07" and "quarantined" in page.inner_text("#state")
    page.screenshot(path=str(shots / "node-gpu07.png"), full_page=True)
    assert errors == [], errors
    page.close()


def test_job_page_in_chromium(browser: Any, base_url: str, shots: Path) -> None:
    page, errors, requests = _open(browser, base_url + "/jobs/4711", charts=1)
    shot = shots / "job-4711.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert errors == [], errors
    assert _foreign(requests, base_url) == []
    assert _above_the_fold(page, "#verdict") and "CRITICAL" in page.inner_text("#verdict")
    assert _above_the_fold(page, "#nodes table") and "nid005471" in page.inner_text("#nodes")
    page.locator("#postmortems a").first.click()  # the postmortem's own HTML report, served
    page.wait_for_load_state("networkidle")
    assert "/postmortems/" in page.url and "GPU_HW_FAULT" in page.inner_text("body")
    assert errors == [], errors
    page.close()


@pytest.fixture(scope="module")
def big_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A service over a fleet of 5,000 nodes: one pre-flight naming them all, every 50th CRITICAL, every 100th
    drained by fleetdx."""
    from fleetdx.orchestrator.diagnosis.node_states import DrainEvent
    from fleetdx.orchestrator.judgement import Finding, FindingCode
    from fleetdx.orchestrator.report import RunKind, assemble_report
    from fleetdx.orchestrator.store import states as node_states
    from fleetdx.probes.contracts import Level, Severity

    db = tmp_path_factory.mktemp("big") / "big.db"
    hosts = [f"gpu{i:05d}" for i in range(5000)]
    bad = [
        Finding(code=FindingCode.GPU_XID, severity=Severity.CRITICAL, nodes=[h], subject="GPU0", message="XID 79")
        for h in hosts[::50]
    ]
    with Store.open(migrated(f"sqlite:///{db}")) as store:
        store.save_report(assemble_report(RunKind.PREFLIGHT, hosts, bad, started_at=1.7e9, level=Level.QUICK))
        for h in hosts[::100]:
            node_states.record(store, h, DrainEvent(at=1.7e9 + 10, reason="XID 79 GPU0"))
        with served(create_app(store)) as url:
            yield url


def test_a_fleet_of_5000_nodes_in_chromium(browser: Any, big_url: str, shots: Path) -> None:
    started = time.monotonic()
    page, errors, requests = _open(browser, big_url + "/", charts=1)
    took = time.monotonic() - started
    shot = shots / "fleet-5000.png"
    page.screenshot(path=str(shot), full_page=False)  # the first screen
    print(f"screenshot: {shot}; 5,000-node fleet page loaded and drawn in {took:.1f} s (wall, loaded machine)")
    assert errors == [], errors
    assert _foreign(requests, big_url) == []
    assert page.locator(".grid a").count() == 5000
    assert _above_the_fold(page, "#state-quarantined .grid a") and _above_the_fold(page, "#state-suspect .grid a")
    summary = page.inner_text("#fleet-summary")
    assert "5000 node(s)" in summary and "50 quarantined" in summary and "50 suspect" in summary
    page.close()


def test_the_job_report_file_in_chromium(browser: Any, tmp_path: Path, shots: Path) -> None:
    """``fleetdx report --job ID --html OUT``'s file: the same page, self-contained (file://, nothing else)."""
    from fleetdx.orchestrator.htmlreport import write_html
    from fleetdx.orchestrator.htmlreport.job import render_job
    from fleetdx.orchestrator.store.jobs import job_report

    with Store.open(migrated(f"sqlite:///{tmp_path}/file.db")) as store:
        fill(store)
        report = job_report(store, "4711")
    assert report is not None
    out = tmp_path / "job-4711.html"
    write_html(out, render_job(report))
    page, errors, requests = _open(browser, out.as_uri(), charts=1)
    page.screenshot(path=str(shots / "job-4711-file.png"), full_page=False)
    assert errors == [], errors
    assert [u for u in requests if u != out.as_uri()] == []
    assert _above_the_fold(page, "#verdict") and "CRITICAL" in page.inner_text("#verdict")
    page.close()
