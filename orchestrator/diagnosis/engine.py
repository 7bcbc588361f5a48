"""The diagnosis engine: runs every rule over every node and adds the findings about the probes themselves.

It judges evidence, it does not set verdicts: :func:`diagnose` returns a :class:`Diagnosis` (every finding,
each node's probe summaries, and why a node could not be judged) and the job turns it into a report with
:func:`fleetdx.orchestrator.report.assemble_report`, where verdicts, exit code and exclude list are made.

A node whose probes produced nothing that could be judged (no probe ran and parsed, or no GPU inventory was
obtained: ``nvidia-smi`` skipped, failed or unparseable) is *unjudged* (its verdict will be at least UNKNOWN);
a node that never answered comes with its ``NODE_UNREACHABLE`` finding (critical) from the fan-out.

:func:`diagnose` judges a fleet held in memory; :func:`diagnose_stream` gives the same diagnosis from nodes
that arrive one by one (``fleetdx analyze`` of thousands of bundles) and keeps of each only its findings,
probe summaries and the few KiB the peer rules read, so its memory hardly grows with the fleet.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import Field

from fleetdx.orchestrator.diagnosis import rules_dcgm, rules_gpu, rules_ib, rules_nccl, rules_node, rules_topo
from fleetdx.orchestrator.diagnosis.base import Fleet, PeerViews, Rule
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import ProbeSummary
from fleetdx.probes.catalog import QUERY_GPU_FILE, SMI_XML_FILE
from fleetdx.probes.contracts import Contract, RunStatus, Severity
from fleetdx.probes.facts import NodeFacts, ProbeRecord

#: every rule the engine runs, in this order; each rules module exports ``RULES``
RULES: list[Rule] = [
    *rules_gpu.RULES,
    *rules_node.RULES,
    *rules_ib.RULES,
    *rules_dcgm.RULES,
    *rules_nccl.RULES,
    *rules_topo.RULES,
]

#: the rules of ``RULES`` that read the fleet; they read only ``base.PEER_FIELDS`` (:func:`diagnose_stream`)
PEER_RULES: list[Rule] = [*rules_gpu.PEER_RULES, *rules_ib.PEER_RULES, *rules_topo.PEER_RULES]

#: bundle files holding the GPU inventory; a node with none of them parsed cannot be judged (UNKNOWN)
GPU_INVENTORY_FILES = (SMI_XML_FILE, QUERY_GPU_FILE)


class Diagnosis(Contract):
    """The engine's result, the input of :func:`~fleetdx.orchestrator.report.assemble_report`: every host
    (sorted), every finding (in rule order), host -> its probe summaries, host -> why it cannot be judged."""

    hosts: list[str]
    findings: list[Finding]
    probes: dict[str, list[ProbeSummary]] = Field(default_factory=dict)
    unjudged: dict[str, str] = Field(default_factory=dict)


def probe_findings(node: NodeFacts) -> list[Finding]:
    """``PROBE_TIMEOUT`` / ``PROBE_FAILED`` for each probe that timed out or failed and each bundle entry that
    could not be read, ``PARSE_FAILED`` for each raw file its parser rejected; all ``warning``: a probe that
    could not run is not proof of a fault."""
    out: list[Finding] = []
    for p in node.probes:
        if p.status is RunStatus.TIMEOUT:
            out.append(_probe_finding(node.host, p, FindingCode.PROBE_TIMEOUT, "timed out"))
        elif p.status is RunStatus.FAILED:
            out.append(_probe_finding(node.host, p, FindingCode.PROBE_FAILED, "failed"))
    for name, why in sorted(node.unreadable.items()):
        out.append(
            Finding(
                code=FindingCode.PROBE_FAILED,
                severity=Severity.WARNING,
                nodes=[node.host],
                subject=name,
                message=f"bundle entry {name} could not be read: {why}; its evidence is missing",
                details={"file": name, "error": why},
            )
        )
    for f in node.parse_failures:
        out.append(
            Finding(
                code=FindingCode.PARSE_FAILED,
                severity=Severity.WARNING,
                nodes=[node.host],
                subject=f.file,
                message=f"{f.file} could not be parsed as {f.kind}: {f.message}",
                details={"file": f.file, "kind": f.kind, "line": f.line, "error": f.message},
            )
        )
    return out


def _probe_finding(host: str, p: ProbeRecord, code: FindingCode, what: str) -> Finding:
    cmd = " ".join(p.argv) if p.argv else p.name
    return Finding(
        code=code,
        severity=Severity.WARNING,
        nodes=[host],
        subject=p.name,
        message=f"probe {cmd!r} {what}: {p.error or p.status.value}",
        details={
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
    if node.gpu_source is None:
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


def _summaries(node: NodeFacts) -> list[ProbeSummary]:
    return [
        ProbeSummary(name=p.name, status=p.status, duration_s=p.duration_s, error=p.error)
        for p in node.probes
    ]


def diagnose(fleet: Fleet, lost: Sequence[Finding] = (), rules: Sequence[Rule] = RULES) -> Diagnosis:
    """Diagnose every node of ``fleet``.

    ``lost`` holds the findings about nodes that produced no facts at all (``NODE_UNREACHABLE`` from the
    fan-out); each such node is unjudged ("no facts: node lost"). Rules are run as
    given (``rules`` is injectable for tests); a rule that raises is a bug and propagates.
    """
    findings: list[Finding] = []
    probes: dict[str, list[ProbeSummary]] = {}
    unjudged: dict[str, str] = {}
    for node in fleet.nodes:
        reason = unjudged_reason(node)
        findings += probe_findings(node) + run_rules(node, fleet, rules)
        probes[node.host] = _summaries(node)
        if reason is not None:
            unjudged[node.host] = reason
    return _with_lost(findings, probes, unjudged, {n.host for n in fleet.nodes}, lost)


def _with_lost(
    findings: list[Finding],
    probes: dict[str, list[ProbeSummary]],
    unjudged: dict[str, str],
    known: set[str],
    lost: Sequence[Finding],
) -> Diagnosis:
    for f in lost:
        for host in f.nodes:
            if host not in known:
                unjudged.setdefault(host, "no facts: node lost")
        findings.append(f)
    return Diagnosis(hosts=sorted(known | set(unjudged)), findings=findings, probes=probes, unjudged=unjudged)


def diagnose_stream(
    nodes: Iterable[NodeFacts],
    *,
    expected_gpus_per_node: int | None = None,
    expected_gpus_source: str | None = None,
    lost: Sequence[Finding] = (),
) -> Diagnosis:
    """:func:`diagnose` of the fleet of ``nodes`` (with :data:`RULES`), equal to it, without holding the
    fleet: ``nodes`` is read once, in order, and each node is dropped once judged.

    As a node arrives its probe findings and the rules that read only their node run on it (they are given
    a fleet without nodes); of the node only :func:`~fleetdx.orchestrator.diagnosis.base.peer_view` is kept,
    a few KiB. Once all have arrived the :data:`PEER_RULES` run on those views (their majorities and peer
    figures built once). Findings come in :func:`diagnose`'s order.
    """
    peer_rules = {id(r) for r in PEER_RULES}
    empty = Fleet(nodes=[], expected_gpus_per_node=expected_gpus_per_node, expected_gpus_source=expected_gpus_source)
    views: list[NodeFacts] = []
    # per node: its findings so far, cut where a peer rule's go (they come at the end): a tuple of tuples,
    # the empty ones the one empty tuple (most rules find nothing on most nodes)
    held: list[tuple[tuple[Finding, ...], ...]] = []
    probes: dict[str, list[ProbeSummary]] = {}
    unjudged: dict[str, str] = {}
    view_of = PeerViews()
    for node in nodes:
        reason = unjudged_reason(node)
        parts: list[tuple[Finding, ...]] = []
        found = probe_findings(node)
        for rule in RULES:
            if id(rule) in peer_rules:
                parts.append(tuple(found))
                found = []
            else:
                found += rule(node, empty)
        parts.append(tuple(found))
        held.append(tuple(parts))
        probes[node.host] = _summaries(node)
        if reason is not None:
            unjudged[node.host] = reason
        views.append(view_of(node))
    fleet = Fleet(nodes=views, expected_gpus_per_node=expected_gpus_per_node, expected_gpus_source=expected_gpus_source)
    findings: list[Finding] = []
    for view, cut in zip(views, held, strict=True):
        rest = iter(cut)
        findings += next(rest)
        for rule in RULES:
            if id(rule) in peer_rules:
                findings += rule(view, fleet)
                findings += next(rest)
    return _with_lost(findings, probes, unjudged, {v.host for v in views}, lost)
