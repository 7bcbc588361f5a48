"""``fleetdx collect --out DIR [--level quick|standard|full] [--nccl-tests-dir PATH] [--dcgm LEVEL] [--replace]``:
write this node's bundle.

Runs the registered node commands (probes/commands.py) through the one runner, reads the sysfs facts, and
writes one raw file per command plus ``meta.json``. Commands that cannot run here (no GPU, no ``numactl``,
``dmesg`` not permitted) are recorded ``skipped`` with the reason. Prints a table of what ran (``--json``: the
meta as JSON). ``--out`` must be new or empty; ``--replace`` replaces a bundle written there before (only the
files its meta.json lists are removed). Exit code 0 when the bundle was written, whatever the commands did
(judging them is ``analyze``'s job); 2 when it could not be written.

``--dcgm LEVEL`` (opt-in) adds ``dcgmi diag -r LEVEL -j`` and ``dcgmi health -c`` under hard deadlines
(:data:`fleetdx.probes.catalog.DCGM_DIAG_TIMEOUT_S`). Level 1 takes seconds; 2 about two minutes and 3 about
half an hour, so they belong to a retest of a drained node, never to a prolog. Without ``dcgmi`` they are
recorded ``skipped``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import computed_default
from fleetdx.probes.bundle import BundleData, check_target, collect, write_bundle
from fleetdx.probes.contracts import Level, RunStatus
from fleetdx.probes.runner import SubprocessRunner

STATUS_STYLE = {
    RunStatus.OK: "green",
    RunStatus.FAILED: "red",
    RunStatus.TIMEOUT: "bold red",
    RunStatus.SKIPPED: "yellow",
}


def render_collect(data: BundleData, out: Path) -> None:
    """A table of the bundle's commands: file, status, seconds, reason."""
    table = Table(title=f"bundle {out} (host {data.host}, level {data.level.value if data.level else '-'})")
    for col in ("file", "status", "s", "reason"):
        table.add_column(col, justify="right" if col == "s" else "left")
    for c in data.commands:
        dur = f"{c.duration_s:.3f}" if c.duration_s is not None else "-"
        table.add_row(c.file, f"[{STATUS_STYLE[c.status]}]{c.status.value}[/]", dur, escape(c.reason or ""))
    console.print(table)


def register(app: typer.Typer) -> None:
    @app.command("collect")
    @handle_errors
    def collect_command(
        out: Annotated[Path, typer.Option("--out", "-o", help="Bundle directory to write (created if needed).")],
        level: Annotated[
            Level,
            typer.Option(
                "--level",
                help=(
                    "quick: state only; standard/full: + GPU micro-benchmark, intra-node nccl-tests and two"
                    " RDMA port-counter samples."
                ),
            ),
        ] = Level.QUICK,
        host: Annotated[
            str | None, typer.Option("--host", help="Host name to record." + computed_default("this host's name"))
        ] = None,
        nccl_tests_dir: Annotated[
            Path | None,
            typer.Option(
                "--nccl-tests-dir", help="Where all_reduce_perf is." + computed_default("$NCCL_TESTS_HOME, then PATH")
            ),
        ] = None,
        replace: Annotated[
            bool, typer.Option("--replace", help="Replace the fleetdx bundle already in --out.")
        ] = False,
        dcgm: Annotated[
            int | None,
            typer.Option(
                "--dcgm",
                min=1,
                max=3,
                metavar="LEVEL",
                help="Also run dcgmi diag -r LEVEL and dcgmi health -c (1: seconds; 2, 3: minutes, for a retest).",
            ),
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the bundle meta as JSON only.")] = False,
    ) -> None:
        """Write a bundle of this node's raw command outputs and sysfs facts to --out."""
        from fleetdx.orchestrator.preflight.run import node_nccl_binary  # the same lookup as pre-flight's node task

        check_target(out, replace=replace)  # before minutes of probes, not after
        nccl = node_nccl_binary(level, str(nccl_tests_dir) if nccl_tests_dir else None)
        data = collect(SubprocessRunner(), level, host, nccl_binary=nccl, dcgm_level=dcgm)
        write_bundle(data, out, replace=replace)
        if json_out:
            print_json(data.model_copy(update={"files": {}}))
        else:
            render_collect(data, out)
