"""Rules on InfiniBand / RoCE grey failures: counters that climb, links that flap, links slower than the fabric.

They read the standard level's two counter samples (``sysfs_infiniband_counters.txt``,
:attr:`fleetdx.probes.facts.NodeFacts.ib_counters`) and the port rates every level reads (``NodeFacts.ib``).
A port that is not Active is ``IB_PORT_DOWN``'s (:mod:`.rules_node`) and is not judged here.

``IB_PORT_ERRORS`` (warning): an error counter rose between the two samples. The counters
(:data:`fleetdx.probes.parsers.ib_counters.ERROR_COUNTERS`: ``symbol_error``, ``link_error_recovery``,
``port_rcv_errors``, ``port_rcv_remote_physical_errors``, ``local_link_integrity_errors``,
``excessive_buffer_overrun_errors``, ``port_xmit_discards``; on mlx5, the RoCE retransmission counters of
:data:`~fleetdx.probes.parsers.ib_counters.HW_ERROR_COUNTERS`) count physical- and link-level faults (Linux
``Documentation/ABI/stable/sysfs-class-infiniband``). The threshold is any increase: ibdiagnet's "Ports
counters Difference Check (during run)" likewise reports every error counter that changed between its two
samples. The totals since boot are not judged (a counter at 20046 ``port_xmit_discards`` says nothing about
now; only its climb does). A counter that went down was reset: its delta is its second value (a lower bound).

``IB_LINK_FLAP``: ``link_downed`` ("the number of times the Port Training state machine has failed the link
error recovery process and downed the link", kernel ABI) rose between the samples: **warning** for one
down, **critical** for :data:`FLAP_CRITICAL` or more within one window (a link that keeps retraining takes
every NCCL job through it down with it; fleetdx's own threshold, settable with ``fleet.extra
["ib_flap_critical"]``). A RoCE port has no IBTA ``link_downed`` (no PMA): its network interface's
``carrier_down_count`` (kernel ABI ``sysfs-class-net``, the same carrier changes mlx5 logs as ``Link down``
/ ``Link up``) counts its downs, read with the counters; the larger of the two counts is taken. The kernel's
``Link down`` lines themselves are read by the postmortem's kernel-log scanner
(:mod:`fleetdx.probes.parsers.joblog_kernel`), not here: the pre-flight's ``dmesg`` keeps only GPU lines.

``IB_LINK_DEGRADED`` (warning): an Active InfiniBand port whose rate is below the fabric's: the configured
``fleet.extra["ib_expected_rate_gbps"]``, else the most common rate of the Active InfiniBand ports of the same
CA type (``MT4129``: ConnectX-7) on every node of the run (ties: the highest). Comparing within a CA type keeps
a node's slower storage HCA (a 200 Gb/s ConnectX-6 beside 400 Gb/s ConnectX-7 compute rails) from reading as
degraded, in a one-node prolog as in a fleet. A lane lost (4X -> 2X) halves the rate, so a width drop shows as a rate
drop (the counter samples' ``rate`` strings give width and per-lane speed, e.g. ``4X NDR``). RoCE ports
are not compared: a node's Ethernet ports mix front-end and back-end NICs of different speeds by design.
"""

from __future__ import annotations

from fleetdx.orchestrator.diagnosis.base import Fleet, Rule
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.catalog import SYSFS_IB_COUNTERS_FILE
from fleetdx.probes.contracts import EvidenceValue, Severity
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.ib_counters import (
    CARRIER_DOWN,
    ERROR_COUNTERS,
    HW_ERROR_COUNTERS,
    LINK_DOWNED,
    CounterDelta,
    CounterGroup,
    PortDelta,
    fabric_mode,
    port_deltas,
)
from fleetdx.probes.parsers.ibstat import LinkLayer, PortState

#: link_downed increments within one sample window from which a flap is critical (see the module doc)
FLAP_CRITICAL = 2


def _deltas(node: NodeFacts) -> list[PortDelta]:
    c = node.ib_counters
    if c is None or len(c.samples) < 2:
        return []
    return port_deltas(c.samples[0], c.samples[-1])


def _is_error(c: CounterDelta) -> bool:
    if c.delta <= 0:
        return False
    if c.group is CounterGroup.COUNTERS:
        return c.name in ERROR_COUNTERS
    return c.name in HW_ERROR_COUNTERS


def _window(d: PortDelta) -> str:
    return f"in {d.elapsed_s:.0f} s" if d.elapsed_s is not None else "between two samples"


def _counter_details(cs: list[CounterDelta]) -> dict[str, EvidenceValue]:
    """Flat evidence: counter -> delta, and the values before and after, the rate per second, the resets."""
    return {
        "counters": {c.name: c.delta for c in cs},
        "before": {c.name: c.before for c in cs},
        "after": {c.name: c.after for c in cs},
        "per_s": {c.name: c.per_s for c in cs},
        "reset": [c.name for c in cs if c.reset],
    }


def ib_port_errors(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """``IB_PORT_ERRORS`` for each Active port whose error counters rose between the two samples."""
    out: list[Finding] = []
    for d in _deltas(node):
        if d.state not in (None, PortState.ACTIVE):
            continue
        bad = [c for c in d.changed if _is_error(c)]
        if not bad:
            continue
        what = ", ".join(f"{c.name} +{c.delta}" + (" (after a reset)" if c.reset else "") for c in bad)
        out.append(
            Finding(
                code=FindingCode.IB_PORT_ERRORS,
                severity=Severity.WARNING,
                nodes=[node.host],
                subject=f"{d.ca}/{d.port}",
                message=f"{d.ca} port {d.port}: error counters rose {_window(d)}: {what}",
                details={
                    "ca": d.ca,
                    "port": d.port,
                    "link_layer": d.link_layer.value if d.link_layer else None,
                    "elapsed_s": d.elapsed_s,
                    **_counter_details(bad),
                    "file": SYSFS_IB_COUNTERS_FILE,
                },
            )
        )
    return out


def _downs(d: PortDelta) -> CounterDelta | None:
    """The port's link-down count between the samples: ``link_downed`` (IBTA) or its netdev's
    ``carrier_down_count``, whichever counted more (an IPoIB or RoCE netdev may count the same downs: never
    added up)."""
    counts = [
        c
        for c in d.changed
        if c.delta > 0
        and (
            (c.group is CounterGroup.COUNTERS and c.name == LINK_DOWNED)
            or (c.group is CounterGroup.NETDEV and c.name == CARRIER_DOWN)
        )
    ]
    return max(counts, key=lambda c: c.delta) if counts else None


def ib_link_flap(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """``IB_LINK_FLAP`` for each port whose ``link_downed`` (or its netdev's ``carrier_down_count``) rose
    between the two samples."""
    critical_at = int(fleet.extra.get("ib_flap_critical", FLAP_CRITICAL))
    out: list[Finding] = []
    for d in _deltas(node):
        c = _downs(d)
        if c is None:
            continue
        sev = Severity.CRITICAL if c.delta >= critical_at else Severity.WARNING
        times = "once" if c.delta == 1 else f"{c.delta} times"
        out.append(
            Finding(
                code=FindingCode.IB_LINK_FLAP,
                severity=sev,
                nodes=[node.host],
                subject=f"{d.ca}/{d.port}",
                message=f"{d.ca} port {d.port}: link went down {times} {_window(d)} ({c.name}"
                + (f" of {d.netdev}" if c.group is CounterGroup.NETDEV else "")
                + (", reset in between: at least that)" if c.reset else ")"),
                details={
                    "ca": d.ca,
                    "port": d.port,
                    "counter": c.name,
                    "netdev": d.netdev,
                    "delta": c.delta,
                    "before": c.before,
                    "after": c.after,
                    "reset": c.reset,
                    "state_now": d.state.value if d.state else None,
                    "elapsed_s": d.elapsed_s,
                    "critical_at": critical_at,
                    "file": SYSFS_IB_COUNTERS_FILE,
                },
            )
        )
    return out


def _ib_rates(node: NodeFacts) -> list[tuple[str, str | None, int, float]]:
    """(CA, CA type, port, rate) of the node's Active InfiniBand ports with a rate (``NodeFacts.ib``)."""
    if node.ib is None:
        return []
    return [
        (ca.name, ca.ca_type, p.port, p.rate_gbps)
        for ca in node.ib.cas
        for p in ca.ports
        if p.state is PortState.ACTIVE and p.link_layer in (None, LinkLayer.INFINIBAND) and p.rate_gbps
    ]


def fabric_rates(fleet: Fleet) -> dict[str | None, float]:
    """CA type (``MT4129``; ``None`` where unknown) -> the most common rate (Gb/s) of the run's Active InfiniBand
    ports of that type (ties: the highest)."""
    by_type: dict[str | None, list[float]] = {}
    for n in fleet.nodes:
        for _, ca_type, _, rate in _ib_rates(n):
            by_type.setdefault(ca_type, []).append(rate)
    return {t: float(m) for t, rates in by_type.items() if (m := fabric_mode(rates)) is not None}


def ib_link_degraded(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """``IB_LINK_DEGRADED`` for each Active InfiniBand port slower than the fabric (see the module doc)."""
    configured = fleet.extra.get("ib_expected_rate_gbps")
    modes = {} if configured else fleet.derived(fabric_rates)
    out: list[Finding] = []
    for ca, ca_type, port, rate in _ib_rates(node):
        expected = float(configured) if configured else modes.get(ca_type)
        if expected is None or rate >= expected:
            continue
        of = f"{ca_type} ports" if ca_type else "ports"
        out.append(
            Finding(
                code=FindingCode.IB_LINK_DEGRADED,
                severity=Severity.WARNING,
                nodes=[node.host],
                subject=f"{ca}/{port}",
                message=f"{ca} port {port} is Active at {rate:g} Gb/s, below the fabric's {expected:g} Gb/s",
                details={
                    "ca": ca,
                    "ca_type": ca_type,
                    "port": port,
                    "rate_gbps": rate,
                    "expected_rate_gbps": expected,
                    "expected_from": "configured" if configured else f"most common rate of the run's {of}",
                    "file": node.sources.get("ib"),
                },
            )
        )
    return out


RULES: list[Rule] = [ib_port_errors, ib_link_flap, ib_link_degraded]
#: the rules of ``RULES`` that read the fleet (:data:`~fleetdx.orchestrator.diagnosis.base.PEER_FIELDS` only)
PEER_RULES: list[Rule] = [ib_link_degraded]
