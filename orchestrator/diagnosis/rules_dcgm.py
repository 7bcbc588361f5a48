"""Rules on NVIDIA DCGM's diagnostics and health checks, where a bundle holds them (``collect --dcgm LEVEL``).

``DCGM_DIAG_FAILED``: one finding per ``dcgmi diag`` test whose result is **Fail** (critical) or **Warn**
(warning), naming the test, its category, the GPUs whose result it is and DCGM's own warning text. A test
DCGM skipped (``Skip - All``: not allowed on this SKU, or not part of the run level) is not a pass and not a
fault: no finding, and the run's list of tests stays in the evidence of nothing. A run whose output holds
``Error:`` lines or a ``runtime_error`` and no test result (plugins missing, DCGM not running) is a
**warning** ``DCGM_DIAG_FAILED`` with the error: the diagnostic did not run, which is not a pass.

``DCGM_HEALTH``: ``dcgmi health -c``'s overall result: ``Warning`` -> warning, ``Failure`` -> critical
(``Internal error``, DCGM's word for a result it could not name, -> warning: not proof of a fault), with
each incident (entity, watched system, health, DCGM's message); ``Healthy`` gives none. A check that could
not run (``Error: Health watches not enabled``) is a warning naming why (the watches are set with
``dcgmi health -s a``).

A ``dcgmi`` that timed out is ``PROBE_TIMEOUT`` (the engine's), its partial output kept in the bundle.
"""

from __future__ import annotations

from fleetdx.orchestrator.diagnosis.base import Fleet, Rule
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.catalog import NamedDcgmDiag, NamedDcgmHealth
from fleetdx.probes.contracts import Severity
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.dcgm import DcgmHealthResult, DcgmStatus, DcgmTest

#: characters of DCGM's warning texts kept in a finding's message
MESSAGE_CHARS = 300


def _test_finding(node: NodeFacts, run: NamedDcgmDiag, t: DcgmTest) -> Finding:
    sev = Severity.CRITICAL if t.status is DcgmStatus.FAIL else Severity.WARNING
    gpus = t.gpus
    where = f" on GPU {', '.join(map(str, gpus))}" if gpus else ""
    why = "; ".join(t.warnings)
    msg = f"DCGM diagnostic {t.category}/{t.name}: {t.status.value}{where}" + (f": {why}" if why else "")
    return Finding(
        code=FindingCode.DCGM_DIAG_FAILED,
        severity=sev,
        nodes=[node.host],
        gpu=str(gpus[0]) if len(gpus) == 1 else None,
        subject=t.name,
        message=msg[:MESSAGE_CHARS],
        details={
            "category": t.category,
            "test": t.name,
            "status": t.status.value,
            "gpus": list(gpus),
            "warnings": t.warnings[:10],
            "dcgm_version": run.diag.version,
            "file": run.file,
        },
    )


def dcgm_diag(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """``DCGM_DIAG_FAILED`` per failed or warned test of each ``dcgmi diag`` run (see the module doc)."""
    out: list[Finding] = []
    for run in node.dcgm_diag:
        judged = [t for t in run.diag.tests if t.status in (DcgmStatus.FAIL, DcgmStatus.WARN)]
        out += [_test_finding(node, run, t) for t in judged]
        ran = [t for t in run.diag.tests if t.status is not DcgmStatus.SKIP]
        if run.diag.errors and not ran:
            out.append(
                Finding(
                    code=FindingCode.DCGM_DIAG_FAILED,
                    severity=Severity.WARNING,
                    nodes=[node.host],
                    subject=run.file,
                    message=f"DCGM diagnostic did not run: {run.diag.errors[0]}"[:MESSAGE_CHARS],
                    details={"errors": run.diag.errors[:10], "dcgm_version": run.diag.version, "file": run.file},
                )
            )
    return out


def _health_finding(node: NodeFacts, check: NamedDcgmHealth) -> Finding | None:
    h = check.health
    if h.overall is None:
        why = h.errors[0] if h.errors else "no result"
        return Finding(
            code=FindingCode.DCGM_HEALTH,
            severity=Severity.WARNING,
            nodes=[node.host],
            subject=check.file,
            message=f"dcgmi health could not check: {why}"[:MESSAGE_CHARS],
            details={"errors": h.errors[:10], "file": check.file},
        )
    if h.overall is DcgmHealthResult.HEALTHY:
        return None
    sev = Severity.CRITICAL if h.overall is DcgmHealthResult.FAILURE else Severity.WARNING
    bad = [i for i in h.incidents if i.health is not DcgmHealthResult.HEALTHY]
    what = "; ".join(f"{i.entity} {i.system}: {i.health.value}" + (f" ({i.message})" if i.message else "") for i in bad)
    return Finding(
        code=FindingCode.DCGM_HEALTH,
        severity=sev,
        nodes=[node.host],
        subject=check.file,
        message=(f"dcgmi health: {h.overall.value}" + (f": {what}" if what else ""))[:MESSAGE_CHARS],
        details={
            "overall": h.overall.value,
            "incidents": [f"{i.entity} | {i.system} | {i.health.value} | {i.message}" for i in bad[:20]],
            "file": check.file,
        },
    )


def dcgm_health(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """``DCGM_HEALTH`` for each ``dcgmi health -c`` check that is not Healthy (see the module doc)."""
    return [f for c in node.dcgm_health if (f := _health_finding(node, c)) is not None]


RULES: list[Rule] = [dcgm_diag, dcgm_health]
