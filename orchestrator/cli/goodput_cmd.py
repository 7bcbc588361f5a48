"""``fleetdx goodput PATH... [--start T] [--end T] [--job ID] [--json]``: where did the job's wall time go?

The goodput ledger of :mod:`fleetdx.orchestrator.steps.goodput` (productive time, and badput: start-up, data
stalls, checkpoint saves, work lost to restarts, recovery between attempts, other), per job and per attempt,
from the ranks' StepTimer logs. Exit codes: 0 the ledger was made (it judges nothing), 3 no usable input or a
usage error (one line on stderr).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from fleetdx.orchestrator.cli.common import console, err_console, handle_errors, print_json
from fleetdx.orchestrator.cli.conventions import computed_default
from fleetdx.probes.errors import ConfigError


def _when(text: str | None, what: str) -> float | None:
    """Unix seconds from ``text``: a number, or an ISO 8601 time (UTC when it names no zone)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"--{what}: {text!r} is neither Unix seconds nor an ISO 8601 time") from None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%m-%d %H:%M:%S")


def _show(led: Any) -> None:
    wall = led.wall_s or 1.0
    t = Table(title=f"goodput {led.goodput_pct:.1f}% of {led.wall_s:.0f} s ({led.ranks} ranks)", header_style="bold")
    t.add_column("where the time went")
    t.add_column("seconds", justify="right")
    t.add_column("% wall", justify="right")
    rows = [("productive", led.productive_s), *((b.value, v) for b, v in led.badput_s.items())]
    for name, v in rows:
        v = v if abs(v) >= 0.05 else 0.0
        t.add_row(name, f"{v:.1f}", f"{100 * v / wall:.1f}")
    console.print(t)
    a = Table(title="attempts (UTC)", header_style="bold")
    for col in ("#", "start", "steps", "productive", "startup", "lost", "recovery"):
        a.add_column(col, justify="right")
    for at in led.attempts:
        b = at.badput_s
        a.add_row(
            str(at.index),
            _clock(at.start_unix_s),
            f"{at.first_step}-{at.last_step}",
            f"{at.productive_s:.1f}",
            f"{b['startup']:.1f}",
            f"{b['lost_work']:.1f} ({at.lost_steps})",
            f"{b['recovery']:.1f}",
        )
    console.print(a)
    console.print(f"lost work counted by {led.lost_work_rule}", highlight=False)
    for n in led.notes:
        err_console.print(f"[yellow]note:[/] {n}", highlight=False, soft_wrap=True)


def _load(paths: list[Path]) -> list[Any]:
    """The StepTimer logs among ``paths`` (each one not used named on stderr). Raises ConfigError: none."""
    from fleetdx.orchestrator.steps.load import expand, load_steplog
    from fleetdx.probes.errors import ParseError
    from fleetdx.probes.rawfile import RawFileError

    logs = []
    for p in expand(paths):
        if not p.name.endswith(".jsonl"):
            err_console.print(f"not used: {p} (not a StepTimer log *.jsonl)", highlight=False, soft_wrap=True)
            continue
        try:
            logs.append(load_steplog(p))
        except (ParseError, RawFileError) as e:
            err_console.print(f"not used: {e}", highlight=False, soft_wrap=True)
    if not logs:
        raise ConfigError("no StepTimer log could be read: nothing to account")
    return logs


def register(app: typer.Typer) -> None:
    @app.command("goodput")
    @handle_errors
    def goodput(
        paths: list[Path] = typer.Argument(  # noqa: B008 (typer's declaration style)
            ..., help="StepTimer logs (steps-rank-N.jsonl, one per rank, appended across restarts) or folders of them."
        ),
        start: str = typer.Option(
            None,
            "--start",
            metavar="TIME",
            help="The job's start: Unix seconds or ISO 8601." + computed_default("its first process's start"),
        ),
        end: str = typer.Option(
            None, "--end", metavar="TIME", help="The job's end." + computed_default("the end of its last step")
        ),
        job: str = typer.Option(
            None,
            "--job",
            metavar="ID",
            help="A Slurm job id: its start and end from scontrol or sacct when --start/--end are not given.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the ledger as JSON."),
    ) -> None:
        """Where did the job's wall time go? Goodput and badput, per job and per attempt.

        Productive step time against start-up, data stalls, checkpoint saves, work lost to a restart (steps run
        again), recovery between attempts and the rest, adding up to the wall time (categories of Google's
        ml-goodput-measurement). Give StepTimer a step number (timer.step(n)) so a resumed job's lost work is
        counted exactly.

        Examples: fleetdx goodput steps/ ; fleetdx goodput steps/ --job 4242 --json

        Exit: 0 the ledger was made, 3 no StepTimer log could be read (or a usage error).
        """
        from fleetdx.orchestrator.steps.goodput import GoodputError, ledger

        t0, t1 = _when(start, "start"), _when(end, "end")
        slurm_start: float | None = None
        if job is not None and (t0 is None or t1 is None):
            from fleetdx.orchestrator.scheduler.job import load_slurm_job

            j = load_slurm_job(job)
            t1 = t1 if t1 is not None else j.end_time
            slurm_start = j.start_time if t0 is None else None
        logs = _load(paths)
        first = min(r.start_unix_s for log in logs for r in log.records)
        if slurm_start is not None and slurm_start <= first:
            t0 = slurm_start
        elif slurm_start is not None:  # a requeued job's StartTime is its last attempt's
            err_console.print(
                f"note: job {job}'s StartTime is after its first step (requeued?): the start is read from the logs",
                highlight=False,
                soft_wrap=True,
            )
        try:
            led = ledger(logs, t0, t1)
        except GoodputError as e:
            raise ConfigError(str(e)) from None
        if as_json:
            print_json(led)
        else:
            _show(led)
