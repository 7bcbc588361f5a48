"""One pre-flight run, end to end: targets -> Ray fan-out -> bundles -> facts -> diagnosis -> RunReport.

On each node a Ray task (:func:`collect_on_node`) runs :func:`probes.bundle.collect` with a
:class:`~probes.runner.SubprocessRunner` (live) or a :class:`~probes.runner.ReplayRunner` over the node's
bundle (simulated), and returns the raw bundle (text, small). The driver parses
(:func:`probes.facts.node_facts`) and diagnoses (:func:`orchestrator.diagnosis.engine.diagnose`), so parsers
and rules run in one place and one version. :func:`analyze_bundles` is the same diagnosis offline, on
bundle directories.

Deadlines: every command's own timeout (probes/commands.py) is capped at ``probe_timeout_s``; the whole run
at ``run_timeout_s`` (a node without an answer by then is ``NODE_UNREACHABLE``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.diagnosis.base import Fleet
from orchestrator.diagnosis.engine import Diagnosis, diagnose
from orchestrator.fanout import NodeOutcome, OutcomeKind, RayNode, fan_out
from orchestrator.report import RunKind, RunReport
from probes.bundle import BundleData, collect, read_bundle
from probes.commands import Level
from probes.contracts import Contract, EvidenceValue, Finding, FindingCode, Severity
from probes.facts import NodeFacts, node_facts
from probes.runner import ReplayRunner, Runner, RunResult, SubprocessRunner

#: default run deadline, seconds: quick level is meant to take <= 10 s per node (issue 4), nodes in parallel;
#: standard leaves room for the micro-benchmark (180 s cap) then the nccl-tests sweep (300 s cap) in sequence
DEFAULT_RUN_TIMEOUT_S = {Level.QUICK: 60.0, Level.STANDARD: 900.0, Level.FULL: 900.0}


def default_probe_cap(run_timeout_s: float) -> float:
    """Cap on each command's timeout when none is given: a third of the run deadline, so every command
    (the quick ones run in at most two waves, then the standard ones) ends, and the runner kills its process
    group, before the run deadline makes the driver cancel the node's task: a force-cancelled Ray worker could
    not clean up its children."""
    return run_timeout_s / 3


class NodeJob(Contract):
    """What one node's task does. ``bundle_dir`` set: replay it (simulation); ``delay_s``: sleep before each
    replayed command (simulation only); ``probe_timeout_s``: cap on every command's timeout."""

    host: str
    level: Level
    bundle_dir: Path | None = None
    delay_s: float = 0.0
    probe_timeout_s: float | None = None


class CappedRunner:
    """Wraps a runner: every command's timeout becomes ``min(its own, cap_s)``; with ``delay_s`` each call
    first     sleeps that long (used only to slow a simulated node's replay)."""

    def __init__(self, inner: Runner, cap_s: float | None = None, delay_s: float = 0.0) -> None:
        self.inner, self.cap_s, self.delay_s = inner, cap_s, delay_s

    def run(self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult:
        if self.delay_s > 0:
            time.sleep(self.delay_s)
        cap = timeout_s if self.cap_s is None else min(timeout_s, self.cap_s)
        return self.inner.run(argv, timeout_s=cap, env=env)


def _nccl_binary(level: Level) -> str | None:
    if level is Level.QUICK:
        return None
    from probes.nccl_tests_runner import NcclTest, find_binary

    return find_binary(NcclTest.ALL_REDUCE).path


def collect_on_node(job: NodeJob) -> BundleData:
    """The Ray task: collect ``job.level`` on this node (live) or replay ``job.bundle_dir`` (simulated)."""
    replay = job.bundle_dir is not None
    inner: Runner = ReplayRunner(job.bundle_dir) if job.bundle_dir is not None else SubprocessRunner()
    runner = CappedRunner(inner, job.probe_timeout_s, job.delay_s if replay else 0.0)
    if replay:  # the sweep's output is looked up in the bundle by its argv
        nccl = None if job.level is Level.QUICK else "all_reduce_perf"
    else:
        nccl = _nccl_binary(job.level)
    return collect(runner, job.level, job.host, sysfs_root=None if replay else Path("/"), nccl_binary=nccl)


def lost_finding(outcome: NodeOutcome[Any], run_timeout_s: float) -> Finding:
    """The finding for a node without a bundle: ``NODE_UNREACHABLE`` (critical) when it never answered,
    ``PROBE_FAILED`` (warning; the node is then UNKNOWN) when its collecting task raised."""
    evidence: dict[str, EvidenceValue] = {
        "ray_state": outcome.ray_state,
        "elapsed_s": round(outcome.elapsed_s, 3),
        "run_timeout_s": run_timeout_s,
        "error": outcome.error,
    }
    if outcome.kind is OutcomeKind.FAILED:
        return Finding(
            code=FindingCode.PROBE_FAILED,
            severity=Severity.WARNING,
            node=outcome.host,
            subject="collect",
            message=f"the probe task failed on the node: {outcome.error}",
            evidence=evidence,
        )
    return Finding(
        code=FindingCode.NODE_UNREACHABLE,
        severity=Severity.CRITICAL,
        node=outcome.host,
        subject="node",
        message=f"no bundle from the node: {outcome.error}",
        evidence=evidence,
    )


class PreflightResult(Contract):
    """A run's report plus the raw bundles it rests on (host -> bundle), for the store."""

    report: RunReport
    bundles: dict[str, BundleData]

    def raw(self) -> dict[str, dict[str, str]]:
        """host -> file name -> raw text, the shape ``store.save_report(raw=...)`` takes."""
        return {h: dict(b.files) for h, b in self.bundles.items()}


def build_report(
    kind: RunKind, diagnosis: Diagnosis, *, started_at: float, level: Level | None, simulated: bool
) -> RunReport:
    """Wrap a diagnosis as a :class:`RunReport` (exit code = the verdict's Nagios value)."""
    return RunReport(
        run_id=uuid.uuid4().hex,
        kind=kind,
        started_at=started_at,
        finished_at=time.time(),
        level=level.value if level else None,
        verdict=diagnosis.verdict,
        exit_code=int(diagnosis.verdict),
        simulated=simulated,
        nodes=diagnosis.nodes,
        findings=diagnosis.findings,
        exclude=diagnosis.exclude,
    )


def _fleet(facts: list[NodeFacts], gpus: int | None, gpus_source: str | None) -> Fleet:
    return Fleet(nodes=facts, expected_gpus_per_node=gpus, expected_gpus_source=gpus_source)


def run_preflight(
    jobs: Mapping[str, NodeJob],
    nodes: Mapping[str, RayNode | None],
    *,
    run_timeout_s: float,
    expected_gpus: int | None = None,
    expected_gpus_source: str | None = None,
    simulated: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    runtime_env: dict[str, Any] | None = None,
) -> PreflightResult:
    """Fan ``jobs`` out to ``nodes`` (host -> Ray node, ``None`` if absent) on a connected Ray, then diagnose.

    Returns within about ``run_timeout_s`` plus parsing time, whatever the nodes do. Never raises for a node's
    failure: every host of ``jobs`` has a node report.
    """
    started = time.time()
    outcomes = fan_out(
        jobs,
        collect_on_node,
        nodes=nodes,
        run_timeout_s=run_timeout_s,
        on_progress=on_progress,
        runtime_env=runtime_env,
    )
    bundles = {h: o.value for h, o in outcomes.items() if o.kind is OutcomeKind.DONE and o.value is not None}
    lost = [lost_finding(o, run_timeout_s) for o in outcomes.values() if o.kind is not OutcomeKind.DONE]
    facts = [node_facts(bundles[h]) for h in sorted(bundles)]
    diagnosis = diagnose(_fleet(facts, expected_gpus, expected_gpus_source), lost=lost)
    level = next(iter(jobs.values())).level if jobs else None
    report = build_report(RunKind.PREFLIGHT, diagnosis, started_at=started, level=level, simulated=simulated)
    return PreflightResult(report=report, bundles=bundles)


def analyze_bundles(bundle_dirs: Sequence[Path], expected_gpus: int | None = None) -> PreflightResult:
    """The pre-flight diagnosis, offline, on bundle directories (with or without ``meta.json``).

    Raises:
        BundleError: a directory is not a bundle.
    """
    started = time.time()
    bundles = [read_bundle(Path(d)) for d in bundle_dirs]
    facts = [node_facts(b) for b in bundles]
    gpus_source = "--gpus-per-node" if expected_gpus is not None else None
    diagnosis = diagnose(_fleet(facts, expected_gpus, gpus_source))
    report = build_report(RunKind.ANALYZE, diagnosis, started_at=started, level=None, simulated=False)
    return PreflightResult(report=report, bundles={b.host: b for b in bundles})


def save(url: str | None, result: PreflightResult) -> str:
    """Save the report and its raw bundles (``orchestrator.store.save_or_spool``: the database at ``url``,
    else ``FLEETDX_DB_URL``, else SQLite; a spool file when the database cannot be reached); returns one line
    saying where. Never raises for a database failure. The store is imported here: SQLAlchemy is heavy.
    """
    from orchestrator.store import save_or_spool

    return save_or_spool(url, result.report, result.raw()).message
