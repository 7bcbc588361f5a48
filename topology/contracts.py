"""Result models of topology analyses: every one carries the ``topo -m`` cells it rests on.

Device names are as ``nvidia-smi topo -m`` prints them after the NIC legend is applied: ``GPU0``, ``mlx5_0``,
``mlx5_bond_0``. Link classes are strings of the matrix (``NV18``, ``PXB``, ``SYS``; SOC is already SYS).
"""

from __future__ import annotations

from enum import Enum

from pydantic import Field, computed_field

from fleetdx.probes.contracts import SCHEMA_VERSION, Contract


class Cell(Contract):
    """One cell of the matrix: the link class between devices ``a`` (row) and ``b`` (column)."""

    a: str
    b: str
    link: str

    @property
    def key(self) -> str:
        return f"{self.a}-{self.b}"


class RemotePairs(Contract):
    """GPU pairs with no NVLink whose PCIe path crosses NODE or SYS, and their share of all GPU pairs."""

    pairs: list[Cell]  #: ``a < b`` in GPU order
    total_pairs: int  #: n(n-1)/2

    @computed_field  # type: ignore[prop-decorator]
    @property
    def sys_pairs(self) -> int:
        """Pairs of ``pairs`` that cross the SMP interconnect (SYS)."""
        return sum(1 for c in self.pairs if c.link == "SYS")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def node_pairs(self) -> int:
        """Pairs of ``pairs`` that cross host bridges within a NUMA node (NODE)."""
        return len(self.pairs) - self.sys_pairs

    @computed_field  # type: ignore[prop-decorator]
    @property
    def share(self) -> float:
        """Fraction of the node's GPU pairs listed in ``pairs`` (0.0 for a node with fewer than 2 GPUs)."""
        return len(self.pairs) / self.total_pairs if self.total_pairs else 0.0


class AsymmetricCell(Contract):
    """``links[a][b] != links[b][a]``: the matrix disagrees with itself."""

    a: str
    b: str
    ab: str
    ba: str


class NvlinkReport(Contract):
    """NVLink bonds against the node's own pattern.

    ``pattern`` is the NV# class of an all-to-all fabric (:func:`fleetdx.topology.analyses.all_to_all_class`:
    at least three quarters of the GPU pairs, more than half of the GPUs pairwise joined by it), else ``None``
    (hybrid cube-mesh and its slices, bridged pairs, PCIe only). ``weaker`` are the GPU pairs below
    ``pattern``. ``per_gpu`` is each GPU's total NVLink count (sum of # over its NV# cells);
    ``expected_per_gpu`` the most common non-zero total; ``short_gpus`` the GPUs with a non-zero total below
    it: reported, not evidence on their own (a cube-mesh slice has them by design; peers judge them).
    """

    pattern: str | None
    weaker: list[Cell]
    per_gpu: dict[str, int]
    expected_per_gpu: int | None
    short_gpus: list[str]
    asymmetric: list[AsymmetricCell]


class NicChoice(Contract):
    """The NIC(s) nearest to one GPU and their link class (``nics`` empty: the matrix shows no NIC)."""

    nics: list[str]
    link: str | None


class RailAssignment(Contract):
    """The NIC a GPU should use (its rail), with the reason in words."""

    gpu: str
    nic: str
    link: str
    reason: str


class NicReport(Contract):
    """GPU -> NIC locality of one node.

    ``load`` counts the GPUs assigned to each NIC by ``rails``; ``oversubscribed`` are NICs carrying more GPUs
    than the least-loaded NIC that carries any.
    """

    nearest: dict[str, NicChoice]
    remote: list[str]  #: GPUs whose nearest NIC is NODE or SYS away
    rails: list[RailAssignment]
    load: dict[str, int]
    oversubscribed: list[str]


class AffinityIssueKind(str, Enum):
    """Why a GPU's CPU affinity cannot be used for binding as printed."""

    MISSING = "missing"  #: no CPU Affinity column, or the cell is N/A
    EMPTY = "empty"  #: the cell is present but empty (a cgroup/cpuset that hides the GPU's CPUs)
    SHARED_ACROSS_SYS = "shared-across-sys"  #: GPUs a SYS hop apart print the same CPUs (likely a cpuset)


class AffinityIssue(Contract):
    gpu: str
    kind: AffinityIssueKind
    raw: str | None  #: the CPU Affinity cell as printed


class RankBinding(Contract):
    """What local rank ``local_rank`` should bind to. ``cpus`` is the GPU's CPU affinity (CPU ids);
    ``numa_node`` is ``None`` when the matrix gives none or several; ``nic`` is ``None`` on a node with no
    NIC."""

    local_rank: int
    gpu: str
    cpus: list[int]
    numa_node: int | None
    nic: str | None
    nic_link: str | None = None


class SubsetChoice(Contract):
    """The best ``k``-GPU subset: the weakest pairwise link is as strong as possible, then NIC locality.

    ``min_link`` is ``None`` for ``k == 1``; ``nic_links`` is each chosen GPU's nearest-NIC class (``None``
    for no NIC); ``ties`` is how many other subsets score the same (all equally good).
    """

    gpus: list[str]
    min_link: str | None
    nic_links: list[str | None]
    ties: int


class CellDiff(Contract):
    """A cell where this node differs from the majority of its peers."""

    a: str
    b: str
    here: str | None  #: None: the device is absent here
    majority: str
    majority_count: int
    peers: int

    def sentence(self) -> str:
        here = self.here if self.here is not None else "absent"
        majority = f"{self.majority} on {self.majority_count} of {self.peers} peers"
        return f"{self.a}-{self.b} is {here} here, {majority}"


class PeerComparison(Contract):
    """This node against the majority graph of peers with the same GPU count and device names."""

    peers: int  #: comparable peers (same GPU count and device names)
    diffs: list[CellDiff]


class GpuExclusion(Contract):
    """A GPU that must not be advised, and why: one reason (in words) and one finding code per piece of
    evidence against it. Topology does not judge health: the caller passes these in (see
    :mod:`fleetdx.orchestrator.placement.health`)."""

    gpu: str  #: ``GPU3`` as ``topo -m`` names it
    reasons: list[str]
    codes: list[str] = Field(default_factory=list)  #: finding codes, opaque here


class TopoAdvice(Contract):
    """``fleetdx topo advise --json``: the GPU subset, per-rank binding and ready-to-paste lines.

    ``excluded`` are the GPUs left out for health reasons (never advised); the subset is the best over the
    others. ``satisfied`` is false when fewer than ``requested`` GPUs remain: ``gpus``, ``ranks``, ``env``
    and ``commands`` are then empty and ``reasons`` says what is missing; a bad GPU is never picked to make
    up the number.
    """

    schema_version: int = SCHEMA_VERSION
    requested: int | None = None  #: k, the GPUs asked for
    satisfied: bool = True
    excluded: list[GpuExclusion] = Field(default_factory=list)
    gpus: list[str]
    min_link: str | None
    ranks: list[RankBinding]
    env: dict[str, str]
    rank_env: list[dict[str, str]]
    commands: list[str]
    reasons: list[str]
    warnings: list[str] = Field(default_factory=list)
