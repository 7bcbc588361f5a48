"""The postmortem job: ``run_postmortem_request(PostmortemRequest) -> PostmortemReport``.

What ``fleetdx postmortem`` does, without the terminal: check the inputs (a path that does not exist is a usage
error, :class:`~fleetdx.probes.errors.ConfigError`, exit 3, before anything is read or stored), expand a folder
given as a log into its files, load the job model (``--job``: ``scontrol``/``sacct``), find the epilog bundles of
the job (``BUNDLE_DIR/JOBID/HOST/``, written by ``slurm/epilog.sh``), read every source, correlate and judge
(:func:`fleetdx.orchestrator.postmortem.run.run_postmortem`), then add the blamed hosts' stored history and keep
the postmortem in the store.

**After the scheduler forgot the job** (slurmctld purges a finished job after ``MinJobAge``, and without
accounting ``sacct`` has no record): the postmortem still reads the logs, the epilog bundles of that id and the
blamed hosts' stored runs; ``job record unavailable`` is in ``missing_evidence`` and the verdict comes from the
causes. The report's ``job`` then holds only the id (so the store files the postmortem under it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import Field, model_validator

from fleetdx.orchestrator.postmortem import history
from fleetdx.orchestrator.postmortem.contracts import PostmortemReport
from fleetdx.orchestrator.postmortem.run import Window, run_postmortem
from fleetdx.orchestrator.postmortem.sources import Bundles, EvidenceSource, LogFiles
from fleetdx.orchestrator.scheduler import job as scheduler_job
from fleetdx.orchestrator.scheduler.job import JobNotFoundError
from fleetdx.orchestrator.scheduler.targets import expand_hostlist
from fleetdx.orchestrator.store import StoreError
from fleetdx.orchestrator.store.settings import resolve_db_url, sqlite_file
from fleetdx.probes.contracts import Contract, Job, SchedulerKind
from fleetdx.probes.errors import ConfigError

#: files of a folder given as a log that are read (at most), sorted by name
MAX_FOLDER_FILES = 4096


class PostmortemRequest(Contract):
    """One postmortem's inputs. ``logs``: job logs (files, or folders whose files are read); ``bundles``: node
    bundle folders; ``fr``: a folder of Flight Recorder dumps, read in ``fr_jobs`` processes (``None``: the CPUs
    this process may use; :func:`~fleetdx.orchestrator.postmortem.flight.analyze_dir`); ``job_id``: a Slurm job
    id (its record, its epilog bundles under ``bundle_dir``); ``nodes``: a hostlist whose kernel events alone
    count; ``since`` / ``until``: the job's window, Unix seconds; ``db``: the store's URL (``None``:
    ``FLEETDX_DB_URL``, else SQLite); ``history``: read the blamed hosts' stored history; ``save``: keep the
    postmortem in the store."""

    logs: list[Path] = Field(default_factory=list)
    bundles: list[Path] = Field(default_factory=list)
    fr: Path | None = None
    fr_jobs: int | None = Field(default=None, ge=1)
    job_id: str | None = None
    bundle_dir: Path | None = None
    nodes: str | None = None
    since: float | None = None
    until: float | None = None
    db: str | None = None
    history: bool = True
    save: bool = True

    @model_validator(mode="after")
    def _window(self) -> PostmortemRequest:
        if self.since is not None and self.until is not None and self.until < self.since:
            raise ValueError("--until is before --since")
        return self


def _check(req: PostmortemRequest) -> None:
    """Usage errors, before anything is read: nothing to read, a path that does not exist."""
    if not req.logs and not req.bundles and req.job_id is None and req.fr is None:
        raise ConfigError("nothing to read: give --logs FILE..., --bundles DIR..., --fr DIR and/or --job ID")
    if req.nodes:
        expand_hostlist(req.nodes)  # a bad hostlist is a usage error before a path is
    for option, paths in (("--logs", req.logs), ("--bundles", req.bundles), ("--fr", [req.fr] if req.fr else [])):
        for p in paths:
            if not p.exists():
                raise ConfigError(f"{option} {p}: no such file or directory")


def log_files(paths: list[Path]) -> list[Path]:
    """``paths`` with each folder replaced by the regular files under it (sorted; hidden ones left out; at most
    :data:`MAX_FOLDER_FILES` per folder)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
            out += found[:MAX_FOLDER_FILES]
        else:
            out.append(p)
    return list(dict.fromkeys(out))


def _job(req: PostmortemRequest, missing: list[str]) -> Job | None:
    """The job model of ``req.job_id``; a job the scheduler has forgotten is only its id (``missing`` says so).
    Raises ConfigError for an id that is not a Slurm job id."""
    if req.job_id is None:
        return None
    try:
        return scheduler_job.load_slurm_job(req.job_id)
    except JobNotFoundError as e:
        missing.append(
            f"job record unavailable: {e}; the job's nodes, window, state and exit code are unknown (Slurm forgets "
            "a job MinJobAge after it ends; accounting keeps it): the verdict comes from the logs and bundles alone"
        )
        return Job(scheduler=SchedulerKind.SLURM, job_id=req.job_id)


def _epilog_bundles(req: PostmortemRequest, missing: list[str]) -> list[Path]:
    if req.job_id is None or req.bundle_dir is None:
        return []
    kept = req.bundle_dir / req.job_id
    found = sorted(p for p in kept.iterdir() if p.is_dir()) if kept.is_dir() else []
    if not found:
        missing.append(f"no epilog bundles of job {req.job_id} under {kept} (slurm/epilog.sh writes them there)")
    return found


def sources_of(req: PostmortemRequest, bundles: list[Path], world_size: int | None) -> list[EvidenceSource]:
    """The evidence sources of a request: its logs, its bundles (``bundles``: given and epilog), its dumps."""
    sources: list[EvidenceSource] = []
    logs = log_files(req.logs)
    if logs:
        sources.append(LogFiles(logs))
    if bundles:
        sources.append(Bundles(bundles))
    if req.fr is not None:
        from fleetdx.orchestrator.postmortem.flight import FlightRecorderDumps

        sources.append(FlightRecorderDumps(req.fr, world_size, jobs=req.fr_jobs))
    return sources


def _with_store(report: PostmortemReport, req: PostmortemRequest) -> tuple[PostmortemReport, str]:
    """The report with the blamed hosts' stored history (their runs, this job's included), kept in
    the store unless ``req.save`` is false; and one line saying what happened. A store that cannot be opened
    costs the history and the keeping, never the postmortem: the line and ``missing_evidence`` say why.
    With ``req.save`` false, a store is not opened (nor SQLAlchemy imported) when no cause names a host or when
    the SQLite file of the URL does not exist: there is no history to read, and nothing is created."""
    if not req.save:
        if not history.blamed_hosts(report):
            return report, "postmortem not kept (--no-save); no host blamed, no history read"
        url = resolve_db_url(req.db)
        if (db := sqlite_file(url)) is not None and not db.exists():
            return report, f"postmortem not kept (--no-save); no history read: no store at {db}"
    from fleetdx.orchestrator.store import Store

    try:
        with Store.open(req.db) as store:
            if req.history:
                report = history.with_history(report, store)
            if not req.save:
                return report, f"postmortem not kept (--no-save); history read from {store.url}"
            record = history.save(report, store)
            return report, f"postmortem {record.postmortem_id} kept in {store.url}"
    except StoreError as e:
        note = f"no store: the hosts' history was not read and the postmortem not kept ({e})"
        missing = [*report.missing_evidence, f"the store's history of the hosts and the job ({e})"]
        return report.model_copy(update={"missing_evidence": missing}), note


def run_postmortem_request(
    req: PostmortemRequest, on_note: Callable[[str], None] | None = None, use_store: bool = True
) -> PostmortemReport:
    """The postmortem of ``req`` (module doc); ``on_note`` receives the line saying where it was kept.

    Raises:
        ConfigError: a usage error (nothing to read, a path that does not exist, not a Slurm job id).
    """
    _check(req)
    missing: list[str] = []
    job = _job(req, missing)
    bundles = list(dict.fromkeys([*req.bundles, *_epilog_bundles(req, missing)]))
    window = Window(
        since=req.since,
        until=req.until,
        nodes=frozenset(expand_hostlist(req.nodes)) if req.nodes else frozenset(),
    )
    world = max((p.rank for p in job.ranks), default=-1) + 1 if job is not None else 0
    report = run_postmortem(sources_of(req, bundles, world or None), job, window)
    if missing:
        report = report.model_copy(update={"missing_evidence": [*missing, *report.missing_evidence]})
    if use_store and (req.history or req.save):
        report, note = _with_store(report, req)
        if on_note is not None:
            on_note(note)
    return report
