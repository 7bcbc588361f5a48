"""``fleetdx postmortem``: why did this job fail, on which rank and host, with what evidence?

Evidence comes from a list of sources (:mod:`fleetdx.orchestrator.postmortem.sources`): the job's logs
(``--logs``), node bundles with their kernel logs (``--bundles``), and the job model (``--job ID``: Slurm's
``scontrol``/``sacct``: nodes, window, state, exit code). The command only builds a
:class:`~fleetdx.orchestrator.postmortem.job.PostmortemRequest`, runs it
(:func:`~fleetdx.orchestrator.postmortem.job.run_postmortem_request`), renders the report and exits with its exit
code; a usage error (a path that does not exist, a bad time) is one line on stderr and exit 3. Exit code: the
Nagios verdict (a failed job with a found cause is CRITICAL 2; UNKNOWN 3 when no
cause is found, and for usage or input errors).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from fleetdx.orchestrator.cli.common import console, err_console, fail, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import computed_default

if TYPE_CHECKING:
    from fleetdx.orchestrator.postmortem.contracts import PostmortemReport

_HELP = (
    "Explain a failed job: which rank failed first, on which host and GPU, why, with the evidence lines.\n\n"
    "Reads the job's logs and its nodes' kernel logs onto one timeline, finds the earliest decisive event (not the "
    "loudest: a watchdog timeout on every rank points at the rank that never reached the collective), and ranks "
    "the candidate causes (GPU_HW_FAULT, NCCL_TIMEOUT, NCCL_NETWORK_ERROR, OOM_GPU, OOM_HOST, PROCESS_CRASH, "
    "SLURM_TIME_LIMIT, ...), each with its evidence lines and what to do. When no cause is found the verdict is "
    "UNKNOWN and the report says which evidence was missing.\n\n"
    "Examples:\n\n"
    "  fleetdx postmortem --logs slurm-4711.out\n\n"
    "  fleetdx postmortem --job 4711 --logs logs/rank*.log --bundles /shared/pm/*/ --json\n\n"
    "  fleetdx postmortem --logs slurm-4711.out --fr /shared/fr/4711/\n\n"
    "Exit 0 OK, 1 WARNING, 2 CRITICAL (a cause found), 3 UNKNOWN (no cause found, or bad input)."
)
_STYLE = {"critical": "bold red", "warning": "yellow", "unknown": "magenta", "info": "green"}


def parse_time(text: str | None, option: str) -> float | None:
    """``--since``/``--until``: Unix seconds, or ISO 8601 (``2026-11-22T10:58``, ``2026-11-22 10:58:12+02:00``;
    no zone: UTC).

    Raises:
        ConfigError: neither (a usage error: exit 3).
    """
    from fleetdx.probes.errors import ConfigError

    if text is None:
        return None
    bad = ConfigError(f"{option} {text!r}: not ISO 8601 (2026-11-22T10:58:12) or Unix seconds")
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise bad
        return seconds
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise bad from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


def _render_history(report: PostmortemReport) -> None:
    for h in report.history:
        console.print(f"[bold]history of {escape(h.host)}[/] (newest first):", highlight=False)
        for e in h.entries:
            when = datetime.fromtimestamp(e.started_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            codes = ", ".join(dict.fromkeys(f.code.value for f in e.findings)) or "no findings"
            sim = " SIMULATED" if e.simulated else ""
            console.print(f"   {when} {e.kind.value}{sim} {e.verdict.name}: {codes}", highlight=False)


#: the most characters of an evidence line the human output shows (``--json`` has them all)
EVIDENCE_CHARS = 220


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with an ellipsis when cut (an evidence
    line ended mid-word, "...make_dumps.py" as "mak", with nothing to say it went on)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;") + "…"


#: candidate causes the human output shows by default (``--top``; ``--json`` and ``--html`` have them all)
TOP_CAUSES = 10


def render(report: PostmortemReport, evidence_lines: int = 3, top: int = TOP_CAUSES) -> None:
    """The causes, most likely first (the first ``top`` of them; 0: all): what, where, the action, the first
    ``evidence_lines`` evidence lines; then what evidence was missing, and the verdict."""
    console.print(f"[bold]postmortem[/]: {len(report.findings)} candidate cause(s), most likely first", highlight=False)
    shown = report.findings[:top] if top > 0 else report.findings
    for i, c in enumerate(shown, start=1):
        where = "  ".join(
            x for x in (f"rank {c.rank}" if c.rank is not None else "", c.host or "", c.gpu or "", c.time or "") if x
        )
        style = _STYLE.get(c.severity.value, "")
        console.print(
            f"\n{i}. [{style}]{c.severity.value.upper()}[/] [bold]{c.code.value}[/]  {escape(where)}", highlight=False
        )
        console.print(f"   {escape(c.message)}", highlight=False, soft_wrap=True)
        console.print(f"   [bold]action:[/] {escape(c.action)}", highlight=False, soft_wrap=True)
        for ev in c.evidence[:evidence_lines]:
            text = clip(ev.text.splitlines()[0], EVIDENCE_CHARS) if ev.text else ""
            console.print(f"   [dim]{escape(ev.file)}:{ev.line}: {escape(text)}[/]", highlight=False, soft_wrap=True)
        if len(c.evidence) > evidence_lines:
            console.print(f"   [dim](+{len(c.evidence) - evidence_lines} more evidence lines: --json)[/]")
    if len(shown) < len(report.findings):
        console.print(
            f"\n[dim](+{len(report.findings) - len(shown)} more candidate causes, less likely: --top 0 shows them "
            "all, --json has them)[/]",
            highlight=False,
        )
    console.print()
    if report.history:
        _render_history(report)
        console.print()
    for m in report.missing_evidence:
        console.print(f"[yellow]missing:[/] {escape(m)}", highlight=False, soft_wrap=True)
    console.print(f"verdict: {report.verdict.name} (exit {report.exit_code})", highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("postmortem", help=_HELP)
    @handle_errors
    def postmortem(
        paths: Annotated[
            list[Path] | None,
            typer.Argument(
                metavar="PATH...",
                help="More job logs or bundles, by kind (a directory is a bundle, a file a log): so that "
                "--logs rank*.log and --bundles /shared/pm/*/ work with shell globs.",
                show_default=False,
            ),
        ] = None,
        logs: Annotated[
            list[Path] | None,
            typer.Option(
                "--logs",
                help="The job's stdout/stderr: one file per rank, or all ranks interleaved (srun -l, torchrun, "
                "mpirun --tag-output, Ray prefixes are read). A kernel log given here is read too.",
            ),
        ] = None,
        bundles: Annotated[
            list[Path] | None,
            typer.Option("--bundles", help="Node bundles (fleetdx collect): their kernel logs (XIDs, link events)."),
        ] = None,
        fr: Annotated[
            Path | None,
            typer.Option(
                "--fr",
                help="Folder of PyTorch Flight Recorder dumps, one per rank (TORCH_FR_BUFFER_SIZE + "
                "TORCH_NCCL_DUMP_ON_TIMEOUT=1; files TORCH_FR_DUMP_TEMP_FILE<rank>, pickle or JSON, read without "
                "running any code): names the rank that never reached the collective the others waited in.",
            ),
        ] = None,
        fr_jobs: Annotated[
            int | None,
            typer.Option(
                "--fr-jobs",
                min=1,
                help="Processes reading the --fr dumps from 64 dumps on (1: none)."
                + computed_default("the CPUs this process may use"),
            ),
        ] = None,
        job_id: Annotated[
            str | None,
            typer.Option("--job", help="Slurm job id: its nodes, time window, state and exit code (scontrol/sacct)."),
        ] = None,
        bundle_dir: Annotated[
            Path | None,
            typer.Option(
                "--bundle-dir",
                envvar="FLEETDX_BUNDLE_DIR",
                help="Where slurm/epilog.sh keeps each job's bundles (DIR/JOBID/HOST/): with --job, every node's "
                "bundle of that job is read." + computed_default("$FLEETDX_BUNDLE_DIR"),
            ),
        ] = None,
        nodes: Annotated[
            str | None,
            typer.Option("--nodes", help="Hostlist (gpu[01-16]): only these nodes' kernel events count."),
        ] = None,
        since: Annotated[
            str | None, typer.Option("--since", help="Job start (ISO 8601 or Unix seconds): kernel events window.")
        ] = None,
        until: Annotated[
            str | None, typer.Option("--until", help="Job end (ISO 8601 or Unix seconds): kernel events window.")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print only the postmortem as JSON.")] = False,
        db: Annotated[
            str | None,
            typer.Option(
                "--db",
                help="Database URL: the blamed hosts' pre-flight history is read from it and the postmortem kept "
                "in it (apart from node history)." + computed_default("$FLEETDX_DB_URL, else SQLite"),
            ),
        ] = None,
        save: Annotated[
            bool,
            typer.Option(
                "--save/--no-save", help="Keep the postmortem in the store (--no-save: read the hosts' history only)."
            ),
        ] = True,
        top: Annotated[
            int,
            typer.Option(
                "--top",
                min=0,
                help="Show the N most likely causes (0: all); --json and --html have them all.",
            ),
        ] = TOP_CAUSES,
        html_out: Annotated[
            Path | None,
            typer.Option(
                "--html",
                help="Also write the postmortem to FILE as one self-contained HTML page (opens offline, loads "
                "nothing): the causes with their evidence lines first, then the timeline by host and rank.",
            ),
        ] = None,
    ) -> None:
        from pydantic import ValidationError

        from fleetdx.orchestrator.postmortem.job import PostmortemRequest, run_postmortem_request

        log_paths, bundle_dirs = list(logs or []), list(bundles or [])
        for p in paths or []:
            (bundle_dirs if p.is_dir() else log_paths).append(p)
        try:
            request = PostmortemRequest(
                logs=log_paths,
                bundles=bundle_dirs,
                fr=fr,
                fr_jobs=fr_jobs,
                job_id=job_id,
                bundle_dir=bundle_dir,
                nodes=nodes,
                since=parse_time(since, "--since"),
                until=parse_time(until, "--until"),
                db=db,
                save=save,
            )
        except ValidationError as e:
            raise fail("; ".join(str(err["msg"]).removeprefix("Value error, ") for err in e.errors())) from None
        notes: list[str] = []
        report = run_postmortem_request(request, on_note=notes.append)
        note = notes[0] if notes else ""
        if html_out is not None:
            from fleetdx.orchestrator.htmlreport import render_postmortem, write_html

            given = [*request.logs, *request.bundles, *([fr] if fr is not None else [])]
            write_html(html_out, render_postmortem(report, sources=[str(p) for p in given]))
        if as_json:
            print_json(report)
            err_console.print(note, style="dim", highlight=False, soft_wrap=True)
        else:
            render(report, top=top)
            console.print(note, style="dim", highlight=False, soft_wrap=True)
            if html_out is not None:
                console.print(f"HTML report: {escape(str(html_out))}", highlight=False)
        raise typer.Exit(report.exit_code)
