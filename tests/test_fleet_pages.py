"""The service's HTML pages (``GET /``, ``/nodes/{host}``, ``/jobs/{job_id}``, ``/postmortems/{id}``) and
``fleetdx report --job``: a pushed report's node is on the fleet page with a link to its page; a job page
joins the job's pre-flights, bandwidth runs and postmortem with its nodes' states; the CLI writes the same
page; nothing is loaded from another origin; pages follow the API's read rules; a fleet of 5,000 nodes makes
a page of bounded size (its size and render time are printed: ``pytest -s``)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import typer
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import report_cmd
from fleetdx.orchestrator.diagnosis.node_states import DrainEvent
from fleetdx.orchestrator.htmlreport.fleet import render_fleet
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.postmortem.history import save as save_postmortem
from fleetdx.orchestrator.report import RunKind, RunReport, assemble_report
from fleetdx.orchestrator.service.api import create_app
from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store import states as node_states
from fleetdx.orchestrator.store.tokens import TokenScope, create_token
from fleetdx.probes.contracts import Job, Level, SchedulerKind, Severity
from tests.htmlreport_samples import PM_XID, load_postmortem
from tests.store_samples import bandwidth_raw, bandwidth_run, preflight_raw, preflight_run

#: ``store``: a fresh migrated store per test, on SQLite and on PostgreSQL when $FLEETDX_TEST_PG_URL names one
pytest_plugins = ["tests.pgfixtures"]

T0 = 1_763_800_000.0
JOB = Job(
    scheduler=SchedulerKind.SLURM,
    job_id="4711",
    name="llm-pretrain",
    state="FAILED",
    nodes=["h100-vm-idle", "nid005471", "nid005487"],
)
#: an attribute that loads or links something: its value must stay on the page's own origin
_URL_ATTR = re.compile(r"""\b(?:src|href|action)\s*=\s*["']?([^"'\s>]*)""", re.IGNORECASE)


def foreign_urls(page: str) -> list[str]:
    """Every ``src``/``href``/``action`` value of ``page`` that names a scheme or another host (``http:``,
    ``https:``, ``//host``...); relative paths and fragments are the page's own origin."""
    return [u for u in _URL_ATTR.findall(page) if re.match(r"^(?:[a-z][a-z0-9+.-]*:|//)", u, re.IGNORECASE)]


def _with_job(report: RunReport) -> RunReport:
    return report.model_copy(update={"job": JOB})


def fill(store: Store) -> None:
    """A job's pre-flight and bandwidth run, a postmortem of it, a quarantined node, another job's run."""
    store.save_report(
        bandwidth_run("bw-1", T0 + 100, degraded=True).model_copy(update={"job": JOB}), bandwidth_raw(True)
    )
    critical = Finding(
        code=FindingCode.GPU_XID,
        severity=Severity.CRITICAL,
        nodes=["gpu07"],
        subject="GPU3",
        message="XID 79: GPU has fallen off the bus",
    )
    other = Job(scheduler=SchedulerKind.SLURM, job_id="4712", nodes=["gpu07", "gpu08"])
    run = assemble_report(
        RunKind.PREFLIGHT, ["gpu07", "gpu08"], [critical], started_at=T0 + 200, level=Level.QUICK, run_id="pf-9"
    )
    store.save_report(run.model_copy(update={"job": other, "finished_at": T0 + 203.0}))
    node_states.record(store, "gpu07", DrainEvent(at=T0 + 210, reason="XID 79 GPU3 (run pf-9)", run_id="pf-9"))
    save_postmortem(load_postmortem(PM_XID).model_copy(update={"job": JOB}), store)


def test_pushed_report_is_on_the_fleet_page_with_its_node_and_job_pages(store: Store) -> None:
    token = create_token(store, "prolog", TokenScope.WRITE).token
    client = TestClient(create_app(store))
    pushed = {"report": _with_job(preflight_run("pf-1", T0)).model_dump(mode="json"), "raw": preflight_raw()}
    r = client.post("/reports", json=pushed, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 201
    fleet = client.get("/")
    assert fleet.status_code == 200 and fleet.headers["content-type"].startswith("text/html")
    page = fleet.text
    assert 'href="nodes/h100-vm-idle"' in page and 'href="jobs/4711"' in page
    assert "<b>1</b> node(s)" in page and 'id="state-ok"' in page
    assert foreign_urls(page) == []
    node = client.get("/nodes/h100-vm-idle")
    assert node.status_code == 200
    assert "pf-1" in node.text and "TOPO_AFFINITY_MISSING" in node.text and 'id="fig-node-timeline"' in node.text
    assert foreign_urls(node.text) == []
    job = client.get("/jobs/4711")
    assert job.status_code == 200 and 'id="verdict">WARNING' in job.text and "h100-vm-idle" in job.text
    assert foreign_urls(job.text) == []


def test_the_fleet_page_groups_nodes_by_state_and_says_why_one_is_quarantined(store: Store) -> None:
    fill(store)
    page = TestClient(create_app(store)).get("/").text
    assert 'id="state-quarantined"' in page and 'id="state-ok"' in page
    quarantined = page.split('id="state-quarantined"')[1].split('id="state-')[0]
    assert 'href="nodes/gpu07"' in quarantined and "gpu08" not in quarantined
    held = page.split('id="held"')[1].split("</section>")[0]
    assert "gpu07" in held and "XID 79 GPU3 (run pf-9)" in held and "fleetdx" in held
    findings = page.split('id="findings"')[1].split("</section>")[0]
    assert "GPU_XID" in findings and "NCCL_BUSBW_LOW" in findings
    jobs = page.split('id="jobs"')[1].split("</section>")[0]
    assert 'href="jobs/4711"' in jobs and 'href="jobs/4712"' in jobs
    assert "Live watch" in jobs and "No job pushed a live state" in jobs  # labelled, not an empty table
    assert "Plotly.newPlot" in page and '<script src="static/plotly.min.js">' in page


def test_a_job_page_joins_runs_postmortem_and_node_states(store: Store) -> None:
    fill(store)
    store.save_report(_with_job(preflight_run("pf-1", T0)), preflight_raw())
    client = TestClient(create_app(store))
    page = client.get("/jobs/4711").text
    assert 'id="verdict">CRITICAL (exit 2)' in page
    assert "name <b>llm-pretrain</b>" in page and "state <b>FAILED</b>" in page
    for text in (
        "pf-1",
        "bw-1",
        "NCCL_BUSBW_LOW",
        "TOPO_AFFINITY_MISSING",
        "nid005471",
        "No live state pushed for this job",
        "No stored step analysis of this job",
    ):
        assert text in page, text
    links = re.findall(r'href="\.\./postmortems/([0-9a-f]+)"', page)
    assert len(links) == 1
    postmortem = client.get(f"/postmortems/{links[0]}")
    assert postmortem.status_code == 200 and "GPU_HW_FAULT" in postmortem.text
    assert foreign_urls(postmortem.text) == [] and '<script src="../static/plotly.min.js">' in postmortem.text
    assert 'data-figure="' in page  # the bandwidth run's busbw curve is drawn
    assert client.get("/jobs/nope").status_code == 404
    assert client.get("/nodes/nope").status_code == 404
    assert client.get("/postmortems/0123abcd").status_code == 404


def test_pages_follow_the_read_rules(store: Store) -> None:
    fill(store)
    read = create_token(store, "dashboard", TokenScope.READ).token
    client = TestClient(create_app(store, auth_reads=True))
    for path in ("/", "/nodes/gpu07", "/jobs/4711"):
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"Authorization": f"Bearer {read}"}).status_code == 200, path
    js = client.get("/static/plotly.min.js")  # the public library: no token
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert "plotly.js" in js.text[:2000].lower() and js.headers["cache-control"].startswith("public")
    again = client.get("/static/plotly.min.js", headers={"If-None-Match": js.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert "/" not in client.get("/openapi.json").json()["paths"]  # pages are for people, not API operations


def _cli() -> typer.Typer:
    app = typer.Typer()
    report_cmd.register(app)
    return app


def test_report_job_cli_writes_the_service_page_and_exits_with_the_worst_verdict(store: Store, tmp_path: Path) -> None:
    fill(store)
    out = tmp_path / "job-4711.html"
    res = CliRunner().invoke(_cli(), ["--job", "4711", "--db", store.url, "--html", str(out)])
    assert res.exit_code == 2, res.output
    assert "job 4711: CRITICAL" in res.output and "bw-1" in res.output and "postmortem" in res.output
    page = out.read_text()
    assert "NCCL_BUSBW_LOW" in page and "nid005471" in page and "Plotly.newPlot" in page
    # a file: plotly.js inlined (its own code holds plotly.com URLs, never loaded: the CSP refuses every load),
    # no script from anywhere, no link to the service's pages
    html = re.sub(r"<script>.*?</script>", "", page, flags=re.DOTALL)
    assert foreign_urls(html) == [] and "<script src" not in page and 'href="../' not in page
    assert "default-src &#39;none&#39;" in page  # the CSP meta (autoescaped)
    as_json = CliRunner().invoke(_cli(), ["--job", "4711", "--db", store.url, "--json"])
    doc = json.loads(as_json.output)
    assert as_json.exit_code == 2 and doc["verdict"] == "CRITICAL" and doc["job_id"] == "4711"
    assert [r["run_id"] for r in doc["runs"]] == ["bw-1"] and len(doc["postmortems"]) == 1
    assert {n["host"] for n in doc["nodes"]} >= {"nid005471", "nid005487"}


def test_report_job_cli_warning_and_unknown_job(store: Store) -> None:
    store.save_report(_with_job(preflight_run("pf-1", T0)), preflight_raw())
    ok = CliRunner().invoke(_cli(), ["--job", "4711", "--db", store.url])
    assert ok.exit_code == 1 and "job 4711: WARNING" in ok.output
    unknown = CliRunner().invoke(_cli(), ["--job", "9999", "--db", store.url])
    assert unknown.exit_code == 3
    assert unknown.output.strip().splitlines() == ["error: no stored run, postmortem or step analysis names job '9999'"]


def test_a_fleet_of_5000_nodes_is_one_bounded_page(store: Store) -> None:
    hosts = [f"gpu{i:05d}" for i in range(5000)]
    findings = [
        Finding(code=FindingCode.GPU_XID, severity=Severity.CRITICAL, nodes=[h], subject="GPU0", message="XID 79")
        for h in hosts[::50]
    ]
    run = assemble_report(RunKind.PREFLIGHT, hosts, findings, started_at=T0, level=Level.QUICK, run_id="pf-fleet")
    store.save_report(run)
    for h in hosts[::100]:
        node_states.record(store, h, DrainEvent(at=T0 + 10, reason="XID 79 GPU0", run_id="pf-fleet"))
    started = time.process_time()
    page = render_fleet(store, plotly_src="static/plotly.min.js")
    cpu_s = time.process_time() - started
    size = len(page.encode())
    print(f"fleet page of 5,000 nodes: {size / 1e6:.2f} MB, rendered in {cpu_s:.2f} s of CPU")
    assert page.count('href="nodes/gpu') >= 5000
    assert 'id="state-quarantined"' in page and 'id="state-suspect"' in page and 'id="state-ok"' in page
    assert size < 1_500_000  # about 100 bytes per node, plotly.js served apart
    assert foreign_urls(page) == []


def test_hostile_text_is_escaped_on_every_page(store: Store) -> None:
    hostile = '</td><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
    job = Job(scheduler=SchedulerKind.SLURM, job_id='j<b>"1', nodes=["gpu01"])
    bad = Finding(
        code=FindingCode.GPU_XID, severity=Severity.CRITICAL, nodes=["gpu01"], subject=hostile, message=hostile
    )
    run = assemble_report(RunKind.PREFLIGHT, ["gpu01"], [bad], started_at=T0, level=Level.QUICK, run_id="pf-x")
    store.save_report(run.model_copy(update={"job": job}))
    node_states.record(store, "gpu01", DrainEvent(at=T0 + 1, reason=hostile, run_id="pf-x"))
    client = TestClient(create_app(store))
    fleet = client.get("/").text
    assert 'href="jobs/j%3Cb%3E%221"' in fleet
    for path in ("/", "/nodes/gpu01", '/jobs/j<b>"1'):
        page = client.get(path)
        assert page.status_code == 200, path
        assert "<script>window" not in page.text and "<img" not in page.text, path
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page.text, path
        assert foreign_urls(page.text) == [], path


def test_a_job_id_with_a_slash_has_its_page(store: Store) -> None:
    job = Job(scheduler=SchedulerKind.KUBERNETES, job_id="team-a/train-7", nodes=["h100-vm-idle"])
    store.save_report(preflight_run("pf-k", T0).model_copy(update={"job": job}), preflight_raw())
    client = TestClient(create_app(store))
    assert 'href="jobs/team-a/train-7"' in client.get("/").text
    page = client.get("/jobs/team-a/train-7")
    assert page.status_code == 200 and "job team-a/train-7" in page.text
    assert '<script src="../../static/plotly.min.js">' in page.text and 'href="../../nodes/h100-vm-idle"' in page.text


def test_a_stored_step_analysis_is_on_its_job_page(store: Store) -> None:
    from fleetdx.orchestrator.steps.run import StepsRequest, run
    from fleetdx.orchestrator.steps.run import save as save_steps
    from tests.htmlreport_samples import STEP_TRACES

    report = run(StepsRequest(paths=[STEP_TRACES], job_id="4711", jobs=1)).report
    record = save_steps(report, store)
    client = TestClient(create_app(store))
    page = client.get("/jobs/4711")
    assert page.status_code == 200 and f'href="../steps/{record.analysis_id}"' in page.text
    steps = page.text.split('id="steps"')[1].split("</section>")[0]
    assert report.verdict.name in steps and "No stored step analysis" not in steps
    assert 'href="jobs/4711"' in client.get("/").text
    assert client.get(f"/steps/{record.analysis_id}").status_code == 200
    res = CliRunner().invoke(_cli(), ["--job", "4711", "--db", store.url, "--json"])
    assert res.exit_code == int(report.verdict)
    assert [a["analysis_id"] for a in json.loads(res.output)["step_analyses"]] == [record.analysis_id]
