"""Jobs as the store knows them: every run (pre-flight, analyze, bandwidth) and postmortem that names a job id,
joined with the current states of the job's nodes. What ``fleetdx report --job`` and the service's job pages
(``GET /jobs/{job_id}``) show; both read it through :func:`job_report`.

Step analyses are joined when they were stored (``POST /steps``, table ``step_analyses``). The store keeps no
live-watch state (``fleetdx watch`` keeps its state in the watching process): :class:`JobReport` says so in
``not_stored`` rather than showing an empty section as if nothing had been found.
"""

from __future__ import annotations

from pydantic import Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetdx.orchestrator.diagnosis.node_states import NodeStatus
from fleetdx.orchestrator.report import RunKind, RunReport
from fleetdx.orchestrator.store.models import NodeStateRow, PostmortemRow, RunRow, StepAnalysisRow
from fleetdx.orchestrator.store.records import LiveJobRecord, PostmortemRecord, StepAnalysisRecord
from fleetdx.orchestrator.store.states import _status_of
from fleetdx.orchestrator.store.store import Store
from fleetdx.probes.contracts import Contract, Job, Verdict, VerdictName

JOB_REPORT_SCHEMA = 1
#: the most runs and postmortems one job report reads (the newest); the rest are counted in ``left_out``
MAX_JOB_RUNS = 200
#: what the store does not keep about a job, said on every job report (everything is kept now)
NOT_STORED: dict[str, str] = {}


class JobSummary(Contract):
    """One job id seen in the store: how many runs of each kind, postmortems and step analyses name it, the
    worst verdict among them, and the Unix time of the newest."""

    job_id: str
    preflights: int
    analyses: int
    bandwidth: int
    postmortems: int
    step_analyses: int
    verdict: VerdictName
    last_at: float


class JobNode(Contract):
    """A node of the job (a host of one of its runs, or one its postmortems blame): its worst verdict in the
    job's runs (``None`` when only a postmortem names it) and its current state (``None``: no stored pre-flight
    or event named it)."""

    host: str
    verdict: VerdictName | None = None
    state: NodeStatus | None = None


class JobReport(Contract):
    """Everything the store holds about one job: the job as its newest run recorded it, its runs (newest first),
    its postmortems and step analyses, its nodes (sorted by host) and their states, and the worst ``verdict`` of
    all its runs, postmortems and step analyses (OK when they are all OK). ``left_out``: runs, postmortems or
    step analyses past :data:`MAX_JOB_RUNS` each; ``not_stored``: what the store does not keep."""

    schema_version: int = JOB_REPORT_SCHEMA
    job_id: str
    job: Job | None = None  #: the job as its newest run recorded it (scheduler, name, user, state, times...)
    verdict: VerdictName
    runs: list[RunReport]
    postmortems: list[PostmortemRecord]
    step_analyses: list[StepAnalysisRecord] = Field(default_factory=list)
    nodes: list[JobNode]
    left_out: int = 0
    not_stored: dict[str, str] = Field(default_factory=lambda: dict(NOT_STORED))
    live: LiveJobRecord | None = None  #: the job's latest live state (``fleetdx watch --report-to``)


def job_report(store: Store, job_id: str, limit: int = MAX_JOB_RUNS) -> JobReport | None:
    """The job's report (see :class:`JobReport`), ``None`` when no stored run, postmortem or step analysis names
    ``job_id``.
    Raises :class:`~fleetdx.orchestrator.store.StoreError` like every store read."""
    summaries = store.list_runs(limit=limit + 1, job_id=job_id)
    postmortems = store.list_postmortems(limit=limit + 1, job_id=job_id)
    analyses = store.list_step_analyses(limit=limit + 1, job_id=job_id)
    live = store.get_live_job(job_id)
    if not summaries and not postmortems and not analyses and live is None:
        return None
    left_out = sum(max(0, len(x) - limit) for x in (summaries, postmortems, analyses))
    runs = [store.get_run(s.run_id) for s in summaries[:limit]]
    postmortems = postmortems[:limit]
    analyses = analyses[:limit]
    worst: dict[str, Verdict] = {}
    for run in runs:
        for n in run.nodes:
            worst[n.host] = Verdict.worst([worst[n.host], n.verdict]) if n.host in worst else n.verdict
    hosts = sorted({*worst, *(h for p in postmortems for h in p.hosts)})
    states = node_states(store, hosts)
    verdicts = [r.verdict for r in runs] + [p.verdict for p in postmortems] + [a.verdict for a in analyses]
    verdict = Verdict.worst(verdicts + ([live.verdict] if live is not None else []))
    return JobReport(
        job_id=job_id,
        job=next((r.job for r in runs if r.job is not None), None),
        verdict=verdict,
        runs=runs,
        postmortems=postmortems,
        step_analyses=analyses,
        nodes=[JobNode(host=h, verdict=worst.get(h), state=states.get(h)) for h in hosts],
        left_out=left_out,
        live=live,
    )


def node_states(store: Store, hosts: list[str]) -> dict[str, NodeStatus]:
    """The current state of each of ``hosts`` that has one (queries of at most 500 hosts each)."""
    out: dict[str, NodeStatus] = {}
    with store._errors(), Session(store.engine) as session:
        for i in range(0, len(hosts), 500):
            rows = session.scalars(select(NodeStateRow).where(NodeStateRow.host.in_(hosts[i : i + 500])))
            out.update((r.host, _status_of(r)) for r in rows)
    return out


def list_jobs(store: Store, limit: int = 100) -> list[JobSummary]:
    """The ``limit`` jobs with the newest runs, postmortems or step analyses, newest first (three grouped
    queries)."""
    runs_stmt = (
        select(RunRow.job_id, RunRow.kind, RunRow.verdict, func.count(), func.max(RunRow.finished_at))
        .where(RunRow.job_id.is_not(None))
        .group_by(RunRow.job_id, RunRow.kind, RunRow.verdict)
    )
    pm_stmt = (
        select(PostmortemRow.job_id, PostmortemRow.verdict, func.count(), func.max(PostmortemRow.created_at))
        .where(PostmortemRow.job_id.is_not(None))
        .group_by(PostmortemRow.job_id, PostmortemRow.verdict)
    )
    steps_stmt = (
        select(StepAnalysisRow.job_id, StepAnalysisRow.verdict, func.count(), func.max(StepAnalysisRow.created_at))
        .where(StepAnalysisRow.job_id.is_not(None))
        .group_by(StepAnalysisRow.job_id, StepAnalysisRow.verdict)
    )
    counts: dict[str, dict[str, int]] = {}
    verdicts: dict[str, list[Verdict]] = {}
    last: dict[str, float] = {}

    def add(job: str, what: str, verdict: Verdict, n: int, at: float) -> None:
        of_job = counts.setdefault(job, {})
        of_job[what] = of_job.get(what, 0) + int(n)
        verdicts.setdefault(job, []).append(verdict)
        last[job] = max(last.get(job, 0.0), float(at))

    with store._errors(), Session(store.engine) as session:
        for job, kind, verdict, n, at in session.execute(runs_stmt):
            add(str(job), RunKind(kind).value, verdict, n, at)
        for job, verdict, n, at in session.execute(pm_stmt):
            add(str(job), "postmortem", verdict, n, at)
        for job, verdict, n, at in session.execute(steps_stmt):
            add(str(job), "steps", verdict, n, at)
    newest = sorted(last, key=lambda j: (-last[j], j))[:limit]
    return [
        JobSummary(
            job_id=j,
            preflights=counts[j].get(RunKind.PREFLIGHT.value, 0),
            analyses=counts[j].get(RunKind.ANALYZE.value, 0),
            bandwidth=counts[j].get(RunKind.BANDWIDTH.value, 0),
            postmortems=counts[j].get("postmortem", 0),
            step_analyses=counts[j].get("steps", 0),
            verdict=Verdict.worst(verdicts[j]),
            last_at=last[j],
        )
        for j in newest
    ]
