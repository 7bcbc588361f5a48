"""The periodic check of one Slurm node, the NHC way (``slurm/healthcheck.sh`` as slurm.conf's
``HealthCheckProgram``; ``fleetdx nodes check``): check it in-process, drain it on a CRITICAL verdict, and return
to service only what fleetdx itself drained, after a clean retest.

What it does, by the node's Slurm state (:mod:`fleetdx.orchestrator.scheduler.slurm_drain`) and its state in
the store (:mod:`fleetdx.orchestrator.diagnosis.node_states`):

* a node that runs jobs (Slurm MIXED or ALLOCATED): the jobs' own GPU processes are expected there, so
  GPU_FOREIGN_PROCESS findings are INFO and do not drain (:data:`JOB_EXPLAINED`); everything else is judged
  as on an idle node.
* **not drained**: a pre-flight of this host at ``level`` (quick by default), in this process, stored (its
  verdict moves the node: clean -> ok, critical -> suspect). CRITICAL: drained with ``fleetdx: CODE subject``
  and recorded as quarantined. When the database cannot be reached the report is spooled and a CRITICAL node
  is still drained (nothing can be recorded).
* **drained by an administrator** (any other reason), or **down**: nothing at all: no check, no change.
* **drained by fleetdx** (reason prefix ``fleetdx: `` or ``fleetdx preflight: ``) **and** the store holds it as
  suspect, quarantined or retesting: recorded quarantined (a prolog's drain is adopted), a retest starts, a
  pre-flight at the level of the run that failed (at least ``level``) runs and is stored; the state machine
  decides; ``returned`` -> ``scontrol update NodeName=X State=RESUME``. Held (flapping), failed or
  inconclusive: the node stays drained.
* in service in Slurm while the store holds it quarantined or retesting: someone resumed it by hand
  (``scontrol``); recorded as returned by a person, then checked as above.
* drained by fleetdx and the store says ``returned`` (a person ran ``fleetdx nodes return``, or a resume was
  interrupted): resumed without a retest.
* drained by fleetdx but the store does not hold it as failing (unknown, ``ok``; the database unreachable):
  nothing: the prefix alone never resumes a node.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from fleetdx.orchestrator.diagnosis.node_states import DrainEvent, NodeState, NodeStatus, RetestEvent, ReturnEvent
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.preflight.run import NodeJob, PreflightResult, run_local_preflight, stored_xid_history
from fleetdx.orchestrator.report import assemble_report
from fleetdx.orchestrator.scheduler import slurm_drain
from fleetdx.orchestrator.store import DatabaseUnreachable, SchemaOutdated, Store, save_or_spool, states
from fleetdx.probes.contracts import Contract, Level, Severity, Verdict, VerdictName
from fleetdx.probes.parsers.slurm_nodes import SlurmNode
from fleetdx.probes.runner import Runner

#: Slurm base states of a node that runs jobs
JOB_STATES = frozenset({"MIXED", "ALLOCATED", "COMPLETING"})
#: codes a running job explains on such a node: its own processes hold its GPUs (the rule is meant for a
#: pre-flight, before the job's processes start)
JOB_EXPLAINED = frozenset({FindingCode.GPU_FOREIGN_PROCESS})

#: how the check ran on this node: ``level`` and the run deadline in seconds -> the judged run
CheckFn = Callable[[Level, float], PreflightResult]


class Action(str, Enum):
    """What the periodic check did to the node."""

    CHECKED = "checked"  #: not drained; checked, no drain (clean, WARNING or no verdict)
    DRAINED = "drained"  #: found CRITICAL and drained
    RESUMED = "resumed"  #: drained by fleetdx, retest clean (or returned by a person): resumed
    KEPT_OUT = "kept_out"  #: drained by fleetdx, retest failed, inconclusive or held: still drained
    NOT_OURS = "not_ours"  #: drained by an administrator, or down: untouched
    UNCONFIRMED = "unconfirmed"  #: a fleetdx reason, but the store does not hold it as failing: untouched


class CheckOutcome(Contract):
    """One periodic check: the Slurm node and host, what was done, the run's verdict and id when one ran, the
    node's state after it (``None``: the store was not reached), and one line saying why."""

    node: str
    host: str
    action: Action
    verdict: VerdictName | None = None
    run_id: str | None = None
    state: NodeState | None = None
    message: str


def _first_critical(result: PreflightResult, host: str) -> str:
    for f in result.report.findings:
        if f.severity.value == "critical" and host in f.nodes:
            subject = f.subject if f.subject not in ("", "node") else ""
            return f"{f.code.value} {subject}".strip()
    return "CRITICAL"


def retest_level(level: Level, failed: Level | None) -> Level:
    """The level of a retest: the higher of ``level`` and the failed run's, at most ``standard`` (the local path
    has no cross-node step; a failure found at ``full`` is then not covered and the retest is inconclusive)."""
    order = [Level.QUICK, Level.STANDARD]
    wanted = max(order.index(level) if level in order else 1, order.index(failed) if failed in order else 0)
    if failed is Level.FULL:
        wanted = 1
    return order[wanted]


def local_check(
    host: str,
    expected_gpus: int | None,
    gpus_source: str | None,
    *,
    db: str | None = None,
    follow_kernel_log: Path | None = None,
) -> CheckFn:
    """The in-process pre-flight of ``host`` (:func:`run_local_preflight`) at a given level and deadline, its
    XIDs judged with the store's history of the host (``db``: :func:`stored_xid_history`; none when the
    database cannot be reached); with ``follow_kernel_log`` (a state file) only the kernel records written
    since the last check are judged (:func:`fleetdx.probes.kmsg.follow_kernel_log`)."""

    def check(level: Level, run_timeout_s: float) -> PreflightResult:
        return run_local_preflight(
            NodeJob(host=host, level=level, follow_kernel_log=follow_kernel_log),
            run_timeout_s=run_timeout_s,
            expected_gpus=expected_gpus,
            expected_gpus_source=gpus_source,
            xid_history=stored_xid_history(db, [host]),
        )

    return check


@dataclass(frozen=True)
class SlurmCheck:
    """The periodic check of Slurm node ``node`` (this machine, hostname ``host``): ``runner`` runs ``scontrol``,
    ``db`` is the database URL (None: the default), ``level`` the level of a check (a retest runs at least at
    the failed run's), ``run_timeout_s`` the pre-flight's deadline; ``check`` runs the pre-flight (None:
    :func:`local_check` of ``host``, expecting the GPU count of the node's ``Gres=``); ``now`` the clock;
    ``follow_kernel_log``: the kernel-log follower's state file (:func:`local_check`)."""

    node: str
    host: str
    runner: Runner
    db: str | None = None
    level: Level = Level.QUICK
    run_timeout_s: float = 60.0
    check: CheckFn | None = None
    now: Callable[[], float] = time.time
    follow_kernel_log: Path | None = None

    def run(self) -> CheckOutcome:
        """Check the node as the module doc says.

        Raises:
            SchedulerUnavailable: Slurm cannot be asked, or refuses a drain or a resume.
            ParseError: an unreadable ``scontrol`` answer.
            StoreError: the database fails after it was opened.
        """
        slurm = slurm_drain.slurm_node(self.runner, self.node)
        if self.check is None:
            gpus_source = "Slurm Gres" if slurm.gpus is not None else None
            local = local_check(
                self.host, slurm.gpus, gpus_source, db=self.db, follow_kernel_log=self.follow_kernel_log
            )
            return replace(self, check=local).run()
        if slurm.state in JOB_STATES:
            return replace(self, check=_jobs_running(self.check, slurm.raw_state)).run_on(slurm)
        return self.run_on(slurm)

    def run_on(self, slurm: SlurmNode) -> CheckOutcome:
        """:meth:`run` once Slurm's view of the node is known."""
        assert self.check is not None
        if (why := _not_ours(slurm)) is not None:
            return self._outcome(Action.NOT_OURS, f"{why}: not fleetdx's, untouched")
        try:
            store: Store | None = Store.open(self.db)
            unreachable = ""
        except (DatabaseUnreachable, SchemaOutdated) as e:
            store, unreachable = None, str(e)
        try:
            if not slurm_drain.drained(slurm):
                return self._in_service(self.check, store)
            if store is None:
                return self._outcome(Action.UNCONFIRMED, f"{unreachable}: not resumed")
            return self._retest(self.check, store, slurm.reason or "")
        finally:
            if store is not None:
                store.close()

    def _outcome(
        self, action: Action, message: str, result: PreflightResult | None = None, status: NodeStatus | None = None
    ) -> CheckOutcome:
        return CheckOutcome(
            node=self.node,
            host=self.host,
            action=action,
            verdict=None if result is None else _verdict(result),
            run_id=None if result is None else result.report.run_id,
            state=None if status is None else status.state,
            message=message,
        )

    def _in_service(self, check: CheckFn, store: Store | None) -> CheckOutcome:
        """A node in service: check it; drain and record it when CRITICAL (module doc)."""
        if store is not None:
            status = states.get(store, self.host)
            if status is not None and status.state in (NodeState.QUARANTINED, NodeState.RETESTING):
                # someone resumed it in Slurm by hand (scontrol): the store follows Slurm
                back = ReturnEvent(at=self.now(), reason="found back in service in Slurm (resumed outside fleetdx)")
                states.record(store, self.host, back)
        result = check(self.level, self.run_timeout_s)
        if store is None:
            save_or_spool(self.db, result.report, result.raw())
        else:
            store.save_report(result.report, result.raw())
        status = None if store is None else states.get(store, self.host)
        verdict = _verdict(result)
        if verdict is not Verdict.CRITICAL:
            return self._outcome(Action.CHECKED, verdict.name, result, status)
        reason = slurm_drain.drain_reason(_first_critical(result, self.host))
        # the check takes seconds: an administrator may have drained (or Slurm downed) the node meanwhile, and
        # draining now would replace their reason with fleetdx's. Slurm has no compare-and-set; reading its view
        # again just before the drain leaves a window of one scontrol call instead of the whole check
        if (why := _not_ours(slurm_drain.slurm_node(self.runner, self.node))) is not None:
            message = f"{why} set during the check ({verdict.name}): not fleetdx's, untouched"
            return self._outcome(Action.NOT_OURS, message, result, status)
        slurm_drain.drain(self.runner, self.node, reason)
        if store is not None:
            drained = DrainEvent(at=self.now(), reason=reason, run_id=result.report.run_id)
            status = states.record(store, self.host, drained).status
        return self._outcome(Action.DRAINED, reason, result, status)

    def _retest(self, check: CheckFn, store: Store, reason: str) -> CheckOutcome:
        """Drained with fleetdx's reason: retest, and resume only what the store confirms (module doc)."""
        status = states.get(store, self.host)
        if status is not None and status.state is NodeState.RETURNED:
            slurm_drain.resume(self.runner, self.node)
            return self._outcome(Action.RESUMED, f"returned in the store ({status.reason})", None, status)
        if status is None or status.state not in (NodeState.SUSPECT, NodeState.QUARANTINED, NodeState.RETESTING):
            held = "unknown to the store" if status is None else f"{status.state.value} in the store"
            return self._outcome(
                Action.UNCONFIRMED, f"drained with a fleetdx reason but {held}: untouched", None, status
            )
        if status.state is NodeState.SUSPECT:  # drained by the prolog (or by a check that could not record it)
            adopted = DrainEvent(at=self.now(), reason=reason, run_id=status.run_id)
            status = states.record(store, self.host, adopted).status or status
        states.record(store, self.host, RetestEvent(at=self.now()))
        result = check(retest_level(self.level, status.level), self.run_timeout_s)
        store.save_report(result.report, result.raw())
        after = states.get(store, self.host)
        if after is not None and after.state is NodeState.RETURNED:
            slurm_drain.resume(self.runner, self.node)
            return self._outcome(Action.RESUMED, after.reason, result, after)
        why = after.reason if after is not None else "no state"
        return self._outcome(Action.KEPT_OUT, why, result, after)


def _not_ours(slurm: SlurmNode) -> str | None:
    """Why Slurm's view of the node is not fleetdx's to change (DOWN, or drained with a reason not fleetdx's), or
    None when it is."""
    if slurm.state == "DOWN" or (slurm_drain.drained(slurm) and not slurm_drain.drained_by_fleetdx(slurm)):
        return f"Slurm state {slurm.raw_state}" + (f", reason {slurm.reason!r}" if slurm.reason else "")
    return None


def _jobs_running(check: CheckFn, slurm_state: str) -> CheckFn:
    """``check``, with the findings a running job explains (:data:`JOB_EXPLAINED`) turned to INFO and the
    verdicts judged again: on a MIXED or ALLOCATED node a job's own processes hold its GPUs."""

    def judged(level: Level, run_timeout_s: float) -> PreflightResult:
        result = check(level, run_timeout_s)
        r = result.report
        if not any(f.code in JOB_EXPLAINED for f in r.findings):
            return result
        why = f"jobs run on this node: Slurm state {slurm_state}"
        findings = [
            f.model_copy(update={"severity": Severity.INFO, "message": f"{f.message} ({why})"})
            if f.code in JOB_EXPLAINED
            else f
            for f in r.findings
        ]
        report = assemble_report(
            r.kind,
            [n.host for n in r.nodes],
            findings,
            started_at=r.started_at,
            probes={n.host: n.probes for n in r.nodes},
            unjudged={n.host: n.unjudged for n in r.nodes if n.unjudged},
            level=r.level,
            simulated=r.simulated,
            run_id=r.run_id,
            recommendations=r.recommendations,
        )
        return result.model_copy(update={"report": report})

    return judged


def _verdict(result: PreflightResult) -> Verdict:
    report = result.report
    return report.nodes[0].verdict if report.nodes else report.verdict
