"""The HTML reports as a person sees them: rendered in headless Chromium (Debian's ``chromium``, driven by
Playwright; ``playwright install`` is never needed). Each page must render with no console error and no page
error, load nothing but itself, draw its charts, run none of the hostile input's script, and show the first
cause (or finding) above the fold of a 1280x900 window. A full-page screenshot of each is kept (see
:func:`shots`); its path is printed (``pytest -rP`` shows it)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fleetdx.orchestrator.htmlreport import render_postmortem, render_steps, write_html
from fleetdx.orchestrator.postmortem.contracts import BandwidthCurve, GpuRef, gpu_details
from fleetdx.orchestrator.steps.run import analyse, load_ranks
from fleetdx.probes.parsers.joblog import GpuSource
from tests.htmlreport_samples import (
    POSTMORTEMS,
    STEP_TRACES,
    history_for,
    hostile_postmortem,
    load_postmortem,
    nccl_curves,
    synthetic_huge_postmortem,
)

#: the browser: $FLEETDX_CHROMIUM, else Debian's /usr/bin/chromium, else ``chromium`` on PATH
CHROMIUM = os.environ.get("FLEETDX_CHROMIUM") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium") or ""
)
VIEWPORT = {"width": 1280, "height": 900}

if not CHROMIUM or not Path(CHROMIUM).exists():
    pytest.skip(
        f"Chromium is not installed ({CHROMIUM or 'none on PATH'}; Debian: apt-get install -y chromium)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots() -> Path:
    """Where the screenshots go: ``$FLEETDX_TEST_ARTIFACTS`` when set (CI collects it), else a new
    ``/tmp/fleetdx-htmlreport-screens-*`` folder (outside pytest's own temporary folders, which pytest prunes
    after three runs)."""
    where = os.environ.get("FLEETDX_TEST_ARTIFACTS")
    if where:
        out = Path(where) / "htmlreport-screenshots"
        out.mkdir(parents=True, exist_ok=True)
        return out
    return Path(tempfile.mkdtemp(prefix="fleetdx-htmlreport-screens-"))


@dataclass
class Seen:
    """What a page did in the browser."""

    page: Any
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def open_report(browser: Any, path: Path, charts: int) -> Seen:
    """Open ``path`` at 1280x900 and wait until its ``charts`` plotly charts are drawn."""
    page = browser.new_page(viewport=VIEWPORT)
    seen = Seen(page)
    page.on("console", lambda m: seen.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.page_errors.append(str(e)))
    page.on("request", lambda r: seen.requests.append(r.url))
    page.goto(path.resolve().as_uri(), wait_until="load", timeout=120_000)
    page.wait_for_function(
        f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}", timeout=120_000
    )
    return seen


def check_clean(seen: Seen, path: Path) -> None:
    assert seen.console_errors == []
    assert seen.page_errors == []
    assert seen.requests == [path.resolve().as_uri()]  # nothing but the file itself was loaded
    assert seen.page.evaluate("typeof window.__pwned") == "undefined"


def above_the_fold(seen: Seen, selector: str) -> dict[str, float]:
    box = seen.page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not displayed"
    assert 0 <= box["y"] and box["y"] + 40 <= VIEWPORT["height"], box  # its heading is within the first 900 px
    return box  # type: ignore[no-any-return]


def screenshot(seen: Seen, shots: Path, name: str) -> Path:
    out = shots / f"{name}.png"
    seen.page.screenshot(path=str(out), full_page=True)
    assert out.stat().st_size > 10_000
    print(f"screenshot: {out}")
    return out


@pytest.mark.parametrize("fixture", POSTMORTEMS, ids=lambda p: p.name[11:13])
def test_postmortem_page_in_chromium(browser: Any, shots: Path, tmp_path: Path, fixture: Path) -> None:
    rep = load_postmortem(fixture)
    out = tmp_path / "postmortem.html"
    write_html(out, render_postmortem(rep))
    seen = open_report(browser, out, charts=1)
    check_clean(seen, out)
    above_the_fold(seen, "#cause-1 h3")
    assert rep.causes[0].code.value in seen.page.locator("#cause-1 h3").inner_text()
    # the first cause's first evidence line is displayed as written
    first_text = seen.page.locator("#cause-1 table.evidence td.text").first.inner_text()
    assert first_text == rep.causes[0].evidence[0].text
    screenshot(seen, shots, f"postmortem-{fixture.stem[11:13]}")
    seen.page.close()


def test_hostile_postmortem_with_history_and_bandwidth_in_chromium(browser: Any, shots: Path, tmp_path: Path) -> None:
    rep = hostile_postmortem()
    host = rep.causes[0].host or ""
    out = tmp_path / "hostile.html"
    rep = rep.model_copy(update={"history": [history_for(host)]})
    write_html(out, render_postmortem(rep, curves=nccl_curves()))
    seen = open_report(browser, out, charts=3)  # timeline, heat map, curves
    check_clean(seen, out)
    above_the_fold(seen, "#cause-1 h3")
    # the hostile line is shown as text, not run
    cell = seen.page.locator("#cause-1 table.evidence td.text").first.inner_text()
    assert cell == rep.causes[0].evidence[0].text
    assert seen.page.locator("main img").count() == 0
    # hover the hostile event's marker: plotly's label shows the text as written and runs none of it
    page = seen.page
    page.locator("#timeline-chart").scroll_into_view_if_needed()
    label = page.locator("#timeline-chart .hoverlayer .hovertext")
    for i in range(page.locator("#timeline-chart .point").count()):
        box = page.locator("#timeline-chart .point").nth(i).bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        try:
            label.first.wait_for(state="attached", timeout=5000)
        except sync_api.TimeoutError:
            continue
        if "__pwned" in (label.first.text_content() or ""):
            break
    else:
        pytest.fail("no hover label shows the hostile event")
    assert "<script>window.__pwned=1</script>" in label.first.text_content()
    assert page.locator(".hoverlayer img, .hoverlayer script").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    screenshot(seen, shots, "postmortem-hostile")
    seen.page.close()


def test_huge_postmortem_in_chromium(browser: Any, shots: Path, tmp_path: Path) -> None:
    out = tmp_path / "huge.html"
    write_html(out, render_postmortem(synthetic_huge_postmortem()))
    seen = open_report(browser, out, charts=1)
    check_clean(seen, out)
    above_the_fold(seen, "#cause-1 h3")
    screenshot(seen, shots, "postmortem-huge-synthetic")
    seen.page.close()


def test_steps_page_in_chromium(browser: Any, shots: Path, tmp_path: Path) -> None:
    loaded = load_ranks([STEP_TRACES])
    rep = analyse(loaded)
    out = tmp_path / "steps.html"
    write_html(out, render_steps(rep, ranks=loaded.ranks, sources=[str(STEP_TRACES)]))
    seen = open_report(browser, out, charts=2)
    check_clean(seen, out)
    above_the_fold(seen, "#finding-1 h3")
    assert "STEP_STRAGGLER_RANK" in seen.page.locator("#finding-1 h3").inner_text()
    # one stacked bar segment per rank and stage with time
    bars = seen.page.locator("#stage-bars .bars .point").count()
    assert bars >= len(rep.ranks) * 3
    screenshot(seen, shots, "steps-cpu-gloo-slow-data-rank2")
    seen.page.close()


def test_postmortem_with_its_own_bandwidth_and_first_failure_in_chromium(
    browser: Any, shots: Path, tmp_path: Path
) -> None:
    """The real IB report with the real nccl-tests curves as its own ``bandwidth`` (as bundles would give them)
    and a GPU detail on its first cause: three charts, no console error, the first failure labelled."""
    rep = load_postmortem(POSTMORTEMS[1])
    bw = [BandwidthCurve(source=f"bundle epilog/{c.nodes[0]}/all_reduce_perf.txt", curve=c) for c in nccl_curves()]
    c = rep.causes[0]
    gpu = GpuRef(source=GpuSource.NCCL_PREFIX, rank=c.rank, index=0)
    rep = rep.model_copy(
        update={"bandwidth": bw, "findings": [c.model_copy(update={"details": gpu_details(gpu)}), *rep.causes[1:]]}
    )
    out = tmp_path / "bandwidth.html"
    write_html(out, render_postmortem(rep))
    seen = open_report(browser, out, charts=3)  # timeline, heat map, curves
    check_clean(seen, out)
    above_the_fold(seen, "#cause-1 h3")
    assert "from the NCCL line's [device]" in seen.page.locator("#cause-1 h3").inner_text()
    assert seen.page.locator("#timeline-chart .annotation-text").first.text_content() == "first failure"
    assert seen.page.locator("#bandwidth ul.sources li").count() == len(bw)
    screenshot(seen, shots, "postmortem-bandwidth-first-failure")
    seen.page.close()


def test_timeline_ticks_of_positions_are_whole_numbers_in_chromium(browser: Any, tmp_path: Path) -> None:
    """Issue 21, item 15: the glog timeline (x = position 1..4) read ``0 1 1 2 2 ...`` under its ticks."""
    out = tmp_path / "timeline.html"
    write_html(out, render_postmortem(load_postmortem(POSTMORTEMS[0])))
    seen = open_report(browser, out, charts=1)
    check_clean(seen, out)
    ticks = [t.strip() for t in seen.page.locator("#timeline-chart .xtick text").all_text_contents()]
    assert ticks and all(t.isdigit() for t in ticks), ticks
    assert len(ticks) == len(set(ticks)) and [int(t) for t in ticks] == sorted(int(t) for t in ticks), ticks
    seen.page.close()


def test_steps_charts_are_above_the_fold_and_the_evidence_collapsed_in_chromium(
    browser: Any, shots: Path, tmp_path: Path
) -> None:
    """Issue 21, item 15: the straggler's open key/value dump pushed the charts below the first screen."""
    loaded = load_ranks([STEP_TRACES])
    out = tmp_path / "steps.html"
    write_html(out, render_steps(analyse(loaded), ranks=loaded.ranks, sources=[str(STEP_TRACES)]))
    seen = open_report(browser, out, charts=2)
    check_clean(seen, out)
    above_the_fold(seen, "#finding-1 h3")
    above_the_fold(seen, "#stage-bars")
    assert not seen.page.locator("#evidence-1 table").is_visible()
    seen.page.locator("#finding-1 a[href='#evidence-1']").click()
    seen.page.locator("#evidence-1 summary").click()
    assert seen.page.locator("#evidence-1 table").is_visible()
    assert "60.29 ms" in seen.page.locator("#evidence-1 table").inner_text()
    screenshot(seen, shots, "steps-evidence-opened")
    seen.page.close()
