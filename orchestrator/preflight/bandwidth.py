"""The bandwidth run: schedules -> measurements -> detection -> findings and curves ->
``RunReport(kind=bandwidth)``.

:func:`screen_and_localise` is the pure driver: it takes the allocation and a *measurer* (a function that runs
one round of groups and returns one :class:`~fleetdx.orchestrator.preflight.detection.Measurement` per group) and
decides what
to measure next. The live run passes a Ray/torch.distributed measurer (:func:`run_bandwidth`);
``bench/detection.py`` passes a simulated one; both run this same code.

Localisation after the screen (schedule ``localise``): every low pair of the screen is a *suspect set* known
to hold at least one slow node. Each round splits every suspect set in two halves and measures each half (a
one-node half paired with a node the screen cleared); a half that is low again stays suspect, a half that is
not is cleared. A single suspect is re-measured with a fresh cleared partner until its low measurements
outnumber its normal ones by ``policy.confirmations`` (named) or no longer outnumber them (cleared) -- so one
slow node among N is named within ceil(log2 N) + 2 rounds after the screen (3 when the screen works on pairs
and every measurement agrees). Allocations smaller than ``policy.min_nodes_for_screen`` are
measured with the full round-robin instead: one round of pairs gives too few values for a median.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import hostlist
from pydantic import Field

from fleetdx.orchestrator.cluster.collective import (
    Backend,
    GroupResult,
    GroupStatus,
    RayCollectiveProbe,
    RayHost,
    SweepSpec,
    ray_hosts,
)
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.preflight.detection import (
    Baseline,
    DetectionPolicy,
    Measurement,
    MeasureStatus,
    NodeJudgement,
    allocation_baseline,
    attribute,
    history_lows,
    low_measurements,
    node_scores,
)
from fleetdx.orchestrator.preflight.schedules import (
    Group,
    localisation_round_bound,
    quick_screen,
    round_robin,
    split_round,
)
from fleetdx.orchestrator.report import BusbwCurve, RunKind, RunReport, Schedule, assemble_report
from fleetdx.probes.contracts import Collective, Contract, EvidenceValue, JsonScalar, Severity
from fleetdx.probes.errors import ConfigError

#: runs one round (round index, its disjoint groups) and returns one measurement per group, in order
Measurer = Callable[[int, Sequence[Group]], list[Measurement]]


class ScreenResult(Contract):
    """Everything a screen (and localisation) measured and concluded."""

    schedule: Schedule
    nodes: list[str]
    rounds: int  #: rounds run in all (screen included)
    localisation_rounds: int  #: rounds after the screen (0 for roundrobin and quick)
    measurements: list[Measurement]
    baseline: Baseline | None
    judgements: dict[str, NodeJudgement] = Field(default_factory=dict)
    stragglers: list[str] = Field(default_factory=list)
    unexplained_low: list[Measurement] = Field(default_factory=list)  #: low, no straggler among its nodes


def _run_rounds(rounds: Sequence[Sequence[Group]], measure: Measurer, first: int) -> list[Measurement]:
    out: list[Measurement] = []
    for i, rnd in enumerate(rounds):
        if rnd:
            out.extend(measure(first + i, rnd))
    return out


def _localise(
    screen: list[Measurement],
    nodes: list[str],
    baseline: Baseline,
    measure: Measurer,
    policy: DetectionPolicy,
    max_rounds: int,
) -> list[Measurement]:
    """Adaptive localisation after the screen; returns the extra measurements (see the module docstring)."""
    lows = low_measurements(screen, baseline, policy)
    low_ids = {id(m) for m in lows}
    good = [
        n
        for n in nodes
        if any(n in m.nodes and id(m) not in low_ids and m.status is MeasureStatus.OK for m in screen)
    ]
    sets: list[list[str]] = [list(m.nodes) for m in lows]
    evidence: dict[str, list[int]] = {}  #: single suspect -> [low, normal] measurements with cleared partners
    partners: dict[str, set[str]] = {}
    for m in screen:
        for n in m.nodes:
            partners.setdefault(n, set()).update(o for o in m.nodes if o != n)
    extra: list[Measurement] = []
    good_set = set(good)
    r = 1
    while sets and r <= max_rounds:
        try:
            rounds = split_round(sets, good, partners)
        except ValueError:
            break
        next_sets: list[list[str]] = []
        for rnd in rounds:
            if r > max_rounds:
                break  # the promised bound: what is still undecided stays unnamed
            ms = measure(r, rnd)
            r += 1
            extra.extend(ms)
            for group, m in zip(rnd, ms, strict=True):
                for n in group:
                    partners.setdefault(n, set()).update(o for o in group if o != n)
                if m.status is not MeasureStatus.OK or m.busbw_gbps is None:
                    continue  # a failed group is reported on its own; it proves nothing about speed
                low = baseline.is_low(m.busbw_gbps, policy)
                suspects = [n for n in group if n not in good_set]
                if len(suspects) > 1:
                    if low:
                        next_sets.append(suspects)
                    continue
                ev = evidence.setdefault(suspects[0], [0, 0])
                ev[0 if low else 1] += 1
                margin = ev[0] - ev[1]
                if margin > 0 and margin < policy.confirmations:
                    next_sets.append(suspects)  # undecided: measure again with a fresh partner
        sets = next_sets
    return extra


def screen_and_localise(
    nodes: Sequence[str],
    measure: Measurer,
    policy: DetectionPolicy | None = None,
    schedule: Schedule = Schedule.LOCALISE,
) -> ScreenResult:
    """Screen an allocation and, for ``localise``, name its slow nodes.

    Args:
        nodes: host names of the allocation (at least 2, unique).
        measure: the measurer (see :data:`Measurer`); live (Ray) or simulated.
        policy: detection thresholds (default: NCCL's).
        schedule: ``roundrobin`` (every pair), ``quick`` (one round of pairs, flags pairs only) or
        ``localise``.

    Returns:
        A :class:`ScreenResult`; ``stragglers`` are nodes condemned by agreeing measurements.

    Raises:
        ValueError: fewer than 2 nodes or duplicate names.
    """
    policy = policy or DetectionPolicy()
    hosts = list(nodes)
    if len(hosts) < 2:
        raise ValueError("a bandwidth screen needs at least 2 nodes")
    use_rr = schedule is Schedule.ROUNDROBIN or (
        schedule is Schedule.LOCALISE and len(hosts) < policy.min_nodes_for_screen
    )
    first_rounds = round_robin(hosts) if use_rr else [quick_screen(hosts)]
    screen = _run_rounds(first_rounds, measure, 0)
    baseline = allocation_baseline(screen, policy)
    extra: list[Measurement] = []
    if schedule is Schedule.LOCALISE and not use_rr and baseline is not None:
        extra = _localise(screen, hosts, baseline, measure, policy, localisation_round_bound(len(hosts)))
    allm = screen + extra
    need = min(policy.confirmations, len(hosts) - 1) if use_rr else policy.confirmations
    judgements = attribute(allm, baseline, policy, need) if baseline else {}
    stragglers = sorted(n for n, j in judgements.items() if j.straggler)
    unexplained = [
        m
        for m in (low_measurements(allm, baseline, policy) if baseline else [])
        if not set(m.nodes) & set(stragglers)
    ]
    rounds_used = len({m.round_index for m in allm})
    return ScreenResult(
        schedule=schedule,
        nodes=hosts,
        rounds=rounds_used,
        localisation_rounds=len({m.round_index for m in extra}),
        measurements=allm,
        baseline=baseline,
        judgements=judgements,
        stragglers=stragglers,
        unexplained_low=unexplained,
    )


# ------------------------------------------------------------------------------------------------ findings
def _fmt(x: float) -> str:
    return f"{x:.3g}"


def findings_for(
    result: ScreenResult,
    policy: DetectionPolicy,
    reference_gbps: float | None = None,
    history: Mapping[str, Sequence[float]] | None = None,
) -> list[Finding]:
    """The findings of a screen: stragglers, failures, hangs, wrong results, and low bandwidth against the
    peers (unexplained low groups), the SKU reference and each node's history."""
    out: list[Finding] = []
    base = result.baseline
    for m in result.measurements:
        out.extend(_failure_findings(m))
    for host in result.stragglers:
        j = result.judgements[host]
        assert base is not None and j.score_gbps is not None
        drop = base.drop(j.score_gbps)
        out.append(
            Finding(
                code=FindingCode.STRAGGLER_NODE,
                severity=Severity.CRITICAL,
                nodes=[host],
                subject=host,
                message=(
                    f"{host}: busbw {_fmt(j.score_gbps)} GB/s vs allocation median {_fmt(base.median)} GB/s "
                    f"(-{drop:.0%}); {j.low} of {j.measured} measurements low, {j.attributable} with cleared "
                    f"partners"
                ),
                details={
                    "measured_gbps": j.score_gbps,
                    "expected_gbps": base.median,
                    "drop": round(drop, 4),
                    "mad_scale_gbps": base.scale,
                    "low": j.low,
                    "measured": j.measured,
                    "agreeing": j.attributable,
                    "groups": list[JsonScalar](j.partners_low),
                },
            )
        )
    for m in result.unexplained_low:
        assert base is not None and m.busbw_gbps is not None
        out.append(
            _low_finding(
                m.nodes,
                m.busbw_gbps,
                base.median,
                "allocation median",
                policy,
                {
                    "round": m.round_index,
                    "collective": m.collective.value,
                    "size": m.size,
                    "z": round(base.z(m.busbw_gbps), 2),
                    "agreeing": 1,
                },
            )
        )
    scores = node_scores(result.measurements, ignore_partners=result.stragglers)
    if reference_gbps:
        for host, s in sorted(scores.items()):
            if s < policy.reference_ratio * reference_gbps:
                out.append(
                    _low_finding(
                        [host],
                        s,
                        reference_gbps,
                        "SKU reference",
                        policy,
                        {
                            "reference_ratio": policy.reference_ratio,
                            "agreeing": result.judgements[host].measured,
                        },
                    )
                )
    for host, hb in sorted(history_lows(scores, history or {}, policy).items()):
        out.append(
            _low_finding(
                [host],
                scores[host],
                hb.median,
                f"own history (median of {hb.n})",
                policy,
                {
                    "history_n": hb.n,
                    "z": round(hb.z(scores[host]), 2),
                    "agreeing": result.judgements[host].measured,
                },
            )
        )
    return out


def _low_finding(
    nodes: list[str],
    measured: float,
    expected: float,
    against: str,
    policy: DetectionPolicy,
    extra: dict[str, EvidenceValue],
) -> Finding:
    sev = Severity.CRITICAL if measured < policy.critical_ratio * expected else Severity.WARNING
    subject = ",".join(nodes)
    return Finding(
        code=FindingCode.NCCL_BUSBW_LOW,
        severity=sev,
        nodes=list(nodes),
        subject=subject,
        message=f"{subject}: busbw {_fmt(measured)} GB/s vs {against} {_fmt(expected)} GB/s "
        f"(-{1 - measured / expected:.0%})",
        details={"measured_gbps": measured, "expected_gbps": expected, "against": against, **extra},
    )


def _failure_findings(m: Measurement) -> list[Finding]:
    """A group that hung, failed or returned wrong elements: one critical finding naming every member (which
    member is at fault, the group cannot tell: no member is excluded for it, see ``orchestrator.report``)."""
    subject = ",".join(m.nodes)
    coll = m.collective.value
    ev: dict[str, EvidenceValue] = {
        "round": m.round_index, "collective": coll, "nodes": list(m.nodes), "error": m.error
    }
    if m.status is MeasureStatus.HANG:
        code, message = FindingCode.NCCL_TEST_HANG, f"{subject}: {coll} did not finish ({m.error})"
    elif m.status is MeasureStatus.FAILED:
        code, message = FindingCode.NCCL_TEST_FAILED, f"{subject}: {coll} failed: {m.error}"
    elif m.wrong > 0:
        code = FindingCode.NCCL_WRONG_RESULTS
        message = f"{subject}: {coll} returned {m.wrong} wrong elements (data corruption)"
        ev["wrong"] = m.wrong
    else:
        return []
    return [Finding(code=code, severity=Severity.CRITICAL, nodes=list(m.nodes), subject=subject, message=message,
                    details=ev)]


def build_report(
    result: ScreenResult,
    findings: list[Finding],
    curves: list[BusbwCurve],
    started_at: float,
    simulated: bool = False,
) -> RunReport:
    """The ``RunReport(kind=bandwidth)`` of a screen (:func:`~fleetdx.orchestrator.report.assemble_report`
    over its nodes, findings and curves)."""
    return assemble_report(
        RunKind.BANDWIDTH,
        result.nodes,
        findings,
        started_at=started_at,
        schedule=result.schedule,
        simulated=simulated,
        curves=curves,
    )


# ------------------------------------------------------------------------------------------------ live run
def measurement_of(result: GroupResult, round_index: int) -> Measurement:
    """A probe's group result as the detector sees it: busbw at the largest size of the sweep."""
    status = {
        GroupStatus.OK: MeasureStatus.OK,
        GroupStatus.FAILED: MeasureStatus.FAILED,
        GroupStatus.HANG: MeasureStatus.HANG,
    }[result.status]
    top = result.curve.points[-1] if result.curve and result.curve.points else None
    return Measurement(
        nodes=list(result.nodes),
        collective=result.collective,
        round_index=round_index,
        status=status,
        size=top.size if top else 0,
        busbw_gbps=top.busbw_gbps if top else None,
        wrong=result.wrong,
        error=result.error,
    )


def live_measurer(probe: RayCollectiveProbe, curves: list[BusbwCurve]) -> Measurer:
    """A :data:`Measurer` running rounds on ``probe``; every measured curve is appended to ``curves``."""

    def measure(round_index: int, groups: Sequence[Group]) -> list[Measurement]:
        results = probe.measure_round(groups)
        curves.extend(r.curve for r in results if r.curve is not None)
        return [measurement_of(r, round_index) for r in results]

    return measure


def run_bandwidth(
    nodes: Sequence[str] | None = None,
    *,
    schedule: Schedule = Schedule.LOCALISE,
    collectives: Sequence[Collective] = (Collective.ALL_REDUCE,),
    sizes: Sequence[int] | None = None,
    backend: Backend | None = None,
    iters: int = 10,
    warmup_iters: int = 2,
    policy: DetectionPolicy | None = None,
    reference_gbps: float | None = None,
    history: Mapping[str, Sequence[float]] | None = None,
    timeout_s: float = 120.0,
    inject_delay_s: dict[str, float] | None = None,
    known: Mapping[str, RayHost] | None = None,
) -> RunReport:
    """Measure collective bandwidth across the nodes of the connected Ray cluster and judge it.

    The caller has connected Ray (``ray.init(address=...)``). ``nodes`` are host names as
    :func:`~fleetdx.orchestrator.cluster.collective.ray_hosts` names them (default: every alive node); ``backend``
    defaults to
    nccl when every node has a GPU, else gloo. ``sizes`` in bytes (nccl-tests ``size``); the largest decides.
    ``reference_gbps`` is the SKU's expected busbw for the first collective; ``history`` maps host -> its
    recent busbw (GB/s) for it (``store.recent_busbw``). ``inject_delay_s`` (tests only) delays chosen hosts'
    ranks. ``known`` maps host name -> Ray node when the caller already matched them (the pre-flight's
    fan-out does, simulated nodes included); default: :func:`~fleetdx.orchestrator.cluster.collective.ray_hosts`.

    Returns:
        ``RunReport(kind=bandwidth)`` with findings, one curve per measured group, and the exclude hostlist.

    Raises:
        ConfigError: a requested node is not in the Ray cluster, or fewer than 2 nodes.
    """
    started = time.time()
    known = dict(known) if known is not None else {h.name: h for h in ray_hosts()}
    wanted = list(nodes) if nodes else sorted(known)
    missing = [n for n in wanted if n not in known]
    if missing:
        raise ConfigError(
            f"not in the Ray cluster: {hostlist.collect_hostlist(missing)} "
            f"(known: {hostlist.collect_hostlist(sorted(known)) or 'none'})"
        )
    if len(wanted) < 2:
        raise ConfigError("a bandwidth run needs at least 2 nodes")
    hosts = [known[n] for n in wanted]
    if backend is None:
        backend = Backend.NCCL if all(h.gpus > 0 for h in hosts) else Backend.GLOO
    policy = policy or DetectionPolicy.for_backend(backend.curve)
    curves: list[BusbwCurve] = []
    findings: list[Finding] = []
    result: ScreenResult | None = None
    for i, coll in enumerate(collectives):
        spec = SweepSpec(
            collective=coll,
            sizes=list(sizes) if sizes else SweepSpec().sizes,
            iters=iters,
            warmup_iters=warmup_iters,
        )
        probe = RayCollectiveProbe(hosts, backend, spec, timeout_s=timeout_s, inject_delay_s=inject_delay_s)
        try:
            r = screen_and_localise(wanted, live_measurer(probe, curves), policy, schedule)
        finally:
            probe.close()
        findings.extend(
            findings_for(r, policy, reference_gbps if i == 0 else None, history if i == 0 else None)
        )
        result = result or r
    assert result is not None
    return build_report(result, findings, curves, started)
