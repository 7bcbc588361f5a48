"""The HTML reports without a browser: what the pages carry, escaping of hostile text, bounded size, the
charts' data, writing the file, and the templates in a built wheel. tests/test_htmlreport_browser.py renders
the same pages in headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from markupsafe import escape

from fleetdx.orchestrator.htmlreport import Limits, render_postmortem, render_steps, write_html
from fleetdx.orchestrator.htmlreport.charts import integer_dtick
from fleetdx.orchestrator.htmlreport.page import CSP, fmt_hosts, plotly_js
from fleetdx.orchestrator.htmlreport.postmortem import bandwidth_figures, timeline_figure
from fleetdx.orchestrator.htmlreport.steps import readable, straggler_ranks
from fleetdx.orchestrator.judgement import EvidenceLine, Finding, FindingCode
from fleetdx.orchestrator.postmortem.bandwidth import run_curve
from fleetdx.orchestrator.postmortem.contracts import BandwidthCurve, GpuRef, TimelineEntry, gpu_details
from fleetdx.orchestrator.report import BusbwCurve
from fleetdx.orchestrator.steps.contracts import RankSummary, StepSample, StepsReport, StepTimeMs
from fleetdx.orchestrator.steps.run import analyse, load_ranks
from fleetdx.probes.contracts import Job, SchedulerKind, Severity, Verdict
from fleetdx.probes.errors import ConfigError
from fleetdx.probes.parsers.joblog import GpuSource
from fleetdx.probes.parsers.nccl_tests import parse_nccl_tests
from fleetdx.topology.binding import cpu_list as fmt_ranks
from tests.htmlreport_samples import (
    HOSTILE,
    NCCL_CURVES,
    PM_IB,
    PM_TIMEOUT,
    PM_XID,
    POSTMORTEMS,
    STEP_TRACES,
    history_for,
    hostile_postmortem,
    load_postmortem,
    nccl_curves,
    synthetic_huge_postmortem,
)

REPO = Path(__file__).resolve().parent.parent


def figures(page: str) -> dict[str, dict]:  # type: ignore[type-arg]
    """The page's plotly figures by element id, as the page's script will read them."""
    blocks = re.findall(r'<script type="application/json" data-figure="([^"]+)">(.*?)</script>', page, re.S)
    return {fid: json.loads(body) for fid, body in blocks}


def body(page: str) -> str:
    """The page without its inlined plotly.js (whose code is not the report's content)."""
    return page.replace(str(plotly_js()), "")


@pytest.mark.parametrize("path", POSTMORTEMS, ids=lambda p: p.name[11:13])
def test_postmortem_page_has_the_causes_evidence_and_timeline(path: Path) -> None:
    rep = load_postmortem(path)
    page = render_postmortem(rep)
    assert page.startswith("<!DOCTYPE html>")
    first = rep.causes[0]
    # the first cause is the first card, with its code, its message and every evidence line (file, line, text)
    first_card = page.index('id="cause-1"')
    assert page.index(first.code.value, first_card) < page.index('id="timeline"')
    assert first.message.replace("'", "&#39;") in page or first.message in page
    for ev in first.evidence:
        assert f'<td class="num">{ev.line}</td>' in page
    assert len(re.findall(r'<article class="card cause', page)) == len(rep.causes)
    figs = figures(page)
    assert set(figs) == {"timeline-chart"}
    points = sum(len(t["x"]) for t in figs["timeline-chart"]["data"])
    assert points == len(rep.timeline)
    assert f"Timeline: {len(rep.timeline)} event(s)" in page


def test_timeline_x_is_utc_time_only_when_every_event_has_a_full_date() -> None:
    ib = load_postmortem(PM_IB)  # ISO collector stamps on every event
    fig = timeline_figure(ib.timeline, Limits())
    assert fig is not None
    data = json.loads(str(fig.json))
    assert data["layout"]["xaxis"]["type"] == "date"
    xs = sorted(x for t in data["data"] for x in t["x"])
    assert xs[0] == "2019-06-02 16:13:44.884000"  # the first event's 2019-06-02T16:13:44.884Z, as UTC
    # host · rank rows: rank 12, 13 and 14 on one host
    rows = {y for t in data["data"] for y in t["y"]}
    assert {r.rsplit(" ", 1)[-1] for r in rows} == {"12", "13", "14"}

    glog = load_postmortem(PM_TIMEOUT)  # glog stamps (E321 02:07:08.408271257): no year
    fig = timeline_figure(glog.timeline, Limits())
    assert fig is not None
    data = json.loads(str(fig.json))
    assert data["layout"]["xaxis"]["type"] == "linear"
    assert sorted(x for t in data["data"] for x in t["x"]) == [1, 2, 3, 4]
    assert any("position on the merged timeline" in n for n in fig.notes)


def test_hostile_text_is_escaped_everywhere() -> None:
    rep = hostile_postmortem()
    rep = rep.model_copy(update={"history": [history_for(rep.causes[0].host or "", HOSTILE)]})
    page = render_postmortem(rep, curves=nccl_curves(), sources=[HOSTILE])
    content = body(page)
    assert "<script>window.__pwned" not in content
    assert "<img src=x" not in content
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in content
    # every <script> the page opens is one of its own: plotly.js, the drawing script, the figures' JSON
    assert content.count("<script") == content.count("</script>") == 2 + len(figures(page))
    # the timeline chart's labels and rows are escaped for plotly too (it reads a subset of HTML in them)
    fig = figures(page)["timeline-chart"]
    labels = " ".join(lbl for t in fig["data"] for lbl in t["hovertext"])
    assert "<script>" not in labels and "&lt;script&gt;" in labels
    assert all("<img" not in y for t in fig["data"] for y in t["y"])
    # the CSP forbids every network load
    assert f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">' in page
    assert "default-src 'none'" in CSP and "http" not in CSP
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", content)


def test_huge_names_are_cut() -> None:
    """Every text of a real report made 1 MB long (synthetic): the page stays small and says what it cut."""
    mb = "n" * 1_000_000
    rep = load_postmortem(PM_IB)
    c = rep.causes[0]
    cause = c.model_copy(
        update={
            "host": mb,
            "gpu": mb,
            "time": mb,
            "nodes": [mb],
            "message": mb,
            "action": mb,
            "evidence": [EvidenceLine(file=mb, line=1, text=mb)],
        }
    )
    timeline = [TimelineEntry(time=mb, host=mb, rank=1, kind=mb, text=mb)]
    job = Job(scheduler=SchedulerKind.SLURM, job_id=mb, name=mb, user=mb, nodes=[mb], state=mb)
    big = rep.model_copy(update={"findings": [cause], "timeline": timeline, "job": job, "missing_evidence": [mb]})
    page = render_postmortem(big.model_copy(update={"history": [history_for(mb, mb)]}), sources=[mb])
    extra = len(body(page))
    assert extra < 200_000, extra
    assert "(+999800 chars)" in page and f"({1_000_000 - Limits().text_chars} more characters left out)" in page


def test_steps_page_hostile_text_is_escaped() -> None:
    f = Finding(
        code=FindingCode.STEP_STRAGGLER_RANK,
        severity=Severity.WARNING,
        nodes=["h" + HOSTILE],
        subject="rank 1 " + HOSTILE,
        message="slow " + HOSTILE,
        details={"rank": 1, "stage": HOSTILE, HOSTILE: "key"},
    )
    r = RankSummary(
        rank=1,
        host="host" + HOSTILE,
        steps=2,
        step_time_ms=StepTimeMs(median=10.0, p95=11.0),
        stages_ms={"data": 1.0, "custom" + HOSTILE: 2.0},
        temporal_breakdown_pct=None,
        comm_exposed_pct=None,
    )
    job = Job(scheduler=SchedulerKind.NONE, job_id=HOSTILE)
    rep = StepsReport(verdict=Verdict.WARNING, exit_code=1, ranks=[r], findings=[f], job=job)
    page = render_steps(rep, errors=["bad " + HOSTILE])
    content = body(page)
    assert "<script>window.__pwned" not in content and "<img src=x" not in content
    assert content.count("&lt;script&gt;window.__pwned=1&lt;/script&gt;") >= 6
    bars = figures(page)["stage-bars"]
    assert all("<script" not in t["name"] for t in bars["data"])


def test_huge_postmortem_is_bounded_and_says_what_was_left_out() -> None:
    rep = synthetic_huge_postmortem()  # 200,000 events, 1,024 ranks, 300 causes, 50,000 x 12 kB evidence lines
    lim = Limits()
    page = render_postmortem(rep)
    extra = len(page.encode()) - len(str(plotly_js()).encode())
    assert extra < 4_000_000, extra  # the input is over 600 MB of text
    assert f"{300 - lim.causes} less likely causes left out" in page
    assert f"{50_000 - lim.evidence} more evidence lines left out" in page
    assert f"{200_000 - lim.timeline_rows} later events left out of the table" in page
    assert "more characters left out" in page
    fig = figures(page)["timeline-chart"]
    assert sum(len(t["x"]) for t in fig["data"]) <= lim.timeline_points
    rows = {y for t in fig["data"] for y in t["y"]}
    assert len(rows) <= lim.chart_rows
    assert all(y.startswith("synthetic-gpu") and "rank" not in y for y in rows)  # one row per host
    assert f"{200_000 - lim.timeline_points} later events are not drawn" in page


def test_huge_steps_report_is_bounded() -> None:
    """A synthetic 1,024-rank x 200-step analysis (made-up figures): bars and table cut at Limits.ranks, the
    series drawn as median and slowest rank plus the straggler."""
    from fleetdx.orchestrator.steps.contracts import RankSteps

    ranks = [
        RankSummary(
            rank=i,
            host=f"synthetic-gpu{i // 8:03d}",
            steps=200,
            step_time_ms=StepTimeMs(median=100.0 + (i == 777) * 50, p95=110.0),
            stages_ms={"data": 1.0 + (i == 777) * 50, "forward": 30.0, "backward": 60.0, "grad_sync": 9.0},
            temporal_breakdown_pct=None,
            comm_exposed_pct=10.0,
        )
        for i in range(1024)
    ]
    per_rank = [
        RankSteps(
            rank=i,
            source=f"synthetic-{i}.jsonl",
            input="steptimer",
            timing="wall",
            steps=[StepSample(step=s, step_ms=100.0 + (i == 777) * 50, stages_ms={}) for s in range(200)],
        )
        for i in range(1024)
    ]
    strag = Finding(
        code=FindingCode.STEP_STRAGGLER_RANK,
        severity=Severity.WARNING,
        nodes=["synthetic-gpu097"],
        subject="rank 777",
        message="rank 777 is a straggler in its data stage (synthetic)",
        details={"rank": 777, "stage": "data"},
    )
    rep = StepsReport(verdict=Verdict.WARNING, exit_code=1, ranks=ranks, findings=[strag])
    page = render_steps(rep, ranks=per_rank)
    lim = Limits()
    extra = len(page.encode()) - len(str(plotly_js()).encode())
    assert extra < 1_500_000, extra
    figs = figures(page)
    cats = figs["stage-bars"]["data"][0]["x"]
    assert len(cats) == lim.ranks and "rank 777 ⚑" in cats  # the straggler is kept among the ranks shown
    names = [t["name"] for t in figs["step-series"]["data"]]
    assert names == ["median of all ranks", "slowest rank at each step", "rank 777 (straggler)"]
    assert f"{1024 - lim.ranks} ranks left out" in page


def test_steps_page_from_real_traces() -> None:
    loaded = load_ranks([STEP_TRACES])
    rep = analyse(loaded)
    flagged = straggler_ranks(rep.findings)
    assert flagged  # the fixture's rank 2 sleeps in its data loader (see its README)
    page = render_steps(rep, ranks=loaded.ranks, sources=[str(STEP_TRACES)])
    figs = figures(page)
    assert set(figs) == {"stage-bars", "step-series"}
    bars = figs["stage-bars"]
    assert [t["name"] for t in bars["data"]][:2] == ["data", "forward"]
    assert bars["data"][0]["x"] == [f"rank {r.rank}" + (" ⚑" if r.rank in flagged else "") for r in rep.ranks]
    # each bar segment is the rank's median stage time of the report
    data_ms = {r.rank: r.stages_ms["data"] for r in rep.ranks}
    assert bars["data"][0]["y"] == [data_ms[r.rank] for r in rep.ranks]
    series = figs["step-series"]["data"]
    assert len(series) == len(loaded.ranks)
    assert f"rank {flagged[0]} (straggler)" in [t["name"] for t in series]
    assert "the straggler&#39;s evidence" in page
    assert page.index('id="finding-1"') < page.index('id="stage-bars"')


def test_steps_page_against_a_baseline() -> None:
    """The slow-data run against the clean run of the same training (both real, tests/fixtures/traces)."""
    clean = STEP_TRACES.parent / "cpu-gloo-clean"
    rep = analyse(load_ranks([STEP_TRACES]), load_ranks([clean]), str(clean))
    assert rep.baseline is not None
    page = render_steps(rep)
    section = page[page.index('id="baseline"') :]
    assert str(clean) in section
    b = rep.baseline
    assert (
        f'<td>step</td><td class="num">{b.step.baseline_ms:.2f}</td><td class="num">{b.step.current_ms:.2f}</td>'
        in (section)
    )
    shown = [c.stage for c in b.stages if c.baseline_ms or c.current_ms]
    assert all(f"<td>{stage}</td>" in section for stage in shown)
    assert "The per-step times were not given" in page  # no ranks passed: no series, said so


def test_bandwidth_heat_map_and_curves_from_real_nccl_tests_captures() -> None:
    figs = bandwidth_figures(nccl_curves(), Limits())
    assert [f.id for f in figs] == ["heatmap-0", "curves"]
    heat = json.loads(str(figs[0].json))["data"][0]
    hosts = heat["x"]
    assert hosts == sorted(h for _, pair, _, _ in NCCL_CURVES for h in pair)
    for _, (a, b), _size, busbw in NCCL_CURVES:
        i, j = hosts.index(a), hosts.index(b)
        assert heat["z"][i][j] == heat["z"][j][i] == busbw
    assert heat["z"][hosts.index("test1")][hosts.index("nid005471")] is None  # never measured together
    curves = json.loads(str(figs[1].json))["data"]
    assert [(t["x"][-1], t["y"][-1]) for t in curves] == [(float(s), b) for _, _, s, b in NCCL_CURVES]
    assert all(t["x"] == sorted(t["x"]) for t in curves)


def test_postmortem_page_with_history_and_bandwidth() -> None:
    rep = load_postmortem(PM_IB)
    host = rep.causes[0].host
    assert host is not None
    rep = rep.model_copy(update={"history": [history_for(host), history_for("other-node")]})
    page = render_postmortem(rep, curves=nccl_curves())
    assert set(figures(page)) == {"timeline-chart", "heatmap-0", "curves"}
    section = page[page.index('id="history"') : page.index('id="bandwidth"')]
    assert section.index(host) < section.index("other-node")  # in the report's order: the cause's host first
    assert "GPU_CLOCKS_THROTTLED" in section and "2019-05-27 23:33:20 UTC" in section


def test_no_cause_says_unknown_and_the_missing_evidence() -> None:
    rep = load_postmortem(PM_XID).model_copy(
        update={
            "findings": [],
            "verdict": Verdict.UNKNOWN,
            "exit_code": 3,
            "missing_evidence": ["no job log was given"],
        }
    )
    page = render_postmortem(rep)
    assert 'id="cause-none"' in page and "no cause found" in page and "no job log was given" in page
    assert ">UNKNOWN (exit 3)<" in page


def test_fmt_ranks() -> None:
    assert fmt_ranks([7, 0, 1, 2, 3, 9, 10]) == "0-3,7,9-10"
    assert fmt_ranks([]) == ""


def test_write_html(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    write_html(out, "<!DOCTYPE html>é")
    assert out.read_text(encoding="utf-8") == "<!DOCTYPE html>é"
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temporary file left
    with pytest.raises(ConfigError, match="cannot write"):
        write_html(tmp_path / "no" / "such" / "r.html", "x")
    with pytest.raises(ConfigError, match="is a folder"):
        write_html(tmp_path, "x")


@pytest.mark.slow
def test_templates_ship_in_the_wheel(tmp_path: Path) -> None:
    """A wheel built from this tree (copied: the build writes beside the sources) carries the templates."""
    import shutil

    src = tmp_path / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("fleetdx", "probes", "topology", "orchestrator"):
        shutil.copytree(REPO / name, src / name, symlinks=True, ignore=ignore)
    dist = tmp_path / "dist"
    code = "import sys; from setuptools import build_meta as b; print(b.build_wheel(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(dist)], cwd=src, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    wheel = dist / done.stdout.strip().splitlines()[-1]
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {p.name for p in (REPO / "orchestrator" / "htmlreport" / "templates").glob("*.j2")}
    assert templates == {
        "base.html.j2",
        "macros.html.j2",
        "postmortem.html.j2",
        "steps.html.j2",
        "fleet.html.j2",  # the service's pages (GET /, /nodes/{host}, /jobs/{job_id}; fleetdx report --job)
        "node.html.j2",
        "job.html.j2",
    }
    for t in templates:
        assert f"fleetdx/orchestrator/htmlreport/templates/{t}" in names


def test_first_failure_is_ringed_on_the_timeline_and_marked_in_the_table() -> None:
    rep = load_postmortem(PM_IB)  # the real IB report: its first cause rests on "... Got async event ..."
    first = rep.causes[0]
    page = render_postmortem(rep)
    fig = figures(page)["timeline-chart"]
    ringed = [
        (t["name"], t["hovertext"][i])
        for t in fig["data"]
        if isinstance(t["marker"]["size"], list)
        for i, size in enumerate(t["marker"]["size"])
        if size == 16
    ]
    assert len(ringed) == 1 and "local catastrophic error" in ringed[0][1]
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["first failure"]
    row = page[page.index('class="first-failure"') :]
    row = row[: row.index("</tr>")]
    assert str(escape(first.evidence[0].text.split("\n")[0][:80])) in row
    assert page.count('class="first-failure"') == 1
    # a report whose first cause rests on no timeline event rings nothing
    other = rep.model_copy(update={"findings": [first.model_copy(update={"evidence": []})]})
    fig2 = figures(render_postmortem(other))["timeline-chart"]
    assert "annotations" not in fig2["layout"] and all(t["marker"]["size"] == 9 for t in fig2["data"])


def test_the_report_s_own_bandwidth_is_drawn_with_its_sources() -> None:
    rep = load_postmortem(PM_IB)
    bw = [
        BandwidthCurve(
            source=f"bundle /epilog/4711/{c.nodes[0]}/all_reduce_perf.txt", started_at=1_559_000_000.0, curve=c
        )
        for c in nccl_curves()
    ]
    page = render_postmortem(rep.model_copy(update={"bandwidth": bw}))
    figs = figures(page)
    assert set(figs) == {"timeline-chart", "heatmap-0", "curves"}
    labels = [t["hovertext"][-1] for t in figs["curves"]["data"]]
    assert all(
        f"bundle /epilog/4711/{c.nodes[0]}/all_reduce_perf.txt" in lbl
        for c, lbl in zip(nccl_curves(), labels, strict=True)
    )
    section = page[page.index('id="bandwidth"') :]
    assert "read from:" in section and "2019-05-27 23:33:20 UTC" in section
    # curves given by the caller win over the report's (the pre-flight report's use)
    assert '<ul class="sources">' not in render_postmortem(
        rep.model_copy(update={"bandwidth": bw}), curves=nccl_curves()
    )


def test_the_gpu_detail_is_shown_with_its_source() -> None:
    rep = load_postmortem(PM_IB)
    c = rep.causes[0]
    gpu = GpuRef(source=GpuSource.NCCL_INIT, rank=12, index=0, physical_index=4, bus_id="0000:4c:00.0")
    page = render_postmortem(rep.model_copy(update={"findings": [c.model_copy(update={"details": gpu_details(gpu)})]}))
    card = page[page.index('id="cause-1"') : page.index("</h3>", page.index('id="cause-1"'))]
    assert "cuda:0 (physical GPU 4, bus 0000:4c:00.0), from NCCL&#39;s init line" in card


# issue 21, item 15


def test_a_timeline_of_positions_has_ticks_on_whole_numbers_only() -> None:
    """x is the position on the merged timeline (1..4 here): plotly's own 0.5 spacing printed ``0 1 1 2 2``
    under the integer format."""
    fig = timeline_figure(load_postmortem(PM_TIMEOUT).timeline, Limits())
    assert fig is not None
    xaxis = json.loads(str(fig.json))["layout"]["xaxis"]
    assert xaxis["tickformat"] == "d" and xaxis["tick0"] == 0 and xaxis["dtick"] == 1
    assert [integer_dtick(0, n) for n in (4, 10, 11, 25, 99, 180, 5000)] == [1, 1, 2, 5, 10, 20, 500]


def _single_gpu_curve() -> BusbwCurve:
    """The real one-GPU all_reduce of tests/fixtures/bundles/h100-idle (nGpus 1: busbw 0.00 on every row)."""
    text = (REPO / "tests/fixtures/bundles/h100-idle/all_reduce_perf_-b8_-e512M_-f2_-g1.txt").read_text()
    curve = run_curve(parse_nccl_tests(text).runs[0], "h100-vm-idle")
    assert curve is not None and curve.nranks == 1 and {p.busbw_gbps for p in curve.points} == {0.0}
    return curve


def test_single_gpu_curves_are_left_out_with_a_note() -> None:
    pair = nccl_curves()[0]
    figs = bandwidth_figures([_single_gpu_curve(), pair], Limits())
    curves = next(f for f in figs if f.id == "curves")
    drawn = json.loads(str(curves.json))["data"]
    assert [t["name"] for t in drawn] == [f"all_reduce {fmt_hosts(pair.nodes)} (nccl-tests, {pair.nranks} ranks)"]
    assert any("1 single-GPU curve(s) left out (h100-vm-idle)" in n and "0 by definition" in n for n in curves.notes)
    # only single-GPU curves: no chart, the note alone, and the page says it
    alone = bandwidth_figures([_single_gpu_curve()], Limits())
    assert [(f.id, str(f.json)) for f in alone] == [("curves-none", "")]
    page = render_postmortem(load_postmortem(PM_IB), curves=[_single_gpu_curve()])
    assert "single-GPU curve(s) left out" in page and 'data-figure="curves-none"' not in page


def test_curves_of_hosts_outside_the_job_are_dotted_and_named() -> None:
    pair = nccl_curves()[0]  # nid005471 and nid005487
    inside, outside = pair.nodes
    figs = {f.id: f for f in bandwidth_figures([pair], Limits(), job_hosts=[inside])}
    line = json.loads(str(figs["curves"].json))["data"][0]
    assert line["line"]["dash"] == "dot" and f"{outside} outside the job" in line["name"]
    assert any("dotted" in n and outside in n for n in figs["curves"].notes)
    heat = json.loads(str(figs["heatmap-0"].json))["data"][0]
    assert heat["x"] == [inside, f"{outside} *"]
    assert any("outside the job" in n for n in figs["heatmap-0"].notes)
    # every host in the job (or no job known): nothing is marked
    for hosts in ([inside, outside], []):
        figs = {f.id: f for f in bandwidth_figures([pair], Limits(), job_hosts=hosts)}
        assert "dash" not in json.loads(str(figs["curves"].json))["data"][0]["line"]
        assert figs["curves"].notes == [] and figs["heatmap-0"].notes == []


def test_steps_page_charts_come_before_the_collapsed_readable_evidence() -> None:
    """The straggler's evidence was a raw key/value dump (``peers_median_ms 0.018``), open, above the charts."""
    loaded = load_ranks([STEP_TRACES])
    rep = analyse(loaded)
    page = render_steps(rep, ranks=loaded.ranks)
    card = page.index('id="finding-1"')
    bars, series, evidence = (page.index(f'id="{x}"') for x in ("stage-bars", "step-series", "evidence-1"))
    assert card < bars < series < evidence
    assert 'href="#evidence-1">the straggler&#39;s evidence</a>' in page[card:bars]
    assert "<details" not in page[:bars] and not re.search(r"<details[^>]* open", page)
    table = page[evidence : page.index("</table>", evidence)]
    assert "<th>this rank, median per step</th><td>60.29 ms</td>" in table
    assert "<th>its peers, median per step</th><td>0.018 ms</td>" in table
    assert "<th>excess per step</th><td>+60.27 ms</td>" in table and "peers_median_ms" not in table
    assert table.index("slow stage") < table.index("this rank, median per step") < table.index("read from")


def test_readable_evidence_values() -> None:
    assert readable("stage_ms", 60.287) == ("this rank, median per step", "60.29 ms")
    assert readable("excess_ms", 0.5) == ("excess per step", "+0.5 ms")
    assert readable("gpu_idle_pct", 69.0) == ("gpu idle", "69.00 %")
    assert readable("cpu_op_median_us", 12) == ("cpu op median", "12 µs")
    assert readable("ranks", [1, 2]) == ("ranks", "1, 2")
    assert readable("spike_steps", {"1": "4,9"}) == ("spike steps", "1: 4,9")
    assert readable("peers_wait_stage", None) == ("where the peers wait for it", "-")


def test_steps_page_says_when_job_medians_hide_a_one_rank_change() -> None:
    clean = STEP_TRACES.parent / "cpu-gloo-clean"
    rep = analyse(load_ranks([STEP_TRACES]), load_ranks([clean]), str(clean))
    page = render_steps(rep)
    section = page[page.index('id="baseline"') :]
    assert "goodput (steps per second, from the job's median step)" in section
    note = section[section.index('id="hidden-by-medians"') : section.index("</p>", section.index("hidden-by-med"))]
    assert "rank 2's data 0.02 → 60.29 ms" in note
    first = section[section.index('<table class="rank-changes">') :]
    first = first[first.index("<tr", first.index("<tbody>")) : first.index("</tr>", first.index("<tbody>"))]
    assert 'class="flag"' in first and "<td>data</td>" in first and "(×3,349)" in first
