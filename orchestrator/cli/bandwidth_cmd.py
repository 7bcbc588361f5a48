"""``fleetdx bandwidth``: collective bandwidth across the nodes of a Ray cluster, and who is slow.

Prints a per-node table and, on a terminal, a heat map of the pair matrix (busbw of each measured pair
relative to the allocation median); ``--json`` prints only the ``RunReport``. Exits with the Nagios verdict.
The report (with its busbw-vs-size curves) is saved to the store unless ``--no-save``.
"""

from __future__ import annotations

import re
import statistics
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

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
)
from fleetdx.orchestrator.preflight.detection import DetectionPolicy
from fleetdx.orchestrator.report import CurveBackend, RunReport
from fleetdx.probes.contracts import Collective
from fleetdx.probes.errors import ConfigError

if TYPE_CHECKING:
    from fleetdx.orchestrator.store import BusbwHistoryPoint

_SIZE = re.compile(r"^(\d+)([KMG]?)B?$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_sizes(text: str) -> list[int]:
    """``"4M,16M,64M"`` -> bytes. K/M/G are powers of 1024, as nccl-tests' ``-b``/``-e`` read them.

    Raises:
        ConfigError: an entry that is not a size.
    """
    out = []
    for part in text.split(","):
        m = _SIZE.match(part.strip())
        if not m or int(m.group(1)) <= 0:
            raise ConfigError(f"--sizes: {part.strip()!r} is not a size like 4M, 64K or 1048576")
        out.append(int(m.group(1)) * _UNITS[m.group(2).upper()])
    return sorted(set(out))


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


def history_values(points: Sequence[BusbwHistoryPoint], backend: CurveBackend, nranks: int = 2) -> list[float]:
    """The past busbw figures (GB/s) comparable with this run's: same backend, same group size, measured."""
    return [
        p.peak_busbw_gbps
        for p in points
        if p.backend == backend and p.nranks == nranks and p.peak_busbw_gbps is not None
    ]


def _history(
    db_url: str | None, hosts: list[str], collective: str, backend: CurveBackend
) -> dict[str, list[float]]:
    """Each host's recent busbw (GB/s) for ``collective``; empty when the store is unavailable."""
    from fleetdx.orchestrator.store import Store, StoreError

    try:
        with Store.open(db_url) as store:
            return {h: history_values(store.recent_busbw(h, collective), backend) for h in hosts}
    except StoreError as e:  # edge: history is optional; say why it is missing
        err_console.print(f"[yellow]note:[/] no history from the store ({escape(str(e))})", highlight=False)
        return {}


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
        nodes: str = typer.Option(
            None, "--nodes", help="Slurm hostlist of Ray hosts to measure (default: all)."
        ),
        schedule: str = typer.Option("localise", "--schedule", help="roundrobin | quick | localise"),
        collective: list[str] = typer.Option(  # noqa: B008 (typer's declaration style)
            ["all_reduce"],
            "--collective",
            help="all_reduce | all_gather | reduce_scatter | sendrecv (repeatable)",
        ),
        sizes: str = typer.Option(
            "4M,16M,64M", "--sizes", help="Message sizes (K/M/G = 1024^n); the largest judges."
        ),
        backend: str = typer.Option(
            None, "--backend", help="nccl | gloo (default: nccl when every node has a GPU)"
        ),
        iters: int = typer.Option(10, "--iters", min=1, help="Timed iterations per size."),
        timeout: float = typer.Option(
            120.0, "--timeout", callback=finite_positive, help="Seconds per round before a group is a hang."
        ),
        reference: float = typer.Option(
            None, "--reference-gbps", callback=finite_positive, help="Expected busbw of this SKU (GB/s)."
        ),
        address: str = typer.Option(
            None,
            "--ray-address",
            "--address",
            help="Ray cluster address, HOST:PORT or auto (default: RAY_ADDRESS, else a local Ray).",
        ),
        db: str = typer.Option(
            None, "--db", help="Database URL for history and saving (default: the store's)."
        ),
        save: bool = typer.Option(True, "--save/--no-save", help="Save the report and curves to the store."),
        as_json: bool = typer.Option(False, "--json", help="Print only the RunReport JSON."),
    ) -> None:
        """Measure collective bandwidth between nodes and name slow ones (exit code: Nagios verdict)."""
        import ray

        from fleetdx.orchestrator.cluster.collective import TORCH_COLLECTIVES, Backend, ray_hosts
        from fleetdx.orchestrator.preflight.bandwidth import run_bandwidth
        from fleetdx.orchestrator.report import Schedule
        from fleetdx.orchestrator.scheduler.targets import expand_hostlist

        try:
            sched = Schedule(schedule)
            colls = [Collective(c) for c in collective]
            if bad := [c.value for c in colls if c not in TORCH_COLLECTIVES]:
                raise ValueError(f"not measured by the torch.distributed probe: {', '.join(bad)}")
            be = Backend(backend) if backend else None
            hosts = expand_hostlist(nodes) if nodes else None
            size_list = parse_sizes(sizes)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        started_ray = False
        if not ray.is_initialized():
            from fleetdx.orchestrator.cluster.connect import connect

            connect(address, default="auto")
            started_ray = True
        try:
            known = ray_hosts()
            names = hosts or [h.name for h in known]
            chosen = [h for h in known if h.name in names]  # run_bandwidth's default backend is theirs
            be = be or (Backend.NCCL if all(h.gpus for h in chosen) else Backend.GLOO)
            policy = DetectionPolicy.for_backend(be.curve)
            history = _history(db, names, colls[0].value, be.curve) if (save or db) else {}
            report = run_bandwidth(
                hosts,
                schedule=sched,
                collectives=colls,
                sizes=size_list,
                backend=be,
                policy=policy,
                iters=iters,
                timeout_s=timeout,
                reference_gbps=reference,
                history=history,
            )
        finally:
            if started_ray:
                ray.shutdown()
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
