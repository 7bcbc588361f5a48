"""Live Slurm sources for placement: the nodes (``scontrol show node --details --oneliner``: states, partitions,
GPUs and GPUs in use) and the switch tree (``scontrol show topology``), run through a
:class:`~fleetdx.probes.runner.Runner` and parsed by the pure parsers
(:func:`fleetdx.probes.parsers.slurm_nodes.parse_scontrol_nodes`,
:func:`fleetdx.topology.cluster.parse_topology_conf`)."""

from __future__ import annotations

from fleetdx.probes.errors import ConfigError
from fleetdx.probes.parsers.slurm_nodes import SlurmNode, parse_scontrol_nodes
from fleetdx.probes.runner import Runner
from fleetdx.topology.cluster import ClusterTopology, parse_topology_conf

NODES_ARGV = ("scontrol", "show", "node", "--details", "--oneliner")
TOPOLOGY_ARGV = ("scontrol", "show", "topology")


class SchedulerUnavailable(ConfigError):
    """Slurm could not be asked (scontrol missing, failing or timing out)."""


def _ask(runner: Runner, argv: tuple[str, ...], timeout_s: float) -> str:
    r = runner.run(list(argv), timeout_s)
    if not r.ok:
        said = r.stderr.strip().splitlines()
        why = "; ".join(x for x in (r.reason, said[-1] if said else None) if x) or f"exit {r.returncode}"
        raise SchedulerUnavailable(f"{' '.join(argv)}: {r.status.value}: {why}")
    return r.stdout


def slurm_candidates(runner: Runner, timeout_s: float = 30.0) -> list[SlurmNode]:
    """Every node Slurm knows, with its state, partitions and GPUs.

    Raises:
        SchedulerUnavailable: scontrol is missing, fails or times out.
        fleetdx.probes.errors.ParseError: its output does not parse.
    """
    return parse_scontrol_nodes(_ask(runner, NODES_ARGV, timeout_s))


def slurm_topology(runner: Runner, timeout_s: float = 30.0) -> ClusterTopology | None:
    """The switch tree Slurm uses (``TopologyPlugin=topology/tree`` or ``block``), ``None`` when it has none
    (empty output).

    Raises:
        SchedulerUnavailable: scontrol is missing, fails or times out.
        fleetdx.probes.errors.ParseError: its output does not parse.
    """
    text = _ask(runner, TOPOLOGY_ARGV, timeout_s)
    return parse_topology_conf(text) if text.strip() else None
