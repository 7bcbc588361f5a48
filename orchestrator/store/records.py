"""What the store's queries return: read-side contracts (also the HTTP API's response models)."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from fleetdx.orchestrator.report import CurveBackend, RunKind, level_of
from fleetdx.orchestrator.preflight.schedules import Schedule
from fleetdx.probes.commands import Level
from fleetdx.probes.contracts import Contract, Finding, VerdictName
from fleetdx.probes.parsers.nccl_tests import Collective


class RunSummary(Contract):
    """One stored run without its details. Times are Unix seconds."""

    run_id: str
    kind: RunKind
    level: Level | Schedule | None = None  #: the pre-flight's probe level, or a bandwidth run's schedule
    started_at: float
    finished_at: float
    verdict: VerdictName
    exit_code: int
    simulated: bool
    exclude: str
    node_count: int
    finding_count: int

    @field_validator("level", mode="before")
    @classmethod
    def _level(cls, value: object, info: ValidationInfo) -> object:
        return level_of(info.data.get("kind"), value)


class NodeHistoryEntry(Contract):
    """One node in one past run: the node's verdict and the findings about it, newest run first."""

    run_id: str
    kind: RunKind
    level: Level | Schedule | None = None  #: the pre-flight's probe level, or a bandwidth run's schedule
    started_at: float
    verdict: VerdictName  #: the node's verdict in that run (not the run's)
    findings: list[Finding] = Field(default_factory=list)

    @field_validator("level", mode="before")
    @classmethod
    def _level(cls, value: object, info: ValidationInfo) -> object:
        return level_of(info.data.get("kind"), value)


class NodeHistory(Contract):
    """A node's findings over time (``fleetdx history HOST --json``)."""

    host: str
    entries: list[NodeHistoryEntry]


class FindingRecord(Contract):
    """A stored finding with the run it came from."""

    run_id: str
    started_at: float
    finding: Finding


class BusbwHistoryPoint(Contract):
    """The peak of one stored busbw curve that ran on a node: ``peak_busbw_gbps`` in GB/s (1e9 B/s, as
    nccl-tests prints it) at message size ``peak_size`` bytes; ``None`` for a curve without points."""

    run_id: str
    started_at: float
    collective: Collective
    backend: CurveBackend
    nodes: list[str]
    nranks: int
    peak_busbw_gbps: float | None
    peak_size: int | None


class ImportResult(Contract):
    """What ``fleetdx db import`` did with one spool file: ``inserted`` is false when the run was already
    stored (importing twice never duplicates a run); ``removed`` is true when the file was deleted after
    the commit."""

    path: str
    run_id: str
    inserted: bool
    removed: bool
