"""Contracts of a placement query: :class:`PlacementRequest` in, :class:`PlacementAnswer` out (``fleetdx place
--json``, ``GET/POST /placement``)."""

from __future__ import annotations

from enum import Enum

from pydantic import Field, JsonValue

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.placement.policy import HealthPolicy
from fleetdx.probes.contracts import SCHEMA_VERSION, Contract
from fleetdx.topology.cluster import Placement
from fleetdx.topology.contracts import GpuExclusion, TopoAdvice


class PlacementRequest(Contract):
    """Where should a job of ``nodes`` x ``gpus_per_node`` GPUs go?

    ``hostlist`` (Slurm hostlist syntax, ``gpu[001-016]``) limits the candidates to those hosts (without a
    scheduler it *is* the candidate list); ``partition`` keeps only the scheduler's nodes of that partition;
    ``exclude`` lists hosts the caller rules out. ``ib_port`` is the HCA port for ``UCX_NET_DEVICES``.
    """

    nodes: int = Field(ge=1, le=100_000)
    gpus_per_node: int = Field(ge=1, le=1024)
    partition: str | None = None
    hostlist: str | None = None
    exclude: list[str] = Field(default_factory=list)
    ib_port: int = Field(default=1, ge=1, le=255)


class CandidateSource(str, Enum):
    """Where the candidate nodes came from."""

    SLURM = "slurm"  #: sinfo / scontrol show node (states checked)
    HOSTLIST = "hostlist"  #: the request's hostlist only (no scheduler state known)


class ExclusionStage(str, Enum):
    """Which check left a node out."""

    SCHEDULER = "scheduler"  #: drained, down, not responding, ... or too few GPUs declared
    REQUEST = "request"  #: the caller's exclude list
    HEALTH = "health"  #: latest verdict CRITICAL or an open finding that makes it unfit (the policy)
    GPUS = "gpus"  #: fewer healthy GPUs than the job needs on it
    TOPOLOGY = "topology"  #: not in the cluster topology, so its switch is unknown


class ExcludedNode(Contract):
    """A candidate that was not placed, and every reason."""

    host: str
    stage: ExclusionStage
    reasons: list[str]
    codes: list[FindingCode] = Field(default_factory=list)


class NodeAdvice(Contract):
    """One chosen node: its place in the job (``node_rank``), its leaf switch or block (``group``), its health
    and history in words, its history ``penalty`` (points, :class:`HealthPolicy`), and the GPU advice of its
    stored ``topo -m`` (subset, NUMA node, CPU list and NIC per local rank, NCCL/UCX environment) with the
    GPUs excluded for health. ``gpus`` is ``None`` when no matrix is known (``gpu_note`` says why)."""

    host: str
    node_rank: int
    group: str | None = None
    penalty: float = 0.0
    health: str
    history: str
    gpus: TopoAdvice | None = None
    gpu_note: str | None = None
    excluded_gpus: list[GpuExclusion] = Field(default_factory=list)


class SlurmArgs(Contract):
    """``sbatch`` arguments that place the job as advised: ``argv`` is ready for ``sbatch $(...) job.sh``
    (``--nodes``, ``--nodelist``, ``--exclude`` when a node was excluded, ``--switches`` when a tree topology
    chose the leaves; sbatch(1))."""

    nodelist: str
    exclude: str | None = None
    switches: int | None = None
    argv: list[str]


class PlacementAnswer(Contract):
    """The answer. ``placed`` is false when fewer than ``request.nodes`` fit nodes remain (``nodes`` is then
    empty and ``reasons`` says what is missing; no unfit node is ever used to make up the number).
    ``exit_code``: 0 placed, 2 not placed. ``excluded`` lists every candidate left out, with its reasons."""

    schema_version: int = SCHEMA_VERSION
    request: PlacementRequest
    source: CandidateSource
    placed: bool
    exit_code: int
    nodes: list[NodeAdvice] = Field(default_factory=list)
    excluded: list[ExcludedNode] = Field(default_factory=list)
    locality: Placement | None = None
    slurm: SlurmArgs | None = None
    kubernetes_affinity: dict[str, JsonValue] | None = None
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    policy: HealthPolicy
