"""A root command group with only some of fleetdx's command modules, for CLI tests: the real root group class
(usage errors exit 3), without importing every command."""

from __future__ import annotations

from types import ModuleType

import typer

from fleetdx.orchestrator.cli.main import NagiosGroup


def cli_app(*modules: ModuleType) -> typer.Typer:
    """A ``fleetdx``-like app with the commands of ``modules`` (each has ``register(app)``)."""
    app = typer.Typer(cls=NagiosGroup)
    for module in modules:
        module.register(app)

    @app.callback()
    def _root() -> None:
        """test root"""

    return app
