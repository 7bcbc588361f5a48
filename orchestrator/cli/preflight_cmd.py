"""``fleetdx preflight`` (probe the allocation before training) and ``fleetdx analyze`` (the same diagnosis,
offline, on collected bundles).

Both exit with the run's Nagios verdict: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN; bad input exits 3 with one
line on stderr, and 4 is a run judged OK or WARNING whose report could be neither saved nor spooled.
``--json`` prints only the :class:`~fleetdx.orchestrator.report.RunReport` dump on stdout.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fleetdx.orchestrator.cli.common import (
    console,
    err_console,
    exit_code_after_save,
    fail,
    finite_positive,
    handle_errors,
    print_json,
    request_of,
)
from fleetdx.orchestrator.cli.conventions import computed_default
from fleetdx.probes.contracts import Level, Severity, Verdict

if TYPE_CHECKING:
    from fleetdx.orchestrator.preflight.run import PreflightResult
    from fleetdx.orchestrator.report import RunReport
    from fleetdx.orchestrator.store import SaveOutcome

_VERDICT_STYLE = {
    Verdict.OK: "green",
    Verdict.WARNING: "yellow",
    Verdict.CRITICAL: "bold red",
    Verdict.UNKNOWN: "magenta",
}
_SEVERITY_STYLE = {
    Severity.INFO: "dim",
    Severity.WARNING: "yellow",
    Severity.CRITICAL: "bold red",
    Severity.UNKNOWN: "magenta",
}


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar of nodes done/total on stderr when it is a terminal; nothing otherwise."""
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("nodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task("nodes", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _print_report(report: RunReport, saved: str | None) -> None:
    from rich.markup import escape
    from rich.table import Table

    from fleetdx.orchestrator.preflight.run import BANDWIDTH_PROBE

    if report.simulated:
        console.print(
            "[bold magenta]SIMULATED[/]: nodes are local Ray nodes replaying bundles; "
            + (
                "the node figures were replayed, and the bandwidth curves were measured between local Ray "
                "nodes on this machine, not between the hosts named."
                if report.curves
                else "no figure below was measured by this run."
            )
        )
    nodes = Table(
        "host", "verdict", "probes ok/run", "not run", title=f"{report.kind.value}: {len(report.nodes)} nodes"
    )
    for n in report.nodes:
        ran = [p for p in n.probes if p.status.value != "skipped"]
        ok = sum(1 for p in ran if p.status.value == "ok")
        nodes.add_row(
            n.host,
            f"[{_VERDICT_STYLE[n.verdict]}]{n.verdict.name}[/]",
            f"{ok}/{len(ran)}",
            str(len(n.probes) - len(ran)),
        )
    console.print(nodes)
    for n in report.nodes:
        if n.unjudged:
            console.print(escape(f"{n.host}: cannot be judged: {n.unjudged}"), highlight=False)
    for n in report.nodes:
        for p in n.probes:
            if p.name == BANDWIDTH_PROBE and p.status.value != "ok":
                console.print(escape(f"{n.host}: {BANDWIDTH_PROBE} {p.status.value}: {p.error}"), highlight=False)
    if report.curves:
        curves = Table("nodes", "collective", "backend", "size (B)", "busbw (GB/s)", title="bandwidth curves")
        for c in report.curves:
            top = c.points[-1] if c.points else None
            curves.add_row(
                ",".join(c.nodes),
                c.collective.value,
                c.backend.value,
                str(top.size) if top else "-",
                f"{top.busbw_gbps:.3g}" if top else "-",
            )
        console.print(curves)
    if report.findings:
        table = Table("severity", "node", "code", "subject", "message", title="findings")
        for f in report.findings:
            table.add_row(
                f"[{_SEVERITY_STYLE[f.severity]}]{f.severity.value}[/]",
                escape(",".join(f.nodes)),
                f.code.value,
                escape(f.subject),
                escape(f.message),  # tool output in messages ("[receive]", "[host:pid]") is text, not markup
            )
        console.print(table)
    style = _VERDICT_STYLE[report.verdict]
    console.print(
        f"verdict: [{style}]{report.verdict.name}[/] (exit {report.exit_code})"
        + (f"; exclude: {report.exclude}" if report.exclude else ""),
        highlight=False,
    )
    if saved:
        console.print(saved, style="dim", highlight=False)


def _finish(
    result: PreflightResult,
    as_json: bool,
    exclude_file: Path | None,
    save: Callable[[PreflightResult], SaveOutcome] | None = None,
) -> None:
    """Write the exclude file and print the report with its verdict; then ``save`` it (when given) and print
    the line saying where; then exit with the verdict. The database is last: a slow or unreachable one never
    delays the verdict or the exclude file that the job script acts on."""
    report = result.report
    if exclude_file is not None:
        exclude_file.write_text(report.exclude + "\n" if report.exclude else "", encoding="utf-8")
    if as_json:
        print_json(report, stream=("nodes", "findings"))  # thousands of nodes: never the whole JSON at once
    else:
        _print_report(report, None)
        console.file.flush()
    code = report.exit_code
    if save is not None:
        outcome = save(result)
        (err_console if as_json else console).print(outcome.message, style="dim", highlight=False)
        if not outcome.stored:
            if not as_json:  # the report must not be lost: its JSON goes to stderr beside the message
                sys.stderr.write(report.model_dump_json(indent=2) + "\n")
            code = exit_code_after_save(code, stored=False)
    raise typer.Exit(code)


JsonFlag = Annotated[bool, typer.Option("--json", help="Print only the report as JSON.")]
GpusOpt = Annotated[
    int | None,
    typer.Option(
        "--gpus-per-node",
        min=1,
        help="Expected GPUs per node; preflight reads $SLURM_GPUS_ON_NODE, else $SLURM_GPUS_PER_NODE.",
    ),
]
ExcludeOpt = Annotated[
    Path | None,
    typer.Option("--exclude-file", help="Write the hostlist of nodes with critical findings (sbatch --exclude)."),
]


@handle_errors
def preflight(
    nodes: Annotated[
        str | None,
        typer.Option(
            "--nodes",
            help="Slurm hostlist, e.g. gpu[01-04]." + computed_default("$SLURM_JOB_NODELIST, else every Ray node"),
        ),
    ] = None,
    level: Annotated[
        Level,
        typer.Option(
            "--level",
            help="quick: state only (<= 10 s/node); standard: adds GPU micro-benchmarks and the intra-node "
            "nccl-tests sweep; full: then adds the cross-node bandwidth screen, and localisation of slow nodes, "
            "over the nodes without critical findings.",
        ),
    ] = Level.QUICK,
    gpus_per_node: GpusOpt = None,
    as_json: JsonFlag = False,
    exclude_file: ExcludeOpt = None,
    db: Annotated[
        str | None, typer.Option("--db", help="Database URL." + computed_default("$FLEETDX_DB_URL, else SQLite"))
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            callback=finite_positive,
            help="Deadline of the node probes, s; nodes without an answer by then are NODE_UNREACHABLE. At full, "
            "the bandwidth step follows, bounded per round." + computed_default("quick 60, standard and full 900"),
        ),
    ] = None,
    probe_timeout: Annotated[
        float | None,
        typer.Option(
            "--probe-timeout",
            callback=finite_positive,
            help="Cap on each command's timeout, s." + computed_default("a third of --timeout"),
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="Ray cluster."
            + computed_default(
                "$RAY_ADDRESS, else (inside a Slurm allocation of several nodes) a Ray that fleetdx starts on the "
                "allocation and stops after the run, else a local Ray for this run"
            ),
        ),
    ] = None,
    join_timeout: Annotated[
        float | None,
        typer.Option(
            "--join-timeout",
            callback=finite_positive,
            help="Deadline, s, for every node of the allocation to join the Ray that fleetdx starts on it; a node "
            "not joined by then is NODE_UNREACHABLE (did not join Ray within S s)." + computed_default("120"),
        ),
    ] = None,
    simulate: Annotated[
        bool,
        typer.Option(
            "--simulate",
            help="Simulate one node per BUNDLE_DIR on a local Ray cluster; probes replay the bundles (the "
            "report says simulated).",
        ),
    ] = False,
    bundles: Annotated[
        list[Path] | None,
        typer.Argument(metavar="BUNDLE_DIR", help="With --simulate: the bundles to replay, one node each."),
    ] = None,
    save: Annotated[
        bool,
        typer.Option(
            "--save/--no-save", help="Store the report (a --simulate run is stored only when --db is given)."
        ),
    ] = True,
    nccl_tests_dir: Annotated[
        str | None,
        typer.Option(
            "--nccl-tests-dir",
            help="Where all_reduce_perf is on the nodes (live runs at standard/full)."
            + computed_default("looked up on each node: its $NCCL_TESTS_HOME, then PATH"),
        ),
    ] = None,
    report_to: Annotated[
        str | None,
        typer.Option(
            "--report-to",
            help="Push the report to this fleetdx service (its base URL, e.g. https://fleetdx:8443) instead of "
            "a database; when the service does not take it, the report is spooled locally ($FLEETDX_SPOOL_DIR).",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="File holding a write token for --report-to (fleetdx token create)."),
    ] = None,
    spool: Annotated[
        bool,
        typer.Option(
            "--spool",
            help="Write the report to a spool file ($FLEETDX_SPOOL_DIR) instead of a database: the lightest "
            "delivery, for a Slurm prolog (no database library is loaded); fleetdx db import loads them later.",
        ),
    ] = False,
) -> None:
    """Probe every node of the allocation and print a verdict.

    Exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    """
    from fleetdx.orchestrator.preflight.job import PreflightRequest, run
    from fleetdx.orchestrator.preflight.run import save as save_report
    from fleetdx.orchestrator.preflight.run import spool as spool_report

    if simulate != bool(bundles):
        raise fail("--simulate takes one or more BUNDLE_DIR arguments, and BUNDLE_DIR needs --simulate")
    request = request_of(
        PreflightRequest,
        nodes=nodes,
        level=level,
        gpus_per_node=gpus_per_node,
        timeout_s=timeout,
        probe_timeout_s=probe_timeout,
        ray_address=ray_address,
        join_timeout_s=join_timeout,
        nccl_tests_dir=nccl_tests_dir,
        simulate=list(bundles or []),
    )
    if spool and (db is not None or report_to is not None or not save):
        raise fail("--spool excludes --db, --report-to and --no-save (it is where the report goes)")
    push = _pusher(report_to, token_file, db, not save)  # before the run: a bad token file wastes no pre-flight
    with _progress(not as_json) as progress:
        result = run(request, progress=progress, say=_say)
    # a simulated run is not history: it goes to a database only when one is named
    store = save and (db is not None or not simulate)
    deliver = spool_report if spool else push or (functools.partial(save_report, db) if store else None)
    _finish(result, as_json, exclude_file, deliver)


def _say(line: str) -> None:
    """A phase line of the pre-flight (starting Ray, probing N nodes): one line on stderr, at once, also with
    ``--json`` (stdout carries only the report)."""
    err_console.print(line, style="dim", highlight=False, markup=False, soft_wrap=True)


def _pusher(
    report_to: str | None, token_file: Path | None, db: str | None, no_save: bool
) -> Callable[[PreflightResult], SaveOutcome] | None:
    """The save step of ``--report-to URL --token-file F`` (push, else spool), or None without --report-to."""
    if report_to is None:
        if token_file is not None:
            raise fail("--token-file goes with --report-to")
        return None
    if db is not None or no_save:
        raise fail("--report-to excludes --db and --no-save (the service stores the report)")
    if not report_to.startswith(("http://", "https://")):
        raise fail(f"--report-to {report_to!r}: not an http:// or https:// URL")
    if token_file is None:
        raise fail("--report-to needs --token-file (a write token: fleetdx token create NAME --scope write)")
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise fail(f"--token-file {token_file}: not a text file") from None
    if not token:
        raise fail(f"--token-file {token_file}: empty")

    def push(result: PreflightResult) -> SaveOutcome:
        from fleetdx.orchestrator.service.client import push_or_spool

        return push_or_spool(report_to, token, result.report, result.raw())

    return push


@handle_errors
def analyze(
    bundles: Annotated[
        list[Path],
        typer.Argument(
            metavar="BUNDLE_DIR",
            help="Bundle directories (meta.json optional: a directory of raw outputs named after their "
            "commands is a bundle).",
        ),
    ],
    gpus_per_node: Annotated[int | None, typer.Option("--gpus-per-node", min=1, help="Expected GPUs per node.")] = None,
    as_json: JsonFlag = False,
    exclude_file: ExcludeOpt = None,
) -> None:
    """Diagnose collected bundles offline, as pre-flight would.

    Exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    """
    from fleetdx.orchestrator.preflight.run import analyze_bundles

    _finish(analyze_bundles(bundles, gpus_per_node), as_json, exclude_file)


def register(app: typer.Typer) -> None:
    """Add ``preflight`` and ``analyze`` to ``app``."""
    app.command("preflight")(preflight)
    app.command("analyze")(analyze)
