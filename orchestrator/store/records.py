"""What the store's queries return: read-side contracts (also the HTTP API's response models)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fleetdx.orchestrator.judgement import Finding
from fleetdx.orchestrator.report import CurveBackend, RunKind, Schedule
from fleetdx.probes.contracts import Collective, Contract, Level, VerdictName


class RunSummary(Contract):
    """One stored run without its details. Times are Unix seconds."""

    run_id: str
    kind: RunKind
    level: Level | None = None  #: a pre-flight's probe level
    schedule: Schedule | None = None  #: a bandwidth run's schedule (a pre-flight at level full may have one)
    started_at: float
    finished_at: float
    verdict: VerdictName
    exit_code: int
    simulated: bool
    exclude: str
    job_id: str | None = None  #: the job the run was about
    node_count: int
    finding_count: int


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


#: the most findings one live job's state carries (the newest)
LIVE_FINDINGS = 50


class LiveJobRecord(Contract):
    """A running job's state as ``fleetdx watch --report-to`` last pushed it: where the watcher runs, when it
    started and last reported (Unix s), ``state`` (``running``; ``hung``: no rank completed a step for the hang
    threshold; ``ended``: every rank closed its StepTimer), how many ranks report steps, the newest step, the
    job's median step (ms), the verdict of its findings so far and the newest :data:`LIVE_FINDINGS` of them."""

    job_id: str = Field(min_length=1, max_length=128)
    watcher_host: str | None = Field(default=None, max_length=255)
    started_at: float
    updated_at: float
    state: Literal["running", "hung", "ended"]
    ranks: int = Field(ge=0)
    last_step: int | None = None
    step_median_ms: float | None = None
    verdict: VerdictName
    findings: list[Finding] = Field(default_factory=list, max_length=LIVE_FINDINGS)


class StepAnalysisRecord(Contract):
    """One stored step analysis without its report: its id, job, when it was made (Unix s), verdict, the first
    finding's code and how many ranks it read."""

    analysis_id: str
    job_id: str | None = None
    created_at: float
    verdict: VerdictName
    first_finding: str | None = None
    ranks: int = 0


class PostmortemRecord(Contract):
    """One stored postmortem without its report: its id, job, when it was made (Unix s), verdict, the most
    likely cause's code and the hosts its causes name."""

    postmortem_id: str
    job_id: str | None = None
    created_at: float
    verdict: VerdictName
    first_cause: str | None = None
    hosts: list[str] = Field(default_factory=list)
