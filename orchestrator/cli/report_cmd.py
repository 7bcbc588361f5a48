"""``fleetdx report --job ID``: one report of a job from the store: its pre-flights, analyze and bandwidth runs,
postmortems, step analyses and its nodes' states now (:func:`fleetdx.orchestrator.store.jobs.job_report`).
``--html OUT`` writes the page the service shows at ``GET /jobs/{job_id}``
(:func:`fleetdx.orchestrator.htmlreport.job.render_job`) as one self-contained file."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, fail, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import DB_HELP

if TYPE_CHECKING:
    from fleetdx.orchestrator.store.jobs import JobReport


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def _print(report: JobReport) -> None:
    """The job as text: its verdict line, its runs and postmortems (one table), its nodes' states."""
    runs = Table(title=f"job {escape(report.job_id)}: {report.verdict.name}", title_justify="left")
    for col in ("when (UTC)", "what", "id", "verdict", "found"):
        runs.add_column(col)
    for r in report.runs:
        found = f"{len(r.findings)} finding(s)"
        runs.add_row(_when(r.started_at), r.kind.value, escape(r.run_id), r.verdict.name, found)
    for p in report.postmortems:
        cause = p.first_cause or "no cause"
        runs.add_row(_when(p.created_at), "postmortem", p.postmortem_id[:12], p.verdict.name, cause)
    for a in report.step_analyses:
        first = a.first_finding or "no finding"
        runs.add_row(_when(a.created_at), "steps", a.analysis_id[:12], a.verdict.name, first)
    console.print(runs)
    nodes = Table(title=f"{len(report.nodes)} node(s), state now", title_justify="left")
    for col in ("host", "verdict", "state", "why"):
        nodes.add_column(col)
    for n in report.nodes:
        state = n.state.state.value if n.state else "-"
        why = escape(n.state.reason) if n.state else ""
        nodes.add_row(escape(n.host), n.verdict.name if n.verdict is not None else "-", state, why)
    console.print(nodes)
    if report.live is not None:
        j = report.live
        step = f", step {j.last_step}" if j.last_step is not None else ""
        newest = f"; newest finding {j.findings[-1].code.value}" if j.findings else ""
        console.print(
            f"live: {j.state}, {j.verdict.name}, {j.ranks} ranks{step}{newest} (pushed {_when(j.updated_at)})",
            highlight=False,
        )
    for why in report.not_stored.values():
        console.print(escape(why), highlight=False)
    if report.left_out:
        console.print(f"{report.left_out} older runs or postmortems left out", highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("report")
    @handle_errors
    def report(
        job: Annotated[str, typer.Option("--job", help="The scheduler job id whose stored runs to join.")],
        db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
        html_out: Annotated[
            Path | None,
            typer.Option(
                "--html",
                help="Also write the report to FILE as one self-contained HTML page (the service's "
                "/jobs/ID page; opens offline).",
            ),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the JobReport as JSON.")] = False,
    ) -> None:
        """One report of a job from the store: its pre-flights, analyze and bandwidth runs, postmortems, step
        analyses, and its nodes' states now.

        The live state fleetdx watch --report-to pushed is shown when there is one. Example: `fleetdx report --job
        4711 --html job-4711.html`.

        Exit: the worst verdict of the job's runs, postmortems and step analyses (0 OK, 1 WARNING, 2 CRITICAL,
        3 UNKNOWN); 3 when nothing stored names the job, or the database cannot be read.
        """
        from fleetdx.orchestrator.store import Store
        from fleetdx.orchestrator.store.jobs import job_report

        with Store.open(db) as store:
            result = job_report(store, job)
        if result is None:
            raise fail(f"no stored run, postmortem or step analysis names job {job!r}")
        if html_out is not None:
            from fleetdx.orchestrator.htmlreport import write_html
            from fleetdx.orchestrator.htmlreport.job import render_job

            write_html(html_out, render_job(result))
        if as_json:
            print_json(result)
        else:
            _print(result)
            if html_out is not None:
                console.print(f"HTML report: {escape(str(html_out))}", highlight=False)
        raise typer.Exit(int(result.verdict))
