"""The postmortem of one job: read every evidence source, keep the kernel events of the job's nodes and
window, correlate, and judge.

Verdict (Nagios, :class:`~fleetdx.probes.contracts.Verdict`): the worst severity of the causes found (a failed
job with a found cause is CRITICAL); when none is found it is never OK for a job that failed or whose end is
unknown: the postmortem says UNKNOWN, with an ``UNKNOWN`` cause and the evidence that was missing. Only a job
the scheduler reports ``COMPLETED`` with exit code 0 and no cause is OK.

Yearless stamps (glog, syslog) take the year of the job's start, else of ``--since``, else of the file's
modification time (``fleetdx.orchestrator.postmortem.sources``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.judgement.envelope import judge
from fleetdx.orchestrator.postmortem.contracts import BandwidthCurve, PostmortemReport, TimelineEntry, cause
from fleetdx.orchestrator.postmortem.correlate import DECISIVE, Correlation, correlate
from fleetdx.orchestrator.postmortem.sources import Context, Evidence, EvidenceSource, LogFiles
from fleetdx.probes.contracts import Job, Severity
from fleetdx.probes.parsers.joblog import EventKind, GpuFact, JobEvent

#: kinds read from kernel logs: these (and any event a kernel log gave, ``details["kernel_log"]``) are filtered by
#: the window and the node list
KERNEL_KINDS = frozenset(
    {
        EventKind.XID,
        EventKind.GPU_LOST,
        EventKind.IB_LINK_DOWN,
        EventKind.IB_LINK_UP,
        EventKind.IB_PORT_STATE,
        EventKind.AER,
    }
)
#: seconds a kernel event may lie outside the window and still count (an XID just before the job's first line
#: of output can be its cause; clocks of nodes and scheduler differ)
WINDOW_MARGIN_S = 300.0


@dataclass(frozen=True)
class Window:
    """The job's time window, Unix seconds (either end open), and the nodes whose kernel events count (empty:
    every node)."""

    since: float | None = None
    until: float | None = None
    nodes: frozenset[str] = frozenset()

    def admits(self, e: JobEvent) -> bool:
        """Whether a kernel event counts: its host among ``nodes`` (when given and the event names one) and its
        time inside the window give or take :data:`WINDOW_MARGIN_S` (an event without a date always counts)."""
        if e.kind not in KERNEL_KINDS and not e.details.get("kernel_log"):
            return True
        if self.nodes and e.host is not None and e.host not in self.nodes:
            return False
        if e.ts is None:
            return True
        if self.since is not None and e.ts < self.since - WINDOW_MARGIN_S:
            return False
        return not (self.until is not None and e.ts > self.until + WINDOW_MARGIN_S)


def _year(job: Job | None, window: Window) -> int | None:
    t = (job.start_time if job is not None else None) or window.since
    return datetime.fromtimestamp(t, tz=timezone.utc).year if t is not None else None


def job_window(job: Job | None, window: Window) -> Window:
    """``window`` with its open ends and node list filled from ``job`` (start/end time, nodes)."""
    if job is None:
        return window
    return Window(
        since=window.since if window.since is not None else job.start_time,
        until=window.until if window.until is not None else job.end_time,
        nodes=window.nodes or frozenset(job.nodes),
    )


_ISO_RE = re.compile(r"^\d{4}-\d\d-\d\dT")


def _iso_key(t: TimelineEntry) -> str | None:
    """The entry's time when it is ISO 8601 UTC (comparable as text), else ``None`` (a stamp as printed)."""
    return t.time if t.time and _ISO_RE.match(t.time) else None


def _merge_judged(
    corr: Correlation, judged: Sequence[Evidence], rank_hosts: dict[int, str]
) -> tuple[list[Finding], list[TimelineEntry], list[str]]:
    """The causes of sources that judge their own inputs, placed before the first correlated cause that only
    observes a failure; a named culprit of a hang makes the correlation's "which rank never reached it" moot."""
    extra = [c for ev in judged if ev.causes is not None for c in ev.causes(rank_hosts)]
    at = next((i for i, p in enumerate(corr.priorities) if p < DECISIVE), len(corr.causes))
    causes = corr.causes[:at] + extra + corr.causes[at:]
    timeline = list(corr.timeline)
    for t in (t for ev in judged if ev.timeline is not None for t in ev.timeline(rank_hosts)):
        key = _iso_key(t)
        at_t = next((i for i, u in enumerate(timeline) if key and (k := _iso_key(u)) and k > key), len(timeline))
        timeline.insert(at_t, t)
    missing = corr.missing
    if any(c.code is FindingCode.NCCL_TIMEOUT and c.rank is not None for c in extra):
        missing = [m for m in missing if "never reached" not in m]
    return causes, timeline, missing


def run_postmortem(
    sources: Sequence[EvidenceSource], job: Job | None = None, window: Window | None = None
) -> PostmortemReport:
    """The postmortem of the job whose evidence ``sources`` read (see the module doc)."""
    window = job_window(job, window or Window())
    ctx = Context(year=_year(job, window))
    events: list[JobEvent] = []
    rank_hosts: dict[int, str] = {}
    missing: list[str] = []
    kernel_logs = 0
    kernel_hosts: set[str] = set()
    out_of_window = 0
    seen_hosts: set[str] = set()
    task_ranks: dict[int, int] = {}
    task_hosts: dict[int, str] = {}
    gpus: list[GpuFact] = []
    curves: list[BandwidthCurve] = []
    judged: list[Evidence] = []
    for src in sources:
        ev = src.collect(ctx)
        missing += ev.missing
        if ev.causes is not None or ev.timeline is not None:
            judged.append(ev)
        kernel_logs += ev.kernel_logs
        curves += ev.curves
        kernel_hosts |= ev.kernel_hosts
        for log in ev.logs:
            seen_hosts.update(log.hosts)
            for t, r in log.task_ranks.items():
                task_ranks.setdefault(t, r)
            for t, h in log.task_hosts.items():
                task_hosts.setdefault(t, h)
            for r, h in log.rank_hosts.items():
                rank_hosts.setdefault(r, h)
            gpus += log.gpus
            for e in log.events:
                if window.admits(e):
                    events.append(e)
                else:
                    out_of_window += 1
    corr = correlate(events, job, rank_hosts, seen_hosts, task_ranks, gpus, task_hosts)
    causes, timeline = corr.causes, corr.timeline
    if judged:
        hosts_of = {**{p.rank: p.host for p in (job.ranks if job else [])}, **rank_hosts}
        causes, timeline, corr.missing = _merge_judged(corr, judged, hosts_of)
    missing += corr.missing
    if kernel_logs == 0:
        missing.append(
            "no kernel log of the job's nodes (--bundles, or a dmesg given with --logs): XIDs, GPUs fallen off "
            "the bus and InfiniBand link events could not be checked"
        )
    elif causes and causes[0].host and causes[0].host not in kernel_hosts and causes[0].nodes:
        missing.append(f"the kernel log of {causes[0].host}, where the first cause happened")
    if any(c.code is FindingCode.OOM_HOST and "SIGKILL" in c.message for c in causes):
        missing.append("an oom-kill line in the kernel log of the killed rank's host would confirm the OOM killer")
    if kernel_logs and window.since is None and window.until is None:
        missing.append(
            "no job window (--job, or --since/--until): kernel events of any time were counted, old ones included"
        )
    if out_of_window:
        missing.append(
            f"{out_of_window} kernel events outside the job's window (more than "
            f"{WINDOW_MARGIN_S:.0f} s before or after it) or on other nodes were left out"
        )
    if not any(isinstance(src, LogFiles) and src.paths for src in sources):
        missing.append(
            "no job log given (--logs): the ranks' own errors, and which host each rank ran on, were not read"
        )
    elif not events and not any("not read" in m for m in missing):
        missing.append("none of the logs given tells of a failure (give every rank's output with --logs)")
    completed = job is not None and (job.state or "").upper() == "COMPLETED" and job.exit_code == 0
    if not causes and not completed:
        causes = [
            cause(
                code=FindingCode.UNKNOWN,
                severity=Severity.UNKNOWN,
                message="no cause found in the evidence given; the job's failure is unexplained",
                action="give every rank's log (--logs), the nodes' bundles with their kernel logs (--bundles), and "
                "Flight Recorder dumps (--fr) where the job wrote them",
            )
        ]
    j = judge(causes)
    return PostmortemReport(
        verdict=j.verdict,
        exit_code=j.exit_code,
        job=job,
        findings=causes,
        timeline=timeline,
        missing_evidence=list(dict.fromkeys(missing)),
        bandwidth=curves,
    )
