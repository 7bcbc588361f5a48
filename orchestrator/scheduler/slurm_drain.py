"""What the periodic checks ask of and do to one Slurm node: its state and drain reason (``scontrol show node
NODE --oneliner``), a drain with fleetdx's reason, and a resume; each through a
:class:`~fleetdx.probes.runner.Runner` (the one module that spawns processes).

Whose drain is it: Slurm keeps one free-text reason per node. fleetdx's own drains start with
:data:`FLEETDX_REASON_PREFIXES` (``fleetdx: CODE subject`` from ``slurm/healthcheck.sh``, ``fleetdx preflight:
...`` from ``slurm/prolog.sh``); any other reason is an administrator's, as NHC tells its own drains from
others (its reason prefix ``NHC:``).
"""

from __future__ import annotations

from fleetdx.orchestrator.scheduler.slurm_nodes import SchedulerUnavailable, _ask
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.slurm_nodes import SlurmNode, parse_scontrol_nodes
from fleetdx.probes.runner import Runner

#: the reasons fleetdx drains with (healthcheck.sh, prolog.sh); anything else is an administrator's
FLEETDX_REASON_PREFIXES = ("fleetdx: ", "fleetdx preflight: ")
#: bytes of a drain reason Slurm's accounting keeps of a node event
REASON_MAX_BYTES = 255


def drained(node: SlurmNode) -> bool:
    """Whether Slurm keeps ``node`` out of scheduling by a drain (``IDLE+DRAIN``, ``MIXED+DRAIN``, ``DRAINED``)."""
    return "DRAIN" in node.flags or node.state in ("DRAIN", "DRAINED", "DRAINING")


def drained_by_fleetdx(node: SlurmNode) -> bool:
    """Whether ``node`` is drained with one of fleetdx's reasons (:data:`FLEETDX_REASON_PREFIXES`)."""
    return drained(node) and (node.reason or "").startswith(FLEETDX_REASON_PREFIXES)


def drain_reason(cause: str) -> str:
    """``fleetdx: CAUSE`` cut to :data:`REASON_MAX_BYTES` bytes (UTF-8, at a character boundary)."""
    text = " ".join(f"fleetdx: {cause}".split())
    data = text.encode()
    if len(data) <= REASON_MAX_BYTES:
        return text
    return data[: REASON_MAX_BYTES - 3].decode(errors="ignore").rstrip() + "..."


def slurm_node(runner: Runner, name: str, timeout_s: float = 30.0) -> SlurmNode:
    """Node ``name`` as Slurm reports it.

    Raises:
        SchedulerUnavailable: scontrol is missing, fails (an unknown node) or times out, or prints no such node.
        ParseError: its output does not parse.
    """
    nodes = parse_scontrol_nodes(_ask(runner, ("scontrol", "show", "node", name, "--oneliner"), timeout_s))
    for node in nodes:
        if node.name == name:
            return node
    raise SchedulerUnavailable(f"scontrol show node {name}: no such node in its answer")


def drain(runner: Runner, name: str, reason: str, timeout_s: float = 30.0) -> None:
    """``scontrol update NodeName=NAME State=DRAIN Reason=REASON``. Raises :class:`SchedulerUnavailable`."""
    _ask(runner, ("scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"), timeout_s)


def resume(runner: Runner, name: str, timeout_s: float = 30.0) -> None:
    """``scontrol update NodeName=NAME State=RESUME``. Raises :class:`SchedulerUnavailable`."""
    _ask(runner, ("scontrol", "update", f"NodeName={name}", "State=RESUME"), timeout_s)


__all__ = [
    "FLEETDX_REASON_PREFIXES",
    "ParseError",
    "SchedulerUnavailable",
    "drain",
    "drain_reason",
    "drained",
    "drained_by_fleetdx",
    "resume",
    "slurm_node",
]
