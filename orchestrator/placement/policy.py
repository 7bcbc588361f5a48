"""The health policy of placement: which stored evidence makes a node unfit, how long it counts, what clears it,
and how much a node's history ranks it down.

A node is **unfit** (never placed) when, in the store:

1. its **latest verdict is CRITICAL** (the newest run that lists it, whatever its kind or age: a broken node
   stays out until a run says otherwise), or
2. it has an **open** finding of severity CRITICAL with a code of :attr:`HealthPolicy.node_unfit_codes`
   (default: the code catalog's ``exclude-node`` codes: unreachable, wrong GPU count, InfiniBand port down,
   failed/hung/wrong nccl-tests, low busbw, transport fallback, straggler, GPU hardware fault, node failure,
   NCCL network error; ``fleetdx codes``).

Only a finding that names the node alone counts: a finding about a pair or a group (a slow pair, a hung
collective) does not say which member is at fault, as in the report's exclude list; localisation names the
straggler with a finding of its own.

A finding is **open** while it is younger than :attr:`HealthPolicy.open_finding_ttl_s` (default 7 days) *and*
no later clean pre-flight has cleared it: a **clean pre-flight** (the node's verdict OK or WARNING in a
pre-flight run) clears every finding of earlier runs; its own findings are the node's current state. So a
node condemned by a pre-flight is placeable again as soon as a later pre-flight judges it OK or WARNING
(:mod:`fleetdx.orchestrator.store.node_health` has the exact definitions and queries).

Open findings that name a GPU (:data:`fleetdx.orchestrator.placement.health.GPU_EXCLUDING`) exclude that GPU
on a fit node; the node is left out only when fewer than the job's GPUs per node remain.

**History** ranks fit nodes, after network locality (it never makes a job span one more switch):
each pre-flight in the last :attr:`HealthPolicy.history_window_s` (30 days) where the node was CRITICAL costs
:attr:`~HealthPolicy.penalty_per_failed_preflight` (1 point), each run there that named it a straggler
(``STRAGGLER_NODE``) :attr:`~HealthPolicy.penalty_per_straggler_run` (1 point), and a node no
stored run lists, or whose latest run could not judge it (UNKNOWN), :attr:`~HealthPolicy.penalty_unknown` (0.5:
behind a node known to be healthy, ahead of one that failed). Under the same switch, a node with fewer points
is always taken first; equal points go by the topology's order (fill order, then name).
"""

from __future__ import annotations

import datetime as dt

from pydantic import Field

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.judgement.catalog import node_unfit_codes
from fleetdx.orchestrator.placement.health import excludes_gpu, gpu_health
from fleetdx.orchestrator.store.node_health import NodeHealthRecord
from fleetdx.probes.contracts import Contract, Severity, Verdict
from fleetdx.topology.contracts import GpuExclusion

DAY = 86_400.0

#: the catalog's ``exclude-node`` codes (orchestrator/judgement/codes.yaml): one more is one row there
NODE_UNFIT_CODES = node_unfit_codes()


class HealthPolicy(Contract):
    """The placement policy's settings (see the module docstring). Times in seconds, penalties in points."""

    open_finding_ttl_s: float = Field(default=7 * DAY, gt=0)
    history_window_s: float = Field(default=30 * DAY, gt=0)
    node_unfit_codes: list[FindingCode] = Field(default_factory=lambda: list(NODE_UNFIT_CODES))
    penalty_per_failed_preflight: float = Field(default=1.0, ge=0)
    penalty_per_straggler_run: float = Field(default=1.0, ge=0)
    penalty_unknown: float = Field(default=0.5, ge=0)


DEFAULT_POLICY = HealthPolicy()


class NodeJudgement(Contract):
    """What the policy makes of one node's stored record."""

    host: str
    fit: bool
    reasons: list[str] = Field(default_factory=list)  #: why it is unfit (empty when fit)
    codes: list[FindingCode] = Field(default_factory=list)
    penalty: float = 0.0
    health: str  #: the latest verdict in words
    history: str  #: the history behind ``penalty`` in words
    gpu_exclusions: list[GpuExclusion] = Field(default_factory=list)
    unmapped: list[str] = Field(default_factory=list)  #: GPU findings that name no GPU row


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def judge(record: NodeHealthRecord | None, host: str, policy: HealthPolicy = DEFAULT_POLICY) -> NodeJudgement:
    """Apply ``policy`` to one node's stored ``record`` (``None`` or an empty record: never seen)."""
    if record is None or record.latest is None:
        return NodeJudgement(
            host=host,
            fit=True,
            penalty=policy.penalty_unknown,
            health="no stored run: health unknown",
            history=f"never seen: +{policy.penalty_unknown:g}",
        )
    latest = record.latest
    sim = " (simulated run)" if latest.simulated else ""
    health = (
        f"latest verdict {latest.verdict.name} in {latest.kind.value} {latest.run_id}{sim}"
        f" at {_when(latest.started_at)}"
    )
    reasons: list[str] = []
    codes: list[FindingCode] = []
    unfit = set(policy.node_unfit_codes)
    if latest.verdict is Verdict.CRITICAL:
        why = [
            f for f in record.open_findings if f.run_id == latest.run_id and f.severity is Severity.CRITICAL
        ]
        codes += [f.code for f in why]
        said = f" ({', '.join(f'{f.code.value} {f.subject}' for f in why)})" if why else ""
        reasons.append(f"{health}{said}: a CRITICAL node is not placed until a clean pre-flight")
    for f in record.open_findings:
        if latest.verdict is Verdict.CRITICAL and f.run_id == latest.run_id:
            continue  # said above
        if f.severity is Severity.CRITICAL and f.code in unfit and f.hosts == 1:
            fsim = " (simulated run)" if f.simulated else ""
            reasons.append(f"open {f.code.value} ({f.subject}) from {f.run_id}{fsim}: {f.message}")
            codes.append(f.code)
    as_findings = [
        Finding(code=f.code, severity=f.severity, nodes=[host], subject=f.subject, message=f.message)
        for f in record.open_findings
    ]
    gh = gpu_health([f for f in as_findings if excludes_gpu(f)], host=host) if as_findings else None
    penalty = (
        record.failed_preflights * policy.penalty_per_failed_preflight
        + record.straggler_runs * policy.penalty_per_straggler_run
    )
    if latest.verdict is Verdict.UNKNOWN:  # not judged: as good as never seen, no worse
        penalty += policy.penalty_unknown
    days = policy.history_window_s / DAY
    parts = []
    if record.failed_preflights:
        parts.append(f"{record.failed_preflights} CRITICAL pre-flight(s)")
    if record.straggler_runs:
        parts.append(f"{record.straggler_runs} straggler run(s)")
    history = f"{' and '.join(parts)} in {days:g} days" if parts else f"no failure in {days:g} days"
    if latest.verdict is Verdict.UNKNOWN:
        history += ", latest run could not judge it"
    history += f": +{penalty:g}"
    return NodeJudgement(
        host=host,
        fit=not reasons,
        reasons=reasons,
        codes=list(dict.fromkeys(codes)),
        penalty=penalty,
        health=health,
        history=history,
        gpu_exclusions=gh.excluded if gh else [],
        unmapped=gh.unmapped if gh else [],
    )
