"""Entry point of the ``fleetdx`` command.

Each command group lives in its own module with a ``register(app)`` function; heavy libraries (Ray, torch,
SQLAlchemy) are imported inside the commands that need them, so ``fleetdx parse`` starts fast.
"""

from __future__ import annotations

import typer

from fleetdx import __version__

app = typer.Typer(
    name="fleetdx",
    help=(
        "Diagnostics for distributed GPU training.\n\n"
        "Pre-flight an allocation before training (preflight), explain a failed or slow job from collected "
        "bundles (analyze), and advise placement (topo advise, topo cluster).\n\n"
        "Verdict commands exit with the Nagios convention: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."
    ),
    no_args_is_help=True,
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


def _register() -> None:
    from fleetdx.orchestrator.cli import commands

    for module in commands.MODULES:
        module.register(app)


def main() -> None:
    _register()
    app()


if __name__ == "__main__":
    main()
