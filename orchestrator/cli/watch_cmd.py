"""``fleetdx watch PATH... [--json] [--interval S] [--hang-factor K] [--hang-min-s S] [--until-idle S | --max-s S]``:
follow a running job and name a straggler, a hang, a slowdown or data stalls while it runs.

Exit codes (Nagios, on exit: the worst finding emitted): 0 nothing found, 1 a warning (a straggler, a
slowdown, data stalls, an NCCL warning line), 2 a critical finding (a hang, a watchdog timeout, an XID), 3 a
usage error, a path that does not exist, or nothing read at all.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import typer
from rich.console import Group
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from fleetdx.orchestrator.cli.common import console, err_console, finite_positive, handle_errors, request_of

#: the header of the live table; each finding is a row of these columns, its message wrapped under it
HEADER = f"{'time':<8} {'severity':<8} {'code':<19} subject"


def _row(f: Any) -> Group:
    """One finding: its row (time, severity, code, subject), then its message indented under it."""
    style = {"critical": "bold red", "warning": "yellow"}.get(f.severity.value, "")
    sev = f"{f.severity.value:<8}"
    head = Text.assemble(f"{time.strftime('%H:%M:%S')} ", (sev, style), f" {f.code.value:<19} {f.subject or 'job'}")
    return Group(head, Padding(Text(f.message), (0, 0, 0, 2)))


def register(app: typer.Typer) -> None:
    @app.command("watch")
    @handle_errors
    def watch(  # noqa: PLR0913 (a command: one parameter per option, as typer declares them)
        paths: list[Path] = typer.Argument(  # noqa: B008 (typer's declaration style)
            ...,
            help="Folders of StepTimer logs (steps-rank-N.jsonl, one per rank: new files are picked up), training "
            "logs and the job's output (*.log, *.out, *.err, *.txt: step times, NCCL, watchdog, XID lines), "
            "kernel logs (a name with dmesg, kern or journal), or such files.",
        ),
        as_json: bool = typer.Option(False, "--json", help="One finding per line as JSON, as soon as found."),
        interval: float = typer.Option(
            1.0, "--interval", callback=finite_positive, help="Seconds between two reads of the files."
        ),
        hang_factor: float = typer.Option(
            20.0,
            "--hang-factor",
            callback=finite_positive,
            help="A hang: no rank completed a step for K x the median step (or --hang-min-s, if longer).",
        ),
        hang_min_s: float = typer.Option(
            10.0, "--hang-min-s", callback=finite_positive, help="The shortest wait that makes a hang, in seconds."
        ),
        until_idle: float = typer.Option(
            None, "--until-idle", callback=finite_positive, help="Stop once nothing new was read for S seconds."
        ),
        max_s: float = typer.Option(None, "--max-s", callback=finite_positive, help="Stop after S seconds."),
        dump: bool = typer.Option(
            True, "--dump/--no-dump", help="On a hang, ask the ranks' StepTimers for Flight Recorder dumps."
        ),
        dump_wait: float = typer.Option(
            30.0, "--dump-wait", callback=finite_positive, help="Seconds to wait for the dumps after a hang."
        ),
    ) -> None:
        """Follow a running job: name a straggler rank, a hang, a slowdown or data stalls as they happen.

        Reads the StepTimer logs (fleetdx.steps.StepTimer) as the ranks write them, and the job's output and
        kernel logs for NCCL errors, watchdog timeouts and XIDs. A straggler is named within a few steps of its
        onset (its stage against its peers' at each step, confirmed over 3 steps); a hang once no rank completed
        a step for max(K x the median step, S seconds): the ranks that stopped first are named and every rank's
        StepTimer is asked for a Flight Recorder dump, analysed as fleetdx postmortem --fr does. Runs until
        Ctrl-C (or --until-idle / --max-s).

        Examples: fleetdx watch steps/ ; fleetdx watch steps/ slurm-1234.out --json --until-idle 600

        Exit: the worst finding: 0 none, 1 warning, 2 critical (a hang); 3 usage error or nothing read.
        """
        from fleetdx.orchestrator.watch.run import WatchRequest

        if until_idle is not None and max_s is not None:
            raise typer.BadParameter("give --until-idle or --max-s, not both", param_hint="--until-idle")
        req = request_of(
            WatchRequest,
            paths=paths,
            interval_s=interval,
            hang_factor=hang_factor,
            hang_min_s=hang_min_s,
            until_idle_s=until_idle,
            max_s=max_s,
            dump=dump,
            dump_wait_s=dump_wait,
        )

        raise typer.Exit(_run(req, as_json, len(paths)))


def notify_hang(f: Any) -> bool:
    """A ``job.hang`` webhook event (:mod:`fleetdx.orchestrator.notify`; ``$FLEETDX_WEBHOOKS``) for a
    ``STEP_HANG`` finding, sent in the background (the process waits for it at exit, bounded); True when queued.
    Any other finding sends nothing."""
    if getattr(getattr(f, "code", None), "value", None) != "STEP_HANG":
        return False
    from fleetdx.orchestrator.notify import Event, EventKind, notify

    return notify(
        Event(
            kind=EventKind.JOB_HANG,
            summary=f"{f.subject}: {f.message}" if f.subject else f.message,
            verdict="CRITICAL",
            hosts=list(f.nodes),
            codes=[f.code.value],
            details={"rank": f.rank, "subject": f.subject},
        )
    )


def _run(req: Any, as_json: bool, n_paths: int) -> int:
    """Watch until stopped (SIGINT/SIGTERM end it cleanly); the exit code."""
    from fleetdx.orchestrator.watch.run import Watcher

    def emit(f: Any) -> None:
        notify_hang(f)
        if as_json:
            sys.stdout.write(f.model_dump_json() + "\n")
            sys.stdout.flush()
        else:
            console.print(_row(f))

    def note(kind: str, m: str) -> None:
        if kind == "problem":  # stderr is for problems only
            err_console.print(f"[bold yellow]watch:[/] {escape(m)}", highlight=False, soft_wrap=True)
        elif not as_json:
            console.print(f"[dim]watch:[/] {escape(m)}", highlight=False, soft_wrap=True)

    watcher = Watcher(req, emit, note)
    if not as_json:
        console.print(
            f"watching {len(watcher.sources.files)} files in {n_paths} paths (every {req.interval_s:g} s; "
            "Ctrl-C to stop)",
            highlight=False,
        )
        console.print(HEADER, style="bold", highlight=False)
    stop = threading.Event()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = watcher.run(stop)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if not as_json:
        console.print(
            f"{result.steps_read} steps and {result.events_read} log events read from {result.files} files; "
            f"{len(result.findings)} findings: {result.verdict.name}",
            highlight=False,
        )
    return int(result.exit_code)
