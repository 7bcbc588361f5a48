"""The diagnosis engine: runs every rule over every node, adds the findings about the probes themselves, and
sets the verdicts.

Verdicts (Nagios convention, :class:`fleetdx.probes.contracts.Verdict`):

- a node's verdict is the worst severity of its findings (``info`` counts as OK);
- a node whose probes produced nothing that could be judged (no probe ran and parsed, or no GPU inventory was
  obtained: ``nvidia-smi`` skipped, failed or unparseable) is at least ``UNKNOWN``: fleetdx never calls a node
  healthy on missing evidence;
- a node that never answered (``NODE_UNREACHABLE``, from the fan-out) is ``CRITICAL``;
- the run's verdict is :meth:`Verdict.worst` of the node verdicts.

The exclude list is the Slurm-compressed hostlist (python-hostlist ``collect_hostlist``) of the nodes with at
least one critical finding, ready for ``sbatch --exclude``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import hostlist

from fleetdx.orchestrator.diagnosis import rules_gpu, rules_nccl, rules_node, rules_topo
from fleetdx.orchestrator.diagnosis.base import Fleet, Rule
from fleetdx.orchestrator.report import NodeReport, ProbeSummary
from fleetdx.probes.commands import QUERY_GPU_FILE, SMI_XML_FILE
from fleetdx.probes.contracts import Contract, Finding, FindingCode, Severity, Verdict, VerdictName
from fleetdx.probes.facts import NodeFacts, ProbeRecord
from fleetdx.probes.runner import RunStatus

#: every rule the engine runs, in this order; each rules module exports ``RULES``
RULES: list[Rule] = [*rules_gpu.RULES, *rules_node.RULES, *rules_nccl.RULES, *rules_topo.RULES]

#: bundle files holding the GPU inventory; a node with none of them parsed cannot be judged (UNKNOWN)
GPU_INVENTORY_FILES = (SMI_XML_FILE, QUERY_GPU_FILE)

_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.UNKNOWN: 2, Severity.INFO: 3}


class Diagnosis(Contract):
    """The engine's result: the run verdict, one report per node (sorted by host), every finding (most severe
    first, then by node), and the exclude hostlist ("" when no node is critical)."""

    verdict: VerdictName
    nodes: list[NodeReport]
    findings: list[Finding]
    exclude: str = ""


def probe_findings(node: NodeFacts) -> list[Finding]:
    """``PROBE_TIMEOUT`` / ``PROBE_FAILED`` for each probe that timed out or failed, ``PARSE_FAILED`` for
    each raw file its parser rejected; all ``warning`` (issue 4: a probe that could not run is not proof of
    a fault)."""
    out: list[Finding] = []
    for p in node.probes:
        if p.status is RunStatus.TIMEOUT:
            out.append(_probe_finding(node.host, p, FindingCode.PROBE_TIMEOUT, "timed out"))
        elif p.status is RunStatus.FAILED:
            out.append(_probe_finding(node.host, p, FindingCode.PROBE_FAILED, "failed"))
    for f in node.parse_failures:
        out.append(
            Finding(
                code=FindingCode.PARSE_FAILED,
                severity=Severity.WARNING,
                node=node.host,
                subject=f.file,
                message=f"{f.file} could not be parsed as {f.kind}: {f.message}",
                evidence={"file": f.file, "kind": f.kind, "line": f.line, "error": f.message},
            )
        )
    return out


def _probe_finding(host: str, p: ProbeRecord, code: FindingCode, what: str) -> Finding:
    cmd = " ".join(p.argv) if p.argv else p.name
    return Finding(
        code=code,
        severity=Severity.WARNING,
        node=host,
        subject=p.name,
        message=f"probe {cmd!r} {what}: {p.error or p.status.value}",
        evidence={
            "file": p.name,
            "argv": list(p.argv or []),
            "status": p.status.value,
            "duration_s": p.duration_s,
            "error": p.error,
        },
    )


def unjudged_reason(node: NodeFacts) -> str | None:
    """Why ``node`` cannot be judged (its verdict is at least UNKNOWN), or ``None`` when it can.

    A node can be judged when at least one probe ran and parsed and its GPU inventory was read.
    """
    failed = {f.file for f in node.parse_failures}
    usable = [p for p in node.probes if p.status is RunStatus.OK and p.name not in failed]
    if not usable:
        return "no probe ran and parsed"
    if node.smi is None and node.query_gpu is None:
        why = [
            f"{p.name}: {p.status.value}" + (f" ({p.error})" if p.error else "")
            for p in node.probes
            if p.name in GPU_INVENTORY_FILES
        ]
        why += [f"{f}: parse failed" for f in failed if f in GPU_INVENTORY_FILES]
        return "no GPU inventory" + (": " + "; ".join(why) if why else " (nvidia-smi output absent)")
    return None


def run_rules(node: NodeFacts, fleet: Fleet, rules: Sequence[Rule] = RULES) -> list[Finding]:
    """Every rule's findings for ``node``, in rule order."""
    out: list[Finding] = []
    for rule in rules:
        out.extend(rule(node, fleet))
    return out


def node_verdict(findings: Iterable[Finding], unjudged: bool) -> Verdict:
    """Worst severity of ``findings``; at least UNKNOWN when the node could not be judged."""
    verdicts = [f.severity.verdict for f in findings]
    if unjudged:
        verdicts.append(Verdict.UNKNOWN)
    return Verdict.worst(verdicts)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` in report order: most severe first (critical, warning, unknown, info), then by node
    (node-less findings first), finding code and subject."""
    return sorted(findings, key=lambda f: (_SEVERITY_ORDER[f.severity], f.node or "", f.code.value, f.subject))


def exclude_hostlist(findings: Iterable[Finding]) -> str:
    """Compressed Slurm hostlist of the nodes with a critical finding, e.g. ``"gpu[01-02,07]"``;
    "" for none."""
    hosts = sorted({f.node for f in findings if f.severity is Severity.CRITICAL and f.node})
    return hostlist.collect_hostlist(hosts) if hosts else ""


def _summaries(node: NodeFacts) -> list[ProbeSummary]:
    return [
        ProbeSummary(name=p.name, status=p.status, duration_s=p.duration_s, error=p.error)
        for p in node.probes
    ]


def diagnose(fleet: Fleet, lost: Sequence[Finding] = (), rules: Sequence[Rule] = RULES) -> Diagnosis:
    """Diagnose every node of ``fleet``.

    ``lost`` holds the findings about nodes that produced no facts at all (``NODE_UNREACHABLE`` from the
    fan-out); each such node gets a report with no probes and the verdict of its findings. Rules are run as
    given (``rules`` is injectable for tests); a rule that raises is a bug and propagates.
    """
    findings: list[Finding] = []
    reports: list[NodeReport] = []
    for node in fleet.nodes:
        reason = unjudged_reason(node)
        mine = probe_findings(node) + run_rules(node, fleet, rules)
        findings += mine
        reports.append(
            NodeReport(
                host=node.host,
                verdict=node_verdict(mine, reason is not None),
                probes=_summaries(node),
                unjudged=reason,
            )
        )
    known = {n.host for n in fleet.nodes}
    for host in sorted({f.node for f in lost if f.node and f.node not in known}):
        mine = [f for f in lost if f.node == host]
        findings += mine
        reports.append(
            NodeReport(host=host, verdict=node_verdict(mine, unjudged=True), unjudged="no facts: node lost")
        )
    findings = sort_findings(findings)
    reports.sort(key=lambda r: r.host)
    return Diagnosis(
        verdict=Verdict.worst(r.verdict for r in reports),
        nodes=reports,
        findings=findings,
        exclude=exclude_hostlist(findings),
    )
