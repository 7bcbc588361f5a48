"""Robust detection of slow nodes from collective bandwidth measurements. Pure: numbers in, judgements out.

Three baselines, each used where it is meaningful:

* **peers** -- the allocation's own median. A node's score is the median busbw of the groups it was measured
  in; the allocation baseline is the median of the node scores and its spread the MAD (median absolute
  deviation), both of ``ln(busbw)`` (see :class:`Baseline`), the MAD scaled by 1.4826 so that it estimates the
  standard deviation of normal noise. A measurement is *low* when its modified z-score ``(ln x - median) /
  (1.4826 MAD)`` is below ``-z_threshold`` (3.5, Iglewicz & Hoaglin, "How to Detect and Handle Outliers", ASQC
  1993) **and** it is at least ``min_drop`` below the median, so that a very tight allocation (MAD near 0)
  does not flag harmless wobble. The scale is floored at ``noise_floor`` (the relative measurement noise of
  the backend) for the same reason. The median and the MAD have a 50% breakdown point:
  up to half the nodes may be slow without moving the baseline.
* **reference** -- an expected busbw for the SKU and collective (e.g. a fleet baseline); a value below
  ``reference_ratio`` (0.9) times it is low. 0.9 is the margin nccl-tests itself applies to
  ``NCCL_TESTS_MIN_BW`` (``src/common.cu``: the run FAILS when the average busbw is below 0.9 x the minimum).
* **history** -- the node's own recent busbw for the collective (from the store); judged with the same
  modified z-score against the history's median/MAD.

A suspect is condemned only on agreeing evidence: :func:`attribute` names a node a straggler when its
*attributable* low measurements (those where every other member of the group was seen at normal speed
elsewhere, so the slowness cannot be theirs) outnumber its normal measurements by at least ``confirmations``
(3 by default). Units: GB/s = 1e9 B/s, sizes in bytes.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum

from pydantic import Field

# the robust centre/scale and the thresholds live one layer down so that step-time analysis shares them
# (re-exported here with ``as`` for the callers of this module)
from fleetdx.orchestrator.diagnosis.robust import MAD_TO_SIGMA as MAD_TO_SIGMA
from fleetdx.orchestrator.diagnosis.robust import Baseline as Baseline
from fleetdx.orchestrator.diagnosis.robust import DetectionPolicy as DetectionPolicy
from fleetdx.probes.contracts import Collective, Contract


class MeasureStatus(str, Enum):
    """How one group measurement ended."""

    OK = "ok"
    FAILED = "failed"  #: the collective raised or a rank died -> NCCL_TEST_FAILED
    HANG = "hang"  #: no result before the deadline -> NCCL_TEST_HANG


class Measurement(Contract):
    """One collective measured by one group of nodes in one round.

    ``busbw_gbps`` is the bus bandwidth (GB/s) at the decision size ``size`` (bytes, the largest of the sweep,
    as nccl-tests' doc/PERFORMANCE.md advises for judging a fabric); ``None`` unless ``status`` is ok.
    ``wrong`` counts elements that failed validation (nccl-tests ``#wrong``); > 0 is data corruption.
    """

    nodes: list[str]
    collective: Collective
    round_index: int
    status: MeasureStatus = MeasureStatus.OK
    size: int = 0
    busbw_gbps: float | None = None
    wrong: int = 0
    error: str | None = None


def node_scores(measurements: Iterable[Measurement], ignore_partners: Iterable[str] = ()) -> dict[str, float]:
    """Each node's score: the median busbw (GB/s) of the ok measurements it took part in, leaving out those
    where another member is in ``ignore_partners`` (condemned stragglers, whose slowness is not the
    node's)."""
    skip = set(ignore_partners)
    per: dict[str, list[float]] = {}
    for m in measurements:
        if m.status is MeasureStatus.OK and m.busbw_gbps is not None:
            for n in m.nodes:
                if not any(o in skip for o in m.nodes if o != n):
                    per.setdefault(n, []).append(m.busbw_gbps)
    return {n: statistics.median(v) for n, v in per.items()}


def allocation_baseline(measurements: Iterable[Measurement], policy: DetectionPolicy) -> Baseline | None:
    """The peers baseline: median and MAD of the node scores (not of the raw measurements, so that one slow
    node that took part in many measurements counts once)."""
    return Baseline.of(node_scores(measurements).values(), policy)


def low_measurements(
    measurements: Iterable[Measurement], baseline: Baseline, policy: DetectionPolicy
) -> list[Measurement]:
    """The ok measurements that are low against ``baseline``."""
    return [
        m
        for m in measurements
        if m.status is MeasureStatus.OK and m.busbw_gbps is not None and baseline.is_low(m.busbw_gbps, policy)
    ]


class NodeJudgement(Contract):
    """The evidence about one node gathered over a run."""

    node: str
    measured: int  #: ok measurements it took part in
    low: int  #: of which were low
    attributable: int  #: low ones whose other members were all seen at normal speed elsewhere
    score_gbps: float | None  #: median busbw of its measurements
    straggler: bool
    partners_low: list[str] = Field(
        default_factory=list
    )  #: groups ("a,b") of its attributable low measurements


def attribute(
    measurements: Sequence[Measurement],
    baseline: Baseline,
    policy: DetectionPolicy,
    need: int | None = None,
) -> dict[str, NodeJudgement]:
    """Judge every node from all measurements of a run against one baseline.

    A node is *cleared* when at least one of its measurements was not low. A low measurement is *attributable*
    to a node when every other member of the group is cleared. A node is a straggler when its attributable low
    measurements minus its normal ones reach ``need`` (default ``policy.confirmations``; a caller that cannot
    measure a node that often, e.g. round-robin on 3 nodes, passes less).
    """
    need = policy.confirmations if need is None else need
    ok = [m for m in measurements if m.status is MeasureStatus.OK and m.busbw_gbps is not None]
    low_ids = {id(m) for m in low_measurements(ok, baseline, policy)}
    cleared = {n for m in ok if id(m) not in low_ids for n in m.nodes}
    scores = node_scores(ok)
    by_node: dict[str, list[Measurement]] = {}
    for m in ok:
        for n in m.nodes:
            by_node.setdefault(n, []).append(m)
    out: dict[str, NodeJudgement] = {}
    for node in sorted(by_node):
        mine = by_node[node]
        lows = [m for m in mine if id(m) in low_ids]
        attr = [m for m in lows if all(o in cleared for o in m.nodes if o != node)]
        normal = len(mine) - len(lows)
        out[node] = NodeJudgement(
            node=node,
            measured=len(mine),
            low=len(lows),
            attributable=len(attr),
            score_gbps=scores.get(node),
            straggler=len(attr) - normal >= need,
            partners_low=[",".join(m.nodes) for m in attr],
        )
    return out


def below_reference(value: float, reference_gbps: float, policy: DetectionPolicy) -> bool:
    """``value`` under ``reference_ratio`` x the SKU reference (both GB/s)."""
    return value < policy.reference_ratio * reference_gbps


def below_history(value: float, history: Sequence[float], policy: DetectionPolicy) -> Baseline | None:
    """The node's history baseline when ``value`` is low against it, else ``None``. Needs 3+ past values."""
    if len(history) < 3:
        return None
    base = Baseline.of(history, policy)
    if base is not None and base.is_low(value, policy):
        return base
    return None


def history_lows(
    scores: Mapping[str, float], history: Mapping[str, Sequence[float]], policy: DetectionPolicy
) -> dict[str, Baseline]:
    """Nodes whose score is low against their own history: node -> history baseline."""
    out: dict[str, Baseline] = {}
    for node, value in scores.items():
        base = below_history(value, history.get(node, ()), policy)
        if base is not None:
            out[node] = base
    return out
