"""Entry point of the ``fleetdx`` command.

Each command group lives in its own module with a ``register(app)`` function; heavy libraries (Ray, torch,
SQLAlchemy) are imported inside the commands that need them, so ``fleetdx parse`` starts fast.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

import typer
import typer.main
from rich.markup import escape
from typer.core import TyperGroup

from fleetdx import __version__
from fleetdx.orchestrator.cli import conventions
from fleetdx.orchestrator.cli.common import EXIT_UNKNOWN, err_console, missing_extra


class NagiosGroup(TyperGroup):
    """The root command group: it applies the option conventions (:mod:`fleetdx.orchestrator.cli.conventions`)
    to every command; whatever goes wrong before or outside a verdict exits 3 (UNKNOWN), never 2
    (click's usage-error code, which a batch script would read as CRITICAL): bad options and arguments,
    click's own errors, and an unexpected exception (a bug; ``FLEETDX_DEBUG=1`` shows its traceback)."""

    def list_commands(self, ctx: Any) -> list[str]:
        """Every command, in :data:`~fleetdx.orchestrator.cli.commands.COMMANDS` order (none imported here)."""
        from fleetdx.orchestrator.cli.commands import COMMANDS

        return [*COMMANDS, *sorted(set(self.commands) - set(COMMANDS))]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """Command ``cmd_name``, its module imported and registered the first time it is asked for."""
        if cmd_name not in self.commands:
            from fleetdx.orchestrator.cli.commands import COMMANDS, module_of

            if cmd_name not in COMMANDS:
                return None
            sub = typer.Typer()
            sub.callback()(_noop)  # a group, even for a module of one command
            module_of(cmd_name).register(sub)
            for name, cmd in getattr(typer.main.get_command(sub), "commands", {}).items():
                conventions.apply(cmd)
                self.add_command(cmd, name)
        return self.commands.get(cmd_name)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        conventions.apply(self)  # the help table is installed when help is shown (conventions._help_table_on_help)
        try:
            rv = super().main(*args, **{**kwargs, "standalone_mode": False})
        except typer.TyperException as e:  # click's usage errors (typer vendors click): shown as click shows them
            from typer import rich_utils

            rich_utils.rich_format_error(e)  # type: ignore[arg-type]
            rv = EXIT_UNKNOWN
        except typer.Abort:
            err_console.print("aborted", highlight=False)
            rv = 130
        except ModuleNotFoundError as e:  # a command of an extra this install lacks, else a bug
            if os.environ.get("FLEETDX_DEBUG"):
                raise
            line = missing_extra(e)
            err_console.print(
                f"[bold red]error:[/] {escape(line)}" if line else f"[bold red]internal error:[/] {escape(str(e))}",
                highlight=False,
                soft_wrap=True,
            )
            rv = EXIT_UNKNOWN
        except Exception as e:  # noqa: BLE001 - the edge: a bug must still end as UNKNOWN with one line
            if os.environ.get("FLEETDX_DEBUG"):
                raise
            err_console.print(
                f"[bold red]internal error:[/] {type(e).__name__}: {e} (a fleetdx bug; FLEETDX_DEBUG=1 shows "
                "the traceback)",
                highlight=False,
                soft_wrap=True,
            )
            rv = EXIT_UNKNOWN
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    name="fleetdx",
    help=(
        "Diagnostics for distributed GPU training.\n\n"
        "Pre-flight an allocation before training (preflight); explain a failed job from its logs, its nodes' "
        "kernel logs and bundles (postmortem, analyze) or a slow one from its profiler traces and step timers "
        "(steps); advise placement (place, topo advise); serve reports, placement and metrics over HTTP (serve); "
        "put verdicts on Kubernetes nodes (k8s mark).\n\n"
        "Verdict commands exit with the Nagios convention: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. Usage and "
        "input errors exit 3, never 2."
    ),
    no_args_is_help=True,
    cls=NagiosGroup,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fleetdx {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """fleetdx: pre-flight, postmortem and placement advice for GPU clusters."""


_registered = False


def _register() -> None:
    """Add every command module's commands to ``app`` now, once per process (tests call it from several
    modules; ``fleetdx`` itself loads a command only when it runs it, :meth:`NagiosGroup.get_command`)."""
    global _registered
    if _registered:
        return
    from fleetdx.orchestrator.cli import commands

    for module in commands.modules():
        module.register(app)
    _registered = True


#: the collector's first-generation threshold in the ``fleetdx`` process (:func:`main`; Python's default is 700)
GC_THRESHOLD = 10_000


def _noop() -> None:
    """The callback that makes a command module's commands a group (:meth:`NagiosGroup.get_command`)."""


def main() -> None:
    """The ``fleetdx`` script (and ``python -m fleetdx``): runs the command line, then ends the process."""
    # A command's start-up makes tens of thousands of long-lived objects (its modules, classes, pydantic models,
    # numpy) and almost no cyclic garbage: at Python's default of a collection every 700 container allocations
    # it ran about 130 collections before any work (about 7% of a prolog's pre-flight or of steps on one trace,
    # bench/prolog.py). One every 10,000 still bounds cyclic garbage in the long-running commands (serve, watch).
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, older, oldest)
    try:
        app()
    finally:
        # The process ends here. What is still alive (every module, class and pydantic model the command
        # loaded: tens of thousands of objects, most in reference cycles) is left to the operating system
        # instead of being taken apart by the interpreter's last garbage collection, which cost about 0.05 s of
        # CPU, a tenth of a Slurm prolog's pre-flight (bench/prolog.py). atexit handlers (logging, Ray, thread
        # pools) still run and the standard streams are still flushed; only cyclic garbage left at exit is not
        # finalised. Not in NagiosGroup.main: tests run commands in their own long-lived process.
        gc.freeze()


if __name__ == "__main__":
    main()
