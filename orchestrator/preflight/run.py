"""One pre-flight run, end to end: targets -> Ray fan-out -> bundles -> facts -> diagnosis -> RunReport.

On each node a Ray task (:func:`collect_on_node`) runs :func:`fleetdx.probes.bundle.collect` with a
:class:`~fleetdx.probes.runner.SubprocessRunner` (live) or a :class:`~fleetdx.probes.runner.ReplayRunner` over the
node's
bundle (simulated), and returns the raw bundle (text, small). The driver parses
(:func:`fleetdx.probes.facts.node_facts`) and diagnoses (:func:`fleetdx.orchestrator.diagnosis.engine.diagnose`), so
parsers
and rules run in one place and one version. :func:`analyze_bundles` is the same diagnosis offline, on
bundle directories.

Deadlines: every command's own timeout (probes/commands.py) is capped at ``probe_timeout_s``; the whole run
at ``run_timeout_s`` (a node without an answer by then is ``NODE_UNREACHABLE``).

Levels: ``standard`` adds the micro-benchmark and the intra-node nccl-tests sweep on each node; the
``all_reduce_perf`` binary is looked up *on the node* (``--nccl-tests-dir``, ``$NCCL_TESTS_HOME``, ``PATH``:
paths differ per node). ``full`` then adds the cross-node bandwidth step (:func:`bandwidth_step`): the
screen and localisation of :func:`fleetdx.orchestrator.preflight.bandwidth.run_bandwidth` over the nodes that answered
and have
no critical finding; its findings and curves join the report, and every node gets a ``cross-node-bandwidth``
probe entry saying whether it was paired, and why not.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hostlist
from pydantic import Field

from fleetdx.orchestrator.cluster.fanout import NodeOutcome, OutcomeKind, RayNode, fan_out
from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import Diagnosis, diagnose, diagnose_stream
from fleetdx.orchestrator.diagnosis.robust import DetectionPolicy
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import ProbeSummary, RunKind, RunReport, Schedule, assemble_report
from fleetdx.orchestrator.scheduler.job import node_name_from_env
from fleetdx.probes.bundle import BundleData, collect, read_bundle
from fleetdx.probes.catalog import NCCL_SWEEP_COLLECTIVE
from fleetdx.probes.contracts import Contract, EvidenceValue, Level, RunStatus, Severity
from fleetdx.probes.facts import NodeFacts, node_facts
from fleetdx.probes.parsers.xid import XidHistory
from fleetdx.probes.replay import ReplayRunner
from fleetdx.probes.runner import Runner, RunResult, SubprocessRunner

if TYPE_CHECKING:
    from fleetdx.orchestrator.cluster.collective import RayHost
    from fleetdx.orchestrator.store import SaveOutcome

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
    replayed command (simulation only); ``probe_timeout_s``: cap on every command's timeout;
    ``nccl_tests_dir``: where ``all_reduce_perf`` is *on the node* (``--nccl-tests-dir``; then the node's
    ``$NCCL_TESTS_HOME`` and ``PATH`` are searched); ``follow_kernel_log``: a state file *on the node*: the
    kernel log judged is only what was written since the last check that used it (``/dev/kmsg``, else
    ``journalctl -k --cursor-file``: :func:`fleetdx.probes.kmsg.follow_kernel_log`), for a node checked again
    and again (a periodic check, the DaemonSet's loop); ``dcgm_level``: also run ``dcgmi diag -r <level>`` and
    ``dcgmi health -c`` (1-3, :func:`fleetdx.probes.catalog.dcgm_probes`) -- for a retest, not a prolog: level 2
    takes minutes, so the run's deadline and ``probe_timeout_s`` must leave it
    :data:`~fleetdx.probes.catalog.DCGM_DIAG_TIMEOUT_S` of its level."""

    host: str
    level: Level
    bundle_dir: Path | None = None
    delay_s: float = 0.0
    probe_timeout_s: float | None = None
    nccl_tests_dir: str | None = None
    follow_kernel_log: Path | None = None
    dcgm_level: int | None = None


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


def node_nccl_binary(level: Level, nccl_tests_dir: str | None = None) -> str | None:
    """The path of ``all_reduce_perf`` for ``level`` on *this* machine (called inside the node's task: paths
    and environments differ per node): ``nccl_tests_dir``, then ``$NCCL_TESTS_HOME``, then ``PATH``
    (:func:`fleetdx.probes.nccl_tests_cmd.find_binary`). ``None`` at quick level or when not found (the sweep is
    then recorded ``skipped``)."""
    if level is Level.QUICK:
        return None
    from fleetdx.probes.nccl_tests_cmd import find_binary

    return find_binary(NCCL_SWEEP_COLLECTIVE, nccl_tests_dir, env=os.environ).path


def collect_on_node(job: NodeJob) -> BundleData:
    """The Ray task: collect ``job.level`` on this node (live) or replay ``job.bundle_dir`` (simulated).

    A live bundle is named after the Kubernetes node when the pod says which (``FLEETDX_K8S_NODE_NAME`` from
    ``spec.nodeName``, :func:`~fleetdx.orchestrator.scheduler.job.node_name_from_env`): a Ray node's hostname
    there is the pod's, and findings must name the node."""
    replay = job.bundle_dir is not None
    host = job.host if replay else (node_name_from_env(os.environ) or job.host)
    inner: Runner = ReplayRunner(job.bundle_dir) if job.bundle_dir is not None else SubprocessRunner()
    runner = CappedRunner(inner, job.probe_timeout_s, job.delay_s if replay else 0.0)
    if replay:  # the sweep's output is looked up in the bundle by its argv
        nccl = None if job.level is Level.QUICK else NCCL_SWEEP_COLLECTIVE.binary
    else:
        nccl = node_nccl_binary(job.level, job.nccl_tests_dir)
    root = None if replay else Path("/")
    bundle = collect(runner, job.level, host, sysfs_root=root, nccl_binary=nccl, dcgm_level=job.dcgm_level)
    if job.follow_kernel_log is not None and not replay:
        from fleetdx.probes.kmsg import follow_kernel_log, keep_xid_lines, with_followed_kernel_log

        follow = follow_kernel_log(job.follow_kernel_log, runner, keep_xid_lines, carry=drains_node)
        bundle = with_followed_kernel_log(bundle, follow)
    return bundle


def drains_node(line: str) -> bool:
    """A kernel-log line that drains a node by itself: an XID critical by its own line
    (:func:`~fleetdx.orchestrator.diagnosis.xid_table.classify`: the policy's draining codes, XID 154 by the
    action it names, an NVLink XID unless it says non-fatal) or the driver's line of a lost GPU. The kernel-log
    follower carries such lines into every later check of the boot (``NodeJob.follow_kernel_log``)."""
    from fleetdx.orchestrator.diagnosis.xid_table import classify
    from fleetdx.probes.errors import ParseError
    from fleetdx.probes.parsers.xid import parse_xid

    if "NVRM" not in line:
        return False
    try:
        log = parse_xid(line)
    except ParseError:
        return False
    return bool(log.driver_events) or any(
        classify(e.code, 1, e.message).severity is Severity.CRITICAL for e in log.events
    )


def lost_finding(outcome: NodeOutcome[Any], run_timeout_s: float) -> Finding:
    """The finding for a node without a bundle: ``NODE_UNREACHABLE`` (critical) when it never answered,
    ``PROBE_FAILED`` (warning; the node is then UNKNOWN) when its collecting task raised."""
    evidence: dict[str, EvidenceValue] = {
        "ray_state": outcome.ray_state,
        "elapsed_s": round(outcome.elapsed_s, 3),
        "run_timeout_s": run_timeout_s,
        "error": outcome.error,
    }
    failed = outcome.kind is OutcomeKind.FAILED
    return Finding(
        code=FindingCode.PROBE_FAILED if failed else FindingCode.NODE_UNREACHABLE,
        severity=Severity.WARNING if failed else Severity.CRITICAL,
        nodes=[outcome.host],
        subject="collect" if failed else "node",
        message=(f"the probe task failed on the node: {outcome.error}" if failed
                 else f"no bundle from the node: {outcome.error}"),
        details=evidence,
    )


class RawBundles(Mapping[str, Mapping[str, str]]):
    """host -> file name -> raw text of bundles in memory (``bundles``) and of bundle directories (``dirs``),
    the latter read again from disk each time a host's entry is read, so that going through the hosts one
    by one holds one directory's text at a time.

    Reading a directory's entry raises :class:`~fleetdx.probes.bundle.BundleError` when it is no longer a
    bundle."""

    def __init__(self, bundles: Mapping[str, BundleData], dirs: Mapping[str, Path]) -> None:
        self._bundles = bundles
        self._dirs = dirs

    def __getitem__(self, host: str) -> Mapping[str, str]:
        if host in self._dirs:
            return read_bundle(self._dirs[host]).files
        return self._bundles[host].files

    def __iter__(self) -> Iterator[str]:
        yield from self._bundles
        yield from (h for h in self._dirs if h not in self._bundles)

    def __len__(self) -> int:
        return len(self._bundles) + sum(h not in self._bundles for h in self._dirs)


class PreflightResult(Contract):
    """A run's report plus the raw bundles it rests on (host -> bundle), for the store; ``bundle_dirs``
    (host -> bundle directory) names those of ``fleetdx analyze``, whose text is not held in memory."""

    report: RunReport
    bundles: dict[str, BundleData]
    bundle_dirs: dict[str, Path] = Field(default_factory=dict)

    def raw(self) -> Mapping[str, Mapping[str, str]]:
        """host -> file name -> raw text, the shape ``store.save_report(raw=...)`` takes; the hosts of
        ``bundle_dirs`` read from their directory when their entry is read (:class:`RawBundles`)."""
        if not self.bundle_dirs:
            return {h: dict(b.files) for h, b in self.bundles.items()}
        return RawBundles(self.bundles, self.bundle_dirs)


def report_of(
    kind: RunKind, diagnosis: Diagnosis, *, started_at: float, level: Level | None, simulated: bool
) -> RunReport:
    """A diagnosis as a :class:`RunReport` (:func:`~fleetdx.orchestrator.report.assemble_report`)."""
    return assemble_report(
        kind,
        diagnosis.hosts,
        diagnosis.findings,
        started_at=started_at,
        probes=diagnosis.probes,
        unjudged=diagnosis.unjudged,
        level=level,
        simulated=simulated,
    )


def _fleet(facts: list[NodeFacts], gpus: int | None, gpus_source: str | None) -> Fleet:
    return Fleet(nodes=facts, expected_gpus_per_node=gpus, expected_gpus_source=gpus_source)


#: the name of the cross-node bandwidth step in each node's probe list (``NodeReport.probes``)
BANDWIDTH_PROBE = "cross-node-bandwidth"


class BandwidthStep(Contract):
    """How ``--level full`` measures bandwidth across nodes
    (:func:`fleetdx.orchestrator.preflight.bandwidth.run_bandwidth`).

    ``sizes`` in bytes (``None``: the probe's default sweep, 4-64 MiB); ``timeout_s`` bounds each round's
    collectives (a group still running then is ``NCCL_TEST_HANG``); ``inject_delay_s`` maps host -> seconds
    of delay per operation of its rank (tests only: an injected straggler); ``policy`` the detection's
    thresholds (``None``: the backend's default, :meth:`DetectionPolicy.for_backend`).
    """

    schedule: Schedule = Schedule.LOCALISE
    sizes: list[int] | None = None
    iters: int = Field(default=10, ge=1)
    warmup_iters: int = Field(default=2, ge=0)
    timeout_s: float = Field(default=120.0, gt=0)
    inject_delay_s: dict[str, float] = Field(default_factory=dict)
    policy: DetectionPolicy | None = None


def bandwidth_candidates(
    hosts: Sequence[str], answered: Sequence[str], exclude: str
) -> tuple[list[str], dict[str, str]]:
    """Split the run's ``hosts`` into those the bandwidth step pairs and, for the others, why not.

    A host is paired when it answered the node probes (``answered``) and is not in ``exclude`` (the node
    probes' hostlist of critical nodes: pairing a node already excluded would only blame its partners).
    Returns (sorted hosts to pair, host -> reason it is not paired).
    """
    critical = set(hostlist.expand_hostlist(exclude)) if exclude else set()
    done = set(answered)
    why: dict[str, str] = {}
    for h in hosts:
        if h not in done:
            why[h] = "not paired: no bundle from the node probes"
        elif h in critical:
            why[h] = "not paired: excluded by critical findings of the node probes"
    return sorted(h for h in hosts if h not in why), why


def _ray_hosts(pair: Sequence[str], nodes: Mapping[str, RayNode | None]) -> dict[str, RayHost]:
    """host -> Ray node as the collective probe takes it, from the fan-out's match (simulated nodes are
    named by their resource there, which :func:`fleetdx.orchestrator.cluster.collective.ray_hosts` does not read)."""
    from fleetdx.orchestrator.cluster.collective import RayHost, ray_hosts

    ips = {h.node_id: h.ip for h in ray_hosts()}
    out: dict[str, RayHost] = {}
    for h in pair:
        n = nodes.get(h)
        if n is not None:
            out[h] = RayHost(name=h, node_id=n.node_id, ip=ips.get(n.node_id, ""), gpus=int(n.gpus))
    return out


def bandwidth_step(
    report: RunReport, answered: Sequence[str], nodes: Mapping[str, RayNode | None], step: BandwidthStep
) -> RunReport:
    """Run the cross-node bandwidth step after the node probes and merge it into ``report``.

    Pairs :func:`bandwidth_candidates`; with fewer than 2 the step is ``skipped`` with the reason (no
    measurement, no number). Otherwise :func:`fleetdx.orchestrator.preflight.bandwidth.run_bandwidth` (nccl when every
    paired
    node has a GPU, else gloo) and :func:`merge_bandwidth`. A step that raises (Ray itself failing) is
    recorded ``failed`` on every paired node with a ``PROBE_FAILED`` warning; the node results stand.
    """
    from fleetdx.orchestrator.preflight.bandwidth import run_bandwidth

    pair, why = bandwidth_candidates([n.host for n in report.nodes], answered, report.exclude)
    t0 = time.monotonic()
    if len(pair) < 2:
        reason = f"{len(pair)} node(s) to pair after the node probes; a bandwidth screen needs at least 2"
        return merge_bandwidth(
            report,
            None,
            why,
            {h: ProbeSummary(name=BANDWIDTH_PROBE, status=RunStatus.SKIPPED, error=reason) for h in pair},
        )
    try:
        bw = run_bandwidth(
            pair,
            schedule=step.schedule,
            sizes=step.sizes,
            iters=step.iters,
            warmup_iters=step.warmup_iters,
            timeout_s=step.timeout_s,
            inject_delay_s=step.inject_delay_s or None,
            policy=step.policy,
            known=_ray_hosts(pair, nodes),
        )
    except Exception as e:  # noqa: BLE001 - edge: the node reports must survive a failed bandwidth step
        err = f"{type(e).__name__}: {str(e).strip()[:300]}"
        summary = ProbeSummary(
            name=BANDWIDTH_PROBE, status=RunStatus.FAILED, duration_s=time.monotonic() - t0, error=err
        )
        failed = [
            Finding(
                code=FindingCode.PROBE_FAILED,
                severity=Severity.WARNING,
                nodes=[h],
                subject=BANDWIDTH_PROBE,
                message=f"the cross-node bandwidth step failed: {err}",
                details={"paired": list(pair), "error": err},
            )
            for h in pair
        ]
        return merge_bandwidth(report, None, why, dict.fromkeys(pair, summary), extra=failed)
    done = ProbeSummary(name=BANDWIDTH_PROBE, status=RunStatus.OK, duration_s=time.monotonic() - t0)
    return merge_bandwidth(report, bw, why, dict.fromkeys(pair, done))


def merge_bandwidth(
    report: RunReport,
    bw: RunReport | None,
    not_paired: Mapping[str, str],
    paired: Mapping[str, ProbeSummary],
    extra: Sequence[Finding] = (),
) -> RunReport:
    """``report`` with the bandwidth step merged in, re-assembled
    (:func:`~fleetdx.orchestrator.report.assemble_report`) from both runs' findings and ``extra``: one
    ``cross-node-bandwidth`` probe entry per node (``paired``'s, or ``skipped`` with the ``not_paired``
    reason), ``bw``'s curves and schedule; the run keeps ``report``'s id, start and level."""
    probes = {
        n.host: [
            *n.probes,
            paired.get(n.host)
            or ProbeSummary(
                name=BANDWIDTH_PROBE, status=RunStatus.SKIPPED, error=not_paired.get(n.host, "not paired")
            ),
        ]
        for n in report.nodes
    }
    return assemble_report(
        report.kind,
        [n.host for n in report.nodes],
        [*report.findings, *(bw.findings if bw else []), *extra],
        started_at=report.started_at,
        probes=probes,
        unjudged={n.host: n.unjudged for n in report.nodes if n.unjudged is not None},
        level=report.level,
        schedule=bw.schedule if bw else None,
        simulated=report.simulated,
        curves=[*report.curves, *(bw.curves if bw else [])],
        recommendations=report.recommendations,
        run_id=report.run_id,
    )


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
    bandwidth: BandwidthStep | None = None,
    lost: Mapping[str, NodeOutcome[BundleData]] | None = None,
    xid_history: Mapping[str, XidHistory] | None = None,
) -> PreflightResult:
    """Fan ``jobs`` out to ``nodes`` (host -> Ray node, ``None`` if absent) on a connected Ray, then diagnose.

    ``xid_history``: host -> the store's earlier XID findings about it (:func:`stored_xid_history`), so that
    application XIDs are judged across jobs; ``None`` (no store): the single-run judgement.

    ``lost``: hosts already known to be out of reach, with their UNREACHABLE outcome (a node that did not
    join the Ray that fleetdx started on the allocation, :mod:`fleetdx.orchestrator.cluster.allocation`):
    they are not fanned out to, and are reported with that outcome's reason.

    At level ``full`` the cross-node bandwidth step follows (:func:`bandwidth_step`, options ``bandwidth``,
    default :class:`BandwidthStep`). Returns within about ``run_timeout_s`` plus parsing time (plus, at
    ``full``, the bandwidth step: at most ``bandwidth.timeout_s`` per round), whatever the nodes do. Never
    raises for a node's failure: every host of ``jobs`` has a node report.
    """
    started = time.time()
    lost = lost or {}
    outcomes = fan_out(
        {h: j for h, j in jobs.items() if h not in lost},
        collect_on_node,
        nodes=nodes,
        run_timeout_s=run_timeout_s,
        on_progress=on_progress,
        runtime_env=runtime_env,
    )
    outcomes.update({h: o for h, o in lost.items() if h in jobs})
    level = next(iter(jobs.values())).level if jobs else None
    result = _judge(
        outcomes, level, started, run_timeout_s, expected_gpus, expected_gpus_source, simulated, xid_history
    )
    if level is Level.FULL:
        report = bandwidth_step(result.report, sorted(result.bundles), nodes, bandwidth or BandwidthStep())
        result = PreflightResult(report=report, bundles=result.bundles)
    return result


def _judge(
    outcomes: Mapping[str, NodeOutcome[BundleData]],
    level: Level | None,
    started: float,
    run_timeout_s: float,
    expected_gpus: int | None,
    expected_gpus_source: str | None,
    simulated: bool,
    xid_history: Mapping[str, XidHistory] | None = None,
) -> PreflightResult:
    bundles = {h: o.value for h, o in outcomes.items() if o.kind is OutcomeKind.DONE and o.value is not None}
    lost = [lost_finding(o, run_timeout_s) for o in outcomes.values() if o.kind is not OutcomeKind.DONE]
    facts = [with_xid_history(node_facts(bundles[h]), xid_history) for h in sorted(bundles)]
    diagnosis = diagnose(_fleet(facts, expected_gpus, expected_gpus_source), lost=lost)
    report = report_of(RunKind.PREFLIGHT, diagnosis, started_at=started, level=level, simulated=simulated)
    return PreflightResult(report=report, bundles=bundles)


def with_xid_history(facts: NodeFacts, history: Mapping[str, XidHistory] | None) -> NodeFacts:
    """``facts`` with the store's XID history of its host (``NodeFacts.xid_history``) when ``history`` has it."""
    if history is None or facts.host not in history:
        return facts
    return facts.model_copy(update={"xid_history": history[facts.host]})


def stored_xid_history(db: str | None, hosts: Sequence[str], now: float | None = None) -> dict[str, XidHistory] | None:
    """host -> its earlier GPU_XID findings in the store at ``db`` (None: the default database) within the
    cross-job window (:data:`~fleetdx.orchestrator.diagnosis.xid_table.CROSS_JOB_WINDOW_S`, from ``now``),
    for :func:`run_preflight` / :func:`run_local_preflight`'s ``xid_history``. ``None`` when the database
    cannot be reached or its schema is outdated: the XID rule then judges this run alone (and says so). Opens
    the database: not for a prolog that must not load a database library (``--spool``)."""
    from fleetdx.orchestrator.diagnosis.xid_table import CROSS_JOB_WINDOW_S
    from fleetdx.orchestrator.store import Store, StoreError
    from fleetdx.orchestrator.store.xid_history import xid_history

    since = (time.time() if now is None else now) - CROSS_JOB_WINDOW_S
    try:
        with Store.open(db) as store:
            return xid_history(store, hosts, since=since)
    except StoreError:
        return None


def collect_here(job: NodeJob, run_timeout_s: float) -> NodeOutcome[BundleData]:
    """Collect ``job`` on this machine, in this process, without Ray: the local fast path of a pre-flight
    whose only target is this host (a prolog, a single-node job). The collection runs in a daemon thread
    joined for at most ``run_timeout_s`` s; past that the outcome is UNREACHABLE ("did not finish") and the
    thread is left to end by itself (every command it runs has its own deadline, ``job.probe_timeout_s``).
    An exception in the collection is a FAILED outcome with its one-line reason, never a crash."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = collect_on_node(job)
        except Exception as e:  # noqa: BLE001 - becomes the node's PROBE_FAILED finding, as a Ray task's error does
            box["error"] = f"{type(e).__name__}: {e}"

    t0 = time.monotonic()
    thread = threading.Thread(target=work, name="fleetdx-collect-here", daemon=True)
    thread.start()
    thread.join(run_timeout_s)
    elapsed = time.monotonic() - t0
    if thread.is_alive():
        error = f"the probes did not finish within {run_timeout_s:g} s"
        return NodeOutcome(job.host, OutcomeKind.UNREACHABLE, error=error, elapsed_s=elapsed, ray_state="no Ray")
    if "error" in box:
        return NodeOutcome(job.host, OutcomeKind.FAILED, error=box["error"], elapsed_s=elapsed, ray_state="no Ray")
    return NodeOutcome(job.host, OutcomeKind.DONE, value=box["value"], elapsed_s=elapsed, ray_state="no Ray")


def run_local_preflight(
    job: NodeJob,
    *,
    run_timeout_s: float,
    expected_gpus: int | None = None,
    expected_gpus_source: str | None = None,
    xid_history: Mapping[str, XidHistory] | None = None,
) -> PreflightResult:
    """Pre-flight of this machine alone, in this process (:func:`collect_here`), judged exactly as a Ray
    fan-out's result is (``xid_history`` as :func:`run_preflight` takes it). Level ``full`` has no cross-node
    step on one node: it is refused here.

    Raises:
        ValueError: ``job.level`` is ``full``.
    """
    if job.level is Level.FULL:
        raise ValueError("the local path runs quick or standard; full needs two or more nodes")
    started = time.time()
    outcome = collect_here(job, run_timeout_s)
    return _judge(
        {job.host: outcome},
        job.level,
        started,
        run_timeout_s,
        expected_gpus,
        expected_gpus_source,
        False,
        xid_history,
    )


def analyze_bundles(bundle_dirs: Sequence[Path], expected_gpus: int | None = None) -> PreflightResult:
    """The pre-flight diagnosis, offline, on bundle directories (with or without ``meta.json``).

    Streamed (:func:`~fleetdx.orchestrator.diagnosis.engine.diagnose_stream`): one bundle's text and facts
    in memory at a time, so memory hardly grows with the number of bundles; the result's raw outputs are
    read again from the directories when the store asks (:meth:`PreflightResult.raw`).

    Raises:
        BundleError: a directory is not a bundle.
    """
    started = time.time()
    dirs: dict[str, Path] = {}

    def facts() -> Iterator[NodeFacts]:
        for d in bundle_dirs:
            bundle = read_bundle(Path(d))
            dirs[bundle.host] = Path(d)
            yield node_facts(bundle)

    gpus_source = "--gpus-per-node" if expected_gpus is not None else None
    diagnosis = diagnose_stream(facts(), expected_gpus_per_node=expected_gpus, expected_gpus_source=gpus_source)
    report = report_of(RunKind.ANALYZE, diagnosis, started_at=started, level=None, simulated=False)
    return PreflightResult(report=report, bundles={}, bundle_dirs=dirs)


def spool(result: PreflightResult) -> SaveOutcome:
    """Write the report and its raw bundles to a spool file, no database
    (:func:`fleetdx.orchestrator.store.spool.spool_report`); the outcome says where. Never raises for a disk
    failure."""
    from fleetdx.orchestrator.store.spool import spool_report

    return spool_report(result.report, result.raw())


def save(url: str | None, result: PreflightResult) -> SaveOutcome:
    """Save the report and its raw bundles (``fleetdx.orchestrator.store.save_or_spool``: the database at
    ``url``, else ``FLEETDX_DB_URL``, else SQLite; a spool file when the database cannot be reached); the
    outcome says where (its ``message`` in one line). Never raises for a database failure. The store is
    imported here: SQLAlchemy is heavy.
    """
    from fleetdx.orchestrator.store import save_or_spool

    return save_or_spool(url, result.report, result.raw())
