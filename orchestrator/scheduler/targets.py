"""Which nodes a pre-flight targets, and how many GPUs each should have.

Nodes, first match wins (issue 4): ``--nodes HOSTLIST`` (Slurm hostlist syntax, expanded with
python-hostlist), else ``SLURM_JOB_NODELIST`` (set by Slurm in a job's environment), else every alive node of
the Ray cluster (resolved later by the fan-out, :func:`fleetdx.orchestrator.cluster.fanout.ray_node_hosts`).

Expected GPUs per node, first match wins: ``--gpus-per-node N``, else ``SLURM_GPUS_ON_NODE`` (GPUs allocated
on this node), else ``SLURM_GPUS_PER_NODE`` (the ``--gpus-per-node`` request: ``N`` or ``TYPE:N``), else
unknown (``None``: the GPU count is then checked against the node's peers only). Slurm sbatch(1) documents
the variables.

Everything here is pure: the environment is passed in as a mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

import hostlist

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ConfigError


class TargetSource(str, Enum):
    """Where the target node list came from."""

    CLI = "--nodes"
    SLURM = "SLURM_JOB_NODELIST"
    RAY = "ray-cluster"  #: every alive node of the Ray cluster
    SIMULATED = "simulated"  #: one simulated node per bundle (``--simulate``)


class Targets(Contract):
    """The nodes to probe. ``hosts`` is ``None`` when they are "every alive Ray node" (known only once
    connected)."""

    hosts: list[str] | None
    source: TargetSource
    expected_gpus_per_node: int | None = None
    expected_gpus_source: str | None = None


def expand_hostlist(text: str) -> list[str]:
    """``"gpu[01-03],login1"`` -> ``["gpu01", "gpu02", "gpu03", "login1"]`` (order kept, duplicates dropped).

    Raises:
        ConfigError: the text is not a valid Slurm hostlist or names no host.
    """
    try:
        hosts = hostlist.expand_hostlist(text.strip())
    except hostlist.BadHostlist as e:
        raise ConfigError(f"bad hostlist {text!r}: {e}") from None
    hosts = list(dict.fromkeys(h for h in hosts if h))
    if not hosts:
        raise ConfigError(f"hostlist {text!r} names no host")
    return hosts


def _gpu_count(value: str, var: str) -> int:
    """``"8"`` or ``"h100:8"`` -> 8 (Slurm's ``[type:]count`` GRES syntax)."""
    count = value.strip().rsplit(":", 1)[-1]
    if not count.isdigit():
        raise ConfigError(f"{var}={value!r}: expected a GPU count N or TYPE:N")
    return int(count)


def expected_gpus(gpus_per_node: int | None, env: Mapping[str, str]) -> tuple[int | None, str | None]:
    """(expected GPUs per node, where the number came from), ``(None, None)`` when nothing says.

    Raises:
        ConfigError: a negative ``--gpus-per-node`` or a malformed Slurm variable.
    """
    if gpus_per_node is not None:
        if gpus_per_node < 0:
            raise ConfigError(f"--gpus-per-node must be >= 0, got {gpus_per_node}")
        return gpus_per_node, "--gpus-per-node"
    for var in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"):
        if env.get(var, "").strip():
            return _gpu_count(env[var], var), var
    return None, None


def resolve_targets(nodes: str | None, gpus_per_node: int | None, env: Mapping[str, str]) -> Targets:
    """The targets of a live pre-flight from the CLI options and the environment (see the module doc)."""
    n_gpus, gpus_src = expected_gpus(gpus_per_node, env)
    if nodes is not None:
        hosts, source = expand_hostlist(nodes), TargetSource.CLI
    elif env.get("SLURM_JOB_NODELIST", "").strip():
        hosts, source = expand_hostlist(env["SLURM_JOB_NODELIST"]), TargetSource.SLURM
    else:
        hosts, source = None, TargetSource.RAY
    return Targets(hosts=hosts, source=source, expected_gpus_per_node=n_gpus, expected_gpus_source=gpus_src)
