"""The service's notifications: which stored reports raise a webhook event (:mod:`fleetdx.orchestrator.notify`).

Today one: a pre-flight pushed to ``POST /reports`` with a CRITICAL verdict (:func:`preflight_critical`), sent
once, when the run is first stored (a retried push of the same ``run_id`` sends nothing).
"""

from __future__ import annotations

from hostlist import collect_hostlist

from fleetdx.orchestrator.notify import Event, EventKind
from fleetdx.orchestrator.report import RunKind, RunReport
from fleetdx.probes.contracts import Severity, Verdict

#: findings named in an event's summary, at most (the event's ``codes`` list them all)
SUMMARY_FINDINGS = 1


def preflight_critical(report: RunReport) -> Event | None:
    """The event of a CRITICAL pre-flight (``None`` for any other run): the CRITICAL nodes, the codes of the
    critical findings, and a summary such as ``pre-flight pf-1 of job 4711 CRITICAL on gpu[07-08]:
    GPU_COUNT_MISMATCH on gpu07 (7 GPUs visible, 8 expected)``."""
    if report.kind is not RunKind.PREFLIGHT or report.verdict is not Verdict.CRITICAL:
        return None
    hosts = [n.host for n in report.nodes if n.verdict is Verdict.CRITICAL]
    critical = [f for f in report.findings if f.severity is Severity.CRITICAL]
    codes = list(dict.fromkeys(str(f.code.value) for f in critical))
    job_id = report.job.job_id if report.job is not None else None
    where = f"pre-flight {report.run_id}" + (f" of job {job_id}" if job_id else "")
    text = f"{where} CRITICAL on {collect_hostlist(hosts) if hosts else 'the run'}"
    if critical:
        first = critical[0]
        on = f" on {collect_hostlist(list(first.nodes))}" if first.nodes else ""
        text += f": {first.code.value}{on} ({' '.join(first.message.split())[:200]})"
        if len(critical) > 1:
            text += f" and {len(critical) - 1} more critical finding(s)"
    return Event(
        kind=EventKind.PREFLIGHT_CRITICAL,
        summary=text,
        verdict=report.verdict.name,
        hosts=hosts,
        codes=codes,
        run_id=report.run_id,
        job_id=job_id,
        details={"path": f"/runs/{report.run_id}", "level": report.level.value if report.level else None},
    )
