"""A whole ``fleetdx steps`` analysis: load every rank's input, decompose, diagnose, compare with a baseline run,
and (optionally) tie straggler ranks to their hosts' findings in the store.

Inputs per rank: a Kineto trace wins over a StepTimer log of the same rank (the trace sees GPU time and
overlap); a log is used for a rank without a trace. Two inputs of one kind for one rank are an error (two runs
mixed in one folder). Step times read from a training log (no stages) are used only when no rank has a trace or
a StepTimer log: their one stage, ``unknown``, cannot be compared with the stages of the others; a rank they
cover is redundant, a rank they alone cover is listed as not used. Ranks of unknown number (negative
placeholders) are renumbered -1, -2, ... over all inputs.
"""

from __future__ import annotations

import math
import statistics
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from fleetdx.orchestrator.judgement import Finding
from fleetdx.orchestrator.steps.analyze import StepPolicy, report, with_mfu
from fleetdx.orchestrator.steps.contracts import (
    MAX_RANK_CHANGES,
    STAGE_ORDER,
    BaselineComparison,
    RankStageChange,
    RankSteps,
    StageChange,
    StepsError,
    StepsReport,
)
from fleetdx.orchestrator.steps.decompose import (
    decompose_steplog,
    decompose_steptime_log,
    decompose_trace,
)
from fleetdx.orchestrator.steps.load import expand, is_trainlog, load_steplog, load_steptime_log, load_trace
from fleetdx.orchestrator.steps.mfu import MfuOptions
from fleetdx.probes.contracts import Contract, Job, SchedulerKind, Severity
from fleetdx.probes.errors import FleetdxError
from fleetdx.probes.parsers.kineto import DEFAULT_MAX_EVENTS

if TYPE_CHECKING:
    from fleetdx.orchestrator.store.records import StepAnalysisRecord
    from fleetdx.orchestrator.store.store import Store

#: 1.96: the two-sided 95% normal quantile; 1.2533 = sqrt(pi/2): the asymptotic standard error of a sample
#: median is 1.2533 sigma / sqrt(n) for normal data (Kenney & Keeping, "Mathematics of Statistics", 1962)
Z95 = 1.96
SE_MEDIAN = 1.2533
MAD_TO_SIGMA = 1.4826


@dataclass
class Loaded:
    """The decomposed ranks of one run and the inputs that could not be used (one line each)."""

    ranks: list[RankSteps] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _decompose(path: Path, max_events: int) -> list[RankSteps] | str:
    """One input's decomposition (a training log may hold several ranks), or the one-line reason it cannot be
    decomposed (picklable for a pool)."""
    try:
        if path.name.endswith(".jsonl"):
            return [decompose_steplog(load_steplog(path))]
        if is_trainlog(path):
            return decompose_steptime_log(load_steptime_log(path))
        return [decompose_trace(load_trace(path, max_events))]
    except FleetdxError as e:
        return str(e)


def load_ranks(paths: Sequence[Path], max_events: int = DEFAULT_MAX_EVENTS, jobs: int = 1) -> Loaded:
    """Decompose every input under ``paths`` (files or folders), in ``jobs`` processes when there are several
    inputs (ranks are independent). Unreadable or undecomposable inputs are listed in ``errors``, never dropped
    silently.

    Raises:
        ConfigError: a path that does not exist or a folder with no input (see :func:`load.expand`).
    """
    files = expand(list(paths))
    if jobs > 1 and len(files) > 2:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(jobs, len(files))) as pool:
            results = list(pool.map(_decompose, files, [max_events] * len(files), chunksize=4))
    else:
        results = [_decompose(p, max_events) for p in files]
    out = Loaded()
    traces: dict[int, RankSteps] = {}
    logs: dict[int, RankSteps] = {}
    printed: dict[int, RankSteps] = {}
    unknown = 0
    for p, result in zip(files, results, strict=True):
        if isinstance(result, str):
            out.errors.append(result)
            continue
        for rs in result:
            if rs.rank < 0:  # a placeholder: number it over all inputs
                unknown += 1
                placeholder = -unknown
                rs = rs.model_copy(
                    update={
                        "rank": placeholder,
                        "missing": [m.replace(f"rank {rs.rank}", f"rank {placeholder}") for m in rs.missing],
                    }
                )
            into = {"steptimer": logs, "log": printed}.get(rs.input, traces)
            if rs.rank in into:
                out.errors.append(f"{p}: rank {rs.rank} again (also in {into[rs.rank].source}): one run per analysis")
                continue
            into[rs.rank] = rs
    if traces or logs:
        alone = sorted(set(printed) - set(traces) - set(logs))
        for r in alone:
            out.errors.append(
                f"{printed[r].source}: rank {r}'s step times from a training log are not used beside traces or "
                "StepTimer logs of other ranks (no stages to compare)"
            )
        printed = {}
    out.ranks = [traces.get(r) or logs.get(r) or printed[r] for r in sorted(set(traces) | set(logs) | set(printed))]
    return out


def _job_series(ranks: Sequence[RankSteps], stage: str | None) -> list[float]:
    """Per step position, the median over ranks of the step time (``stage`` None) or of one stage (ms)."""
    n = min(len(r.steps) for r in ranks)
    out = []
    for i in range(n):
        vals = [r.steps[i].step_ms if stage is None else r.steps[i].stages_ms.get(stage, 0.0) for r in ranks]
        out.append(statistics.median(vals))
    return out


def _noise(values: Sequence[float]) -> float:
    """The standard error of the median of ``values`` from their MAD (robust sigma)."""
    if len(values) < 2:
        return math.inf
    med = statistics.median(values)
    sigma = MAD_TO_SIGMA * statistics.median(abs(v - med) for v in values)
    return SE_MEDIAN * sigma / math.sqrt(len(values))


def _change(name: str, base: Sequence[float], cur: Sequence[float]) -> StageChange:
    b, c = statistics.median(base), statistics.median(cur)
    band = Z95 * math.hypot(_noise(base), _noise(cur))
    return StageChange(
        stage=name,
        baseline_ms=round(b, 3),
        current_ms=round(c, 3),
        change_ms=round(c - b, 3),
        change_pct=round(100 * (c - b) / b, 2) if b > 0 else None,
        noise_ms=round(band, 3) if math.isfinite(band) else None,
        significant=math.isfinite(band) and abs(c - b) > band,
    )


#: a rank's own change is listed when it is also at least this share of the rank's baseline step (a stage of a
#: few microseconds that moved by a few more is not news), as a straggler's excess must be of the job's step
RANK_CHANGE_MIN_SHARE = 0.05


def _rank_changes(
    current: Sequence[RankSteps], baseline: Sequence[RankSteps], names: Sequence[str]
) -> list[RankStageChange]:
    """Each rank in both runs (by rank number): its step and stages, its own medians compared; the significant
    changes of at least :data:`RANK_CHANGE_MIN_SHARE` of its baseline step, largest first."""
    before = {r.rank: r for r in baseline if r.steps}
    out: list[RankStageChange] = []
    for r in current:
        b = before.get(r.rank)
        if b is None or not r.steps:
            continue
        floor = RANK_CHANGE_MIN_SHARE * statistics.median(s.step_ms for s in b.steps)
        for name in ("step", *names):
            stage = None if name == "step" else name
            c = _change(name, _job_series([b], stage), _job_series([r], stage))
            if c.significant and abs(c.change_ms) >= floor:
                out.append(RankStageChange(rank=r.rank, **c.model_dump()))
    out.sort(key=lambda c: (-abs(c.change_ms), c.rank, c.stage))
    return out[:MAX_RANK_CHANGES]


def compare(current: Sequence[RankSteps], baseline: Sequence[RankSteps], baseline_source: str) -> BaselineComparison:
    """Stage-by-stage change from ``baseline`` to ``current`` (job medians per step position), each with a 95%
    noise band: ``1.96 x sqrt(se_b^2 + se_c^2)``, ``se`` the standard error of each median from its MAD. A change
    inside the band is not ``significant``. Goodput change = steps per second, current over baseline, minus 1.
    The same for each rank's own medians (matched by rank number): ``rank_changes``, where a one-rank
    straggler shows although the job medians hide it.

    Raises:
        StepsError: either run has no rank.
    """
    if not current or not baseline:
        raise StepsError("a baseline comparison needs steps in both runs")
    step = _change("step", _job_series(baseline, None), _job_series(current, None))
    names = [s for s in STAGE_ORDER]
    extra = sorted({k for r in [*current, *baseline] for s in r.steps for k in s.stages_ms} - set(names))
    stages = [_change(n, _job_series(baseline, n), _job_series(current, n)) for n in names + extra]
    return BaselineComparison(
        baseline=baseline_source,
        step=step,
        stages=stages,
        goodput_change_pct=round(100 * (step.baseline_ms / step.current_ms - 1), 2) if step.current_ms > 0 else None,
        rank_changes=_rank_changes(current, baseline, names + extra),
    )


def host_findings(store: Store, hosts: Sequence[str], limit: int = 10) -> dict[str, list[Finding]]:
    """The recent warning and critical findings of each host in the store (newest first, at most ``limit``)."""
    out: dict[str, list[Finding]] = {}
    for h in hosts:
        recs = store.find_findings(host=h, limit=limit * 3)
        keep = [r.finding for r in recs if r.finding.severity in (Severity.WARNING, Severity.CRITICAL)][:limit]
        if keep:
            out[h] = keep
    return out


def analyse(
    loaded: Loaded,
    baseline: Loaded | None = None,
    baseline_source: str = "",
    policy: StepPolicy | None = None,
    history: Mapping[str, Sequence[Finding]] | None = None,
    job: Job | None = None,
    mfu: MfuOptions | None = None,
) -> StepsReport:
    """The report of one run (and its comparison with ``baseline`` when given).

    Raises:
        StepsError: no rank could be decomposed (the message lists why, input by input).
    """
    if not loaded.ranks:
        why = "; ".join(loaded.errors) if loaded.errors else "no input"
        raise StepsError(f"nothing could be decomposed into steps: {why}")
    rep = with_mfu(report(loaded.ranks, policy, history, job, missing=loaded.errors), loaded.ranks, mfu)
    if baseline is not None:
        if not baseline.ranks:
            raise StepsError(
                f"the baseline {baseline_source}: nothing could be decomposed: {'; '.join(baseline.errors)}"
            )
        rep = rep.model_copy(update={"baseline": compare(loaded.ranks, baseline.ranks, baseline_source)})
    return rep


class StepsRequest(Contract):
    """What ``fleetdx steps`` analyses: ``paths`` (traces, StepTimer logs, training logs, or folders of them),
    an optional ``baseline`` run to compare with, the scheduler ``job_id`` to record (as given, not looked up),
    ``history`` (add each straggler host's recent findings from the store at ``db``), ``max_events`` kept per
    trace (memory bound, about 50 B each), ``jobs`` processes decomposing ranks, and ``mfu``: the GPU model,
    data type and model FLOPs per step of the MFU figures (each optional)."""

    paths: list[Path] = Field(min_length=1)
    baseline: Path | None = None
    job_id: str | None = None
    history: bool = False
    db: str | None = None
    max_events: int = Field(default=DEFAULT_MAX_EVENTS, ge=1)
    jobs: int = Field(default=1, ge=1)
    mfu: MfuOptions = Field(default_factory=MfuOptions)  #: ``--gpu``, ``--dtype``, ``--flops-per-step``


@dataclass
class StepsRun:
    """A step analysis: the report, and the decomposed ranks behind it (for the HTML page's series)."""

    report: StepsReport
    loaded: Loaded


def save(report: StepsReport, store: Store) -> StepAnalysisRecord:
    """Keep ``report`` in ``store`` as a step analysis (a new id, made now); its record. Raises the store's
    ``StoreError``."""
    from fleetdx.orchestrator.store.records import StepAnalysisRecord

    record = StepAnalysisRecord(
        analysis_id=uuid.uuid4().hex,
        job_id=report.job.job_id if report.job else None,
        created_at=time.time(),
        verdict=report.verdict,
        first_finding=report.findings[0].code.value if report.findings else None,
        ranks=len(report.ranks),
    )
    store.save_step_analysis(record, report)
    return record


def run(request: StepsRequest) -> StepsRun:
    """Load, decompose and diagnose what ``request`` names (see the module doc). A store that cannot be read
    for ``history`` is said in ``missing_evidence``, never fatal (the analysis stands without it).

    Raises:
        ConfigError: a path that does not exist or a folder with no input.
        StepsError: nothing could be decomposed into steps.
    """
    request.mfu.check()
    loaded = load_ranks(request.paths, request.max_events, request.jobs)
    base = load_ranks([request.baseline], request.max_events, request.jobs) if request.baseline is not None else None
    hist: dict[str, list[Finding]] | None = None
    unread: list[str] = []
    if request.history:
        from fleetdx.orchestrator.store.store import Store  # SQLAlchemy: only when the store is read

        hosts = sorted({r.host for r in loaded.ranks if r.host})
        try:
            with Store.open(request.db) as store:
                hist = host_findings(store, hosts)
        except FleetdxError as e:
            unread.append(f"the straggler hosts' history: the store could not be read ({e})")
    job = Job(scheduler=SchedulerKind.NONE, job_id=request.job_id) if request.job_id else None
    rep = analyse(
        loaded, base, str(request.baseline) if request.baseline else "", history=hist, job=job, mfu=request.mfu
    )
    if unread:
        rep = rep.model_copy(update={"missing_evidence": [*rep.missing_evidence, *unread]})
    return StepsRun(report=rep, loaded=loaded)
