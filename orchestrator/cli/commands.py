"""The explicit list of CLI command modules; each has ``register(app: typer.Typer) -> None``."""

from __future__ import annotations

from fleetdx.orchestrator.cli import (
    bandwidth_cmd,
    codes_cmd,
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

#: in the order ``fleetdx --help`` lists them: the three jobs first, then the tools around them
MODULES = [
    preflight_cmd,  # preflight, analyze
    postmortem_cmd,
    steps_cmd,
    place_cmd,
    topo_cmd,
    bandwidth_cmd,
    codes_cmd,
    collect_cmd,
    parse_cmd,
    db_cmd,  # db ..., history
    serve_cmd,
    token_cmd,
    k8s_cmd,
    codes_cmd,
]
