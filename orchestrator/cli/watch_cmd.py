"""``fleetdx watch PATH... [--json] [--interval S] [--hang-factor K] [--hang-min-s S] [--until-idle S | --max-s S]``:
follow a running job and name a straggler, a hang, a slowdown or data stalls while it runs.

Exit codes (Nagios, on exit: the worst finding emitted): 0 nothing found, 1 a warning (a straggler, a
slowdown, data stalls, an NCCL warning line), 2 a critical finding (a hang, a watchdog timeout, an XID), 3 a
usage error, a path that does not exist, or nothing read at all.
"""

from __future__ import annotations

import os
import signal
import socket
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
from fleetdx.orchestrator.cli.conventions import computed_default
from fleetdx.probes.errors import ConfigError

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
        ras_host: str = typer.Option(
            None,
            "--ras-host",
            metavar="HOST",
            help="On a hang, query NCCL's RAS (ncclras, NCCL 2.24+) on this node (one of the job's)."
            + computed_default("this node"),
        ),
        ras: bool = typer.Option(True, "--ras/--no-ras", help="On a hang, query NCCL's RAS for unresponsive ranks."),
        report_to: str = typer.Option(
            None,
            "--report-to",
            metavar="URL",
            help="Push the job's live state to this fleetdx service (its fleet and job pages show it) every "
            "10 s and at each finding; needs --token-file and a job id.",
        ),
        token_file: Path = typer.Option(  # noqa: B008 (typer's declaration style)
            None, "--token-file", help="A file holding a write token of the service (fleetdx token create)."
        ),
        job: str = typer.Option(
            None, "--job", metavar="ID", help="The job's id on the service." + computed_default("$SLURM_JOB_ID")
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
            ras=ras,
            ras_host=ras_host,
        )

        reporter = _reporter(report_to, token_file, job, as_json)
        try:
            raise typer.Exit(_run(req, as_json, len(paths), reporter))
        finally:
            if reporter is not None:
                reporter.close()


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


class LiveReporter:
    """Pushes the watched job's live state to the service from a thread of its own (a slow or dead service
    never delays the watch): the newest state every :data:`REPORT_EVERY_S` seconds, at once after a finding,
    and once more at the end. A push that fails is said once per reason on stderr; the watch goes on."""

    def __init__(self, url: str, token: str, job_id: str, note: Any) -> None:
        self.url, self.token, self.job_id, self.note = url, token, job_id, note
        self.started = time.time()
        self.host = socket.gethostname()
        self._latest: Any = None
        self._urgent = threading.Event()
        self._stop = threading.Event()
        self._said: set[str] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="fleetdx-live-report", daemon=True)
        self._thread.start()

    def offer(self, watcher: Any, new_findings: int) -> None:
        with self._lock:
            self._latest = watcher.live(self.job_id, self.host, self.started)
        if new_findings:
            self._urgent.set()

    def _push(self) -> None:
        from fleetdx.orchestrator.service.client import push_live

        with self._lock:
            record, self._latest = self._latest, None
        if record is None:
            return
        why = push_live(self.url, self.token, record)
        if why is not None and why not in self._said:
            self._said.add(why)
            self.note("problem", f"live state not pushed: {why}")

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._urgent.wait(REPORT_EVERY_S)
            self._urgent.clear()
            self._push()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the thread and push the last state (bounded)."""
        self._stop.set()
        self._urgent.set()
        self._thread.join(timeout_s)
        self._push()


#: seconds between two pushes of the live state (a finding pushes at once)
REPORT_EVERY_S = 10.0


def _reporter(url: str | None, token_file: Path | None, job: str | None, as_json: bool) -> LiveReporter | None:
    """The live reporter ``--report-to`` asks for, ``None`` without it. Raises ConfigError (a usage error): no
    token file, an unreadable or empty one, no job id."""
    if url is None:
        if token_file is not None or job is not None:
            raise ConfigError("--token-file and --job go with --report-to URL")
        return None
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--report-to: {url!r} is not an http(s) URL")
    if token_file is None:
        raise ConfigError(
            "--report-to needs --token-file FILE (a write token: fleetdx token create NAME --scope write)"
        )
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise ConfigError(f"--token-file: {token_file}: {e.strerror}") from None
    job_id = job or os.environ.get("SLURM_JOB_ID")
    if not token or not job_id:
        raise ConfigError("--report-to needs a token in --token-file and a job id (--job ID, or $SLURM_JOB_ID)")

    def note(_kind: str, m: str) -> None:
        err_console.print(f"[bold yellow]watch:[/] {escape(m)}", highlight=False, soft_wrap=True)

    return LiveReporter(url, token, job_id, note)


def _run(req: Any, as_json: bool, n_paths: int, reporter: LiveReporter | None = None) -> int:
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
        result = watcher.run(stop, reporter.offer if reporter is not None else None)
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
