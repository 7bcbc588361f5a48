"""``fleetdx bandwidth``: collective bandwidth across the nodes of a Ray cluster, and who is slow.

Prints a per-node table and, on a terminal, a heat map of the pair matrix (busbw of each measured pair
relative to the allocation median); ``--json`` prints only the ``RunReport``. Exits with the Nagios verdict.
The report (with its busbw-vs-size curves) is saved to the store unless ``--no-save``.
"""

from __future__ import annotations

import statistics
import sys
from enum import Enum
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fleetdx.orchestrator.cli.common import (
    console,
    err_console,
    exit_code_after_save,
    finite_positive,
    handle_errors,
    print_json,
    request_of,
)
from fleetdx.orchestrator.cli.conventions import computed_default
from fleetdx.orchestrator.cluster.collective import Backend
from fleetdx.orchestrator.preflight.detection import DetectionPolicy
from fleetdx.orchestrator.report import RunReport, Schedule


#: the collectives the torch.distributed probe measures (``cluster.collective.TORCH_COLLECTIVES``; a test keeps
#: the two equal)
class MeasuredCollective(str, Enum):
    """The collectives the torch.distributed probe measures (``cluster.collective.TORCH_COLLECTIVES``; a test
    keeps the two equal): ``--collective`` lists them in ``--help`` and in its error."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    SENDRECV = "sendrecv"


_ALL_REDUCE = computed_default("all_reduce")

def _pair_values(report: RunReport) -> dict[tuple[str, str], float]:
    """busbw (GB/s) at the largest size of each measured pair (the last measurement wins)."""
    out: dict[tuple[str, str], float] = {}
    for c in report.curves:
        if len(c.nodes) == 2 and c.points:
            a, b = sorted(c.nodes)
            out[(a, b)] = c.points[-1].busbw_gbps
    return out


def _node_table(report: RunReport) -> Table:
    scores: dict[str, list[float]] = {}
    for c in report.curves:
        if c.points:
            for n in c.nodes:
                scores.setdefault(n, []).append(c.points[-1].busbw_gbps)
    codes: dict[str, set[str]] = {}
    for f in report.findings:
        for n in f.nodes:
            codes.setdefault(n, set()).add(f.code.value)
    t = Table(title=f"bandwidth ({report.schedule.value if report.schedule else '-'}): {report.verdict.name}")
    for col in ("node", "verdict", "busbw median (GB/s)", "measurements", "findings"):
        t.add_column(col)
    for node in report.nodes:
        vals = scores.get(node.host, [])
        t.add_row(
            node.host,
            node.verdict.name,
            f"{statistics.median(vals):.3g}" if vals else "-",
            str(len(vals)),
            ", ".join(sorted(codes.get(node.host, ()))),
        )
    return t


def _heat_map(report: RunReport, policy: DetectionPolicy) -> Table | None:
    """The pair matrix, each cell the pair's busbw / the median of pairs: green at or above
    ``policy.reference_ratio``, yellow at or above ``policy.critical_ratio``, red below (the detector's own
    cut-offs, so the colours agree with the findings)."""
    pairs = _pair_values(report)
    if not pairs:
        return None
    med = statistics.median(pairs.values())
    hosts = sorted({h for p in pairs for h in p})
    t = Table(title=f"pair busbw / median ({med:.3g} GB/s)")
    t.add_column("")
    for h in hosts:
        t.add_column(h, justify="right")
    for a in hosts:
        row = []
        for b in hosts:
            v = pairs.get((min(a, b), max(a, b)))
            if v is None or med <= 0:
                row.append("·")
                continue
            r = v / med
            style = (
                "green" if r >= policy.reference_ratio else ("yellow" if r >= policy.critical_ratio else "bold red")
            )
            row.append(f"[{style}]{r:.2f}[/]")
        t.add_row(a, *row)
    return t


def _save(db_url: str | None, report: RunReport, as_json: bool) -> bool:
    """Save the report (curves included) through the store, spooling when the database is unreachable;
    whether it is stored somewhere. A report neither saved nor spooled is written to stderr as JSON (unless
    ``as_json`` already prints it on stdout)."""
    from fleetdx.orchestrator.store import save_or_spool

    outcome = save_or_spool(db_url, report, None)
    err_console.print(outcome.message, highlight=False)
    if not outcome.stored and not as_json:
        sys.stderr.write(report.model_dump_json(indent=2) + "\n")
    return outcome.stored


def register(app: typer.Typer) -> None:
    @app.command("bandwidth")
    @handle_errors
    def bandwidth(
        nodes: Annotated[
            str | None,
            typer.Option(
                "--nodes", help="Slurm hostlist of Ray hosts to measure." + computed_default("every Ray host")
            ),
        ] = None,
        schedule: Annotated[
            Schedule,
            typer.Option(
                "--schedule",
                help="roundrobin: every pair once; quick: one round of disjoint pairs; localise: quick, then find "
                "the slow member of each flagged pair.",
            ),
        ] = Schedule.LOCALISE,
        collective: Annotated[
            list[MeasuredCollective] | None,
            typer.Option(
                "--collective", help="Collective to measure (repeatable; the first judges)." + _ALL_REDUCE
            ),
        ] = None,
        sizes: Annotated[
            str, typer.Option("--sizes", help="Message sizes (K/M/G = 1024^n); the largest judges.")
        ] = "4M,16M,64M",
        backend: Annotated[
            Backend | None,
            typer.Option(
                "--backend",
                help="torch.distributed backend." + computed_default("nccl when every node has a GPU, else gloo"),
            ),
        ] = None,
        iters: Annotated[int, typer.Option("--iters", min=1, help="Timed iterations per size.")] = 10,
        timeout: Annotated[
            float,
            typer.Option("--timeout", callback=finite_positive, help="Seconds per round before a group is a hang."),
        ] = 120.0,
        reference: Annotated[
            float | None,
            typer.Option("--reference-gbps", callback=finite_positive, help="Expected busbw of this SKU (GB/s)."),
        ] = None,
        address: Annotated[
            str | None,
            typer.Option(
                "--ray-address",
                "--address",
                help="Ray cluster address, HOST:PORT or auto." + computed_default("$RAY_ADDRESS, else a local Ray"),
            ),
        ] = None,
        db: Annotated[
            str | None,
            typer.Option(
                "--db",
                help="Database URL for history and saving." + computed_default("$FLEETDX_DB_URL, else SQLite"),
            ),
        ] = None,
        save: Annotated[
            bool, typer.Option("--save/--no-save", help="Save the report and curves to the store.")
        ] = True,
        as_json: Annotated[bool, typer.Option("--json", help="Print only the report as JSON.")] = False,
    ) -> None:
        """Measure collective bandwidth between nodes and name slow ones (exit code: Nagios verdict)."""
        from fleetdx.orchestrator.preflight.bandwidth_job import BandwidthRequest, parse_sizes, run

        request = request_of(
            BandwidthRequest,
            nodes=nodes,
            schedule=schedule,
            collectives=[c.value for c in collective or [MeasuredCollective.ALL_REDUCE]],
            sizes=parse_sizes(sizes),
            backend=backend,
            iters=iters,
            timeout_s=timeout,
            reference_gbps=reference,
            ray_address=address,
            db=db,
            read_history=save or db is not None,
        )
        report, policy = run(request)
        for m in report.missing_evidence:
            err_console.print(f"[yellow]note:[/] {escape(m)}", highlight=False)
        stored = _save(db, report, as_json) if save else True
        if as_json:
            print_json(report)
        else:
            console.print(_node_table(report))
            heat = _heat_map(report, policy) if console.is_terminal else None
            if heat is not None:
                console.print(heat)
            for f in report.findings:
                console.print(escape(f"{f.severity.value.upper():8} {f.code.value}: {f.message}"), highlight=False)
            if report.exclude:
                console.print(f"exclude: {report.exclude}", highlight=False)
        raise typer.Exit(exit_code_after_save(report.exit_code, stored))
