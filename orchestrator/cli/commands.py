"""The CLI's commands: each name and the module that defines it (a module has ``register(app: typer.Typer)``).

The table lets ``fleetdx COMMAND`` import only COMMAND's module (the root group loads a command when click asks
for it, :class:`fleetdx.orchestrator.cli.main.NagiosGroup`): a prolog's ``fleetdx preflight`` does not pay for
the server, the HTML reports or the Kubernetes client. ``fleetdx --help`` loads them all.
tests/test_cli_lazy.py checks that the table names every command the modules register, and nothing else.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: command name -> module under ``fleetdx.orchestrator.cli``, in the order ``fleetdx --help`` lists them: the
#: three jobs first, then the tools around them
COMMANDS: dict[str, str] = {
    "preflight": "preflight_cmd",
    "analyze": "preflight_cmd",
    "postmortem": "postmortem_cmd",
    "steps": "steps_cmd",
    "goodput": "goodput_cmd",
    "report": "report_cmd",
    "watch": "watch_cmd",
    "place": "place_cmd",
    "topo": "topo_cmd",
    "bandwidth": "bandwidth_cmd",
    "codes": "codes_cmd",
    "collect": "collect_cmd",
    "parse": "parse_cmd",
    "db": "db_cmd",
    "history": "db_cmd",
    "nodes": "nodes_cmd",
    "serve": "serve_cmd",
    "token": "token_cmd",
    "k8s": "k8s_cmd",
}


def module_of(name: str) -> ModuleType:
    """The module that defines command ``name`` (imported now). Raises KeyError for an unknown name."""
    return importlib.import_module(f"fleetdx.orchestrator.cli.{COMMANDS[name]}")


def modules() -> list[ModuleType]:
    """Every command module, each once, in :data:`COMMANDS` order."""
    return [importlib.import_module(f"fleetdx.orchestrator.cli.{m}") for m in dict.fromkeys(COMMANDS.values())]
