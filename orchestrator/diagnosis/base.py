"""What every diagnosis rule receives and returns.

A rule is a pure function ``rule(node: NodeFacts, fleet: Fleet) -> list[Finding]``. ``fleet`` gives the peers
(for majority and peer comparisons) and the job's expectations. Rules never raise on odd facts: missing facts
mean "cannot judge" and produce no finding (the engine reports probes that did not run).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from fleetdx.probes.contracts import Contract, Finding
from fleetdx.probes.facts import NodeFacts


class Fleet(Contract):
    """All nodes of the run plus what the job expects of them."""

    nodes: list[NodeFacts]
    expected_gpus_per_node: int | None = None  #: from --gpus-per-node, else SLURM_GPUS_ON_NODE/PER_NODE
    expected_gpus_source: str | None = None  #: where expected_gpus_per_node came from, for evidence
    extra: dict[str, str] = Field(default_factory=dict)

    def peers_of(self, host: str) -> list[NodeFacts]:
        return [n for n in self.nodes if n.host != host]


Rule = Callable[[NodeFacts, Fleet], list[Finding]]
