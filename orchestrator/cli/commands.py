"""The explicit list of CLI command modules; each has ``register(app: typer.Typer) -> None``."""

from __future__ import annotations

from fleetdx.orchestrator.cli import (
    bandwidth_cmd,
    collect_cmd,
    db_cmd,
    k8s_cmd,
    parse_cmd,
    place_cmd,
    postmortem_cmd,
    preflight_cmd,
    serve_cmd,
    steps_cmd,
    token_cmd,
    topo_cmd,
)

MODULES = [collect_cmd, parse_cmd, preflight_cmd, topo_cmd, place_cmd, bandwidth_cmd, db_cmd, serve_cmd, token_cmd]
MODULES.append(steps_cmd)  # fleetdx steps (issue 13)
MODULES.append(k8s_cmd)  # fleetdx k8s mark (issue 11)
MODULES.append(postmortem_cmd)  # fleetdx postmortem (issue 12)
