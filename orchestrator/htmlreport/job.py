"""One page per job: its pre-flights, analyze runs, bandwidth runs (busbw charts), postmortems and the current
states of its nodes, from :func:`fleetdx.orchestrator.store.jobs.job_report`. ``fleetdx report --job ID --html
OUT`` writes it as a self-contained file (plotly.js inlined, no links out); the service serves the same page at
``GET /jobs/{job_id}`` (plotly.js from the service, links to the node, run and postmortem pages)."""

from __future__ import annotations

from dataclasses import dataclass

from fleetdx.orchestrator.htmlreport.fleet import utc
from fleetdx.orchestrator.htmlreport.page import Limits, fmt_hosts, render
from fleetdx.orchestrator.htmlreport.postmortem import bandwidth_figures
from fleetdx.orchestrator.report import RunKind, RunReport
from fleetdx.orchestrator.store.jobs import JobReport


@dataclass(frozen=True)
class RunRowView:
    """A run as one table row: its report and its hosts as a hostlist."""

    run: RunReport
    hosts: str
    started: str


def _rows(report: JobReport, kind: RunKind) -> list[RunRowView]:
    return [
        RunRowView(r, fmt_hosts([n.host for n in r.nodes]), utc(r.started_at)) for r in report.runs if r.kind is kind
    ]


def render_job(report: JobReport, *, plotly_src: str | None = None, root: str | None = None) -> str:
    """The job's page as HTML. ``root``: the relative path from the page to the service's root (the service's
    ``"../"``), put before the links to node, run and postmortem pages; ``None`` (a file): no such links."""
    lim = Limits()
    curves = [c for r in report.runs for c in r.curves]
    job_hosts = [n.host for n in report.nodes]
    findings = [(r, f) for r in report.runs for f in r.findings]
    j = report.job
    about: list[tuple[str, str]] = []
    if j is not None:
        about = [
            (k, str(v))
            for k, v in (
                ("scheduler", j.scheduler.value),
                ("name", j.name),
                ("user", j.user),
                ("state", j.state),
                ("exit code", j.exit_code),
                ("started", utc(j.start_time) if j.start_time is not None else None),
                ("ended", utc(j.end_time) if j.end_time is not None else None),
            )
            if v is not None
        ]
    return render(
        "job.html.j2",
        plotly_src=plotly_src,
        title=f"fleetdx: job {report.job_id}",
        root=root,
        report=report,
        verdict=report.verdict.name,
        about=about,
        hosts=fmt_hosts(job_hosts),
        preflights=_rows(report, RunKind.PREFLIGHT),
        analyses=_rows(report, RunKind.ANALYZE),
        bandwidth_runs=_rows(report, RunKind.BANDWIDTH),
        bandwidth=bandwidth_figures(curves, lim, job_hosts=job_hosts) if curves else [],
        findings=findings[: lim.findings],
        findings_left_out=max(0, len(findings) - lim.findings),
        utc=utc,
        sources=[],
    )
