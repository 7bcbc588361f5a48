"""Diagnosis rules over a node's GPUs: inventory, health counters, clocks, PCIe link, XIDs, micro-benchmarks.

``RULES`` (in order):

* :func:`gpu_count_rule` GPU_COUNT_MISMATCH (critical).
* :func:`foreign_process_rule` GPU_FOREIGN_PROCESS (critical): a process holds a GPU before the job starts.
* :func:`ecc_rule` GPU_ECC_UNCORRECTABLE (critical): volatile uncorrectable ECC errors.
* :func:`row_remap_rule` GPU_ROW_REMAP_PENDING (warning) / GPU_ROW_REMAP_FAILURE (critical).
* :func:`clocks_rule` GPU_CLOCKS_THROTTLED (critical for hardware/thermal slowdowns; see the rule).
* :func:`pcie_rule` PCIE_LINK_DEGRADED (warning).
* :func:`xid_rule` GPU_XID (severity from :mod:`fleetdx.orchestrator.diagnosis.xid_table`), and GPU_LOST
  (critical) for the driver's lines that lose or fail a GPU without an XID.
* :func:`microbench_rule` GEMM_SLOW / HBM_SLOW / H2D_SLOW (warning; :mod:`fleetdx.orchestrator.diagnosis.references`).

Every rule reads the GPU facts normalised once in :mod:`fleetdx.probes.facts` (``NodeFacts.gpus``,
``gpu_processes``, ``remaps``: ``nvidia-smi -q -x`` when it parsed, else the ``--query-*`` CSVs, the source
named in each view and in the evidence); facts that are missing give no finding (the engine reports probes
that did not run or parse).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable

from fleetdx.orchestrator.diagnosis import references as ref
from fleetdx.orchestrator.diagnosis import xid_table
from fleetdx.orchestrator.diagnosis.base import Fleet, Rule
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.probes.catalog import (
    DMESG_FILE,
    MICROBENCH_FILE,
    SMI_XML_FILE,
    TOPO_FILE,
)
from fleetdx.probes.contracts import EvidenceValue, Severity
from fleetdx.probes.facts import GpuView, NodeFacts, gpu_index_by_bus
from fleetdx.probes.parsers.microbench import Microbench
from fleetdx.probes.parsers.smi_values import ClockEventReason
from fleetdx.probes.parsers.xid import DriverEvent, DriverEventKind, GpuReset, XidEvent

MIB = 1 << 20


def _subject(index: int | None) -> str:
    return f"GPU{index}" if index is not None else "GPU"


def _finding(
    node: NodeFacts,
    code: FindingCode,
    severity: Severity,
    subject: str,
    message: str,
    evidence: dict[str, EvidenceValue],
) -> Finding:
    return Finding(code=code, severity=severity, nodes=[node.host], subject=subject, message=message, details=evidence)


# --- GPU count ------------------------------------------------------------------------------------------


def gpu_count(node: NodeFacts) -> tuple[int, str] | None:
    """(number of GPUs, file it was read from): the GPU view's (``nvidia-smi -q -x``, else the query-gpu
    CSV), else ``topo -m``'s."""
    if node.gpu_source is not None:
        return len(node.gpus), node.gpu_source
    if node.topo is not None:
        return len(node.topo.gpus), TOPO_FILE
    return None


def _majority(counts: Iterable[int]) -> int | None:
    """The count more than half of the values share, else ``None``."""
    values = list(counts)
    if not values:
        return None
    value, n = Counter(values).most_common(1)[0]
    return value if n * 2 > len(values) else None


def _gpu_count_majority(fleet: Fleet) -> tuple[int | None, int]:
    """(the GPU count a strict majority of all nodes of ``fleet`` share, else ``None``; the number of nodes
    whose count is known). Once per fleet (:meth:`Fleet.derived`)."""
    counts = [got[0] for got in map(gpu_count, fleet.nodes) if got is not None]
    return _majority(counts), len(counts)


def gpu_count_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """GPU_COUNT_MISMATCH (critical): the node sees a different number of GPUs than expected.

    Expected: ``fleet.expected_gpus_per_node`` (the job's request), else the count a strict majority of all
    nodes of the run share (no majority, e.g. two nodes that disagree: no judgement).
    """
    got = gpu_count(node)
    if got is None:
        return []
    count, source = got
    if fleet.expected_gpus_per_node is not None:
        expected, basis = fleet.expected_gpus_per_node, fleet.expected_gpus_source or "expected_gpus_per_node"
    else:
        majority, known = fleet.derived(_gpu_count_majority)
        if majority is None:
            return []
        expected, basis = majority, f"majority of {known} nodes"
    if count == expected:
        return []
    return [
        _finding(
            node,
            FindingCode.GPU_COUNT_MISMATCH,
            Severity.CRITICAL,
            "node",
            f"{count} GPUs visible, {expected} expected ({basis})",
            {"gpus": count, "expected": expected, "expected_from": basis, "file": source},
        )
    ]


# --- foreign processes ----------------------------------------------------------------------------------


def _subject_of(index: int | None, bus_id: str | None) -> str:
    """``GPU<index>``, else ``PCI:<bus id>`` for a device the inventory does not list, else ``GPU``."""
    if index is not None:
        return _subject(index)
    return f"PCI:{bus_id}" if bus_id else "GPU"


def foreign_process_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """GPU_FOREIGN_PROCESS (critical): a process holds a GPU context before the job starts (it takes memory
    and SM time: the h100-vm-busy fixture's foreign GEMM loop cost the micro-benchmark 13% GEMM and 47% copy
    bandwidth). From :attr:`NodeFacts.gpu_processes` (the XML's ``<processes>``, else the compute-apps CSV).
    Meant for pre-flight, when the job's own processes have not started."""
    out = []
    for p in node.gpu_processes:
        mem = None if p.used_memory_bytes is None else p.used_memory_bytes // MIB
        subject = _subject_of(p.gpu_index, p.bus_id)
        out.append(
            _finding(
                node,
                FindingCode.GPU_FOREIGN_PROCESS,
                Severity.CRITICAL,
                subject,
                f"pid {p.pid} ({p.name or '?'}) holds {subject}" + (f" with {mem} MiB" if mem is not None else ""),
                {
                    "pid": p.pid,
                    "process_name": p.name,
                    "type": p.type,
                    "used_memory_mib": mem,
                    "bus_id": p.bus_id,
                    "file": p.file,
                },
            )
        )
    return out


# --- ECC and row remapping ------------------------------------------------------------------------------


def ecc_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """GPU_ECC_UNCORRECTABLE (critical): volatile uncorrectable (SRAM + DRAM, or double-bit) ECC errors > 0.

    Volatile counters count since the last driver load, aggregate ones over the GPU's life (nvidia-smi(1),
    "ECC Errors": "Volatile error counters track the number of errors detected since the last driver load.
    Aggregate error counts persist indefinitely"). Only volatile errors say the GPU is unfit now; an old
    aggregate count that row remapping repaired is history, reported in the evidence only. NVIDIA "A100/H100
    GPU Memory Error Management": an uncorrectable error needs a GPU reset (XID 48/95). Read from the per-GPU
    view (:attr:`NodeFacts.gpus`: the XML's counters, else the query-gpu CSV's).
    """
    return [
        _finding(
            node,
            FindingCode.GPU_ECC_UNCORRECTABLE,
            Severity.CRITICAL,
            _subject(g.index),
            f"{g.ecc_uncorrectable} uncorrectable ECC errors since the driver loaded",
            {**g.ecc_evidence, "bus_id": g.bus_id, "file": g.file},
        )
        for g in node.gpus
        if g.ecc_uncorrectable
    ]


def _remap_findings(
    node: NodeFacts,
    subject: str,
    bus_id: str | None,
    pending: bool | None,
    failure: bool | None,
    corr: int | None,
    unc: int | None,
    source: str,
) -> list[Finding]:
    ev: dict[str, EvidenceValue] = {
        "remapped_rows_correctable": corr,
        "remapped_rows_uncorrectable": unc,
        "pending": pending,
        "failure": failure,
        "bus_id": bus_id,
        "file": source,
    }
    out = []
    if failure:
        out.append(
            _finding(
                node,
                FindingCode.GPU_ROW_REMAP_FAILURE,
                Severity.CRITICAL,
                subject,
                "row remapping failed: no spare row left for a failing memory row (RMA)",
                ev,
            )
        )
    if pending:
        out.append(
            _finding(
                node,
                FindingCode.GPU_ROW_REMAP_PENDING,
                Severity.WARNING,
                subject,
                "a row remap is pending: reset the GPU to apply it",
                ev,
            )
        )
    return out


def row_remap_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """GPU_ROW_REMAP_PENDING (warning) and GPU_ROW_REMAP_FAILURE (critical), NVIDIA "A100/H100 GPU Memory
    Error Management", Row Remapping: *pending* means a row was marked for remapping and takes effect at the
    next GPU reset (until then the GPU runs with the faulty row's pages retired); *failure* means a remap was
    needed but could not be done (no spare row in the bank), which NVIDIA's flow sends to RMA. From
    :attr:`NodeFacts.remaps` (the XML's, else the remapped-rows CSV's)."""
    out: list[Finding] = []
    for r in node.remaps:
        out += _remap_findings(
            node,
            _subject_of(r.gpu_index, r.bus_id),
            r.bus_id,
            r.pending,
            r.failure,
            r.correctable,
            r.uncorrectable,
            r.file,
        )
    return out


# --- clocks ---------------------------------------------------------------------------------------------

#: clock event reasons that mean the GPU is being slowed to protect itself (NVML nvmlClocksEventReasons:
#: HwSlowdown "temperature being too high, External Power Brake Assertion ..., power draw is too high";
#: HwThermalSlowdown "temperature being too high"; HwPowerBrakeSlowdown "External Power Brake Assertion
#: being triggered (e.g. by the system power supply)"; SwThermalSlowdown "current GPU temperature above the
#: GPU Max Operating Temperature or memory temperature above the Memory Max Operating Temperature")
CRITICAL_REASONS = (
    ClockEventReason.HW_SLOWDOWN,
    ClockEventReason.HW_THERMAL_SLOWDOWN,
    ClockEventReason.HW_POWER_BRAKE_SLOWDOWN,
    ClockEventReason.SW_THERMAL_SLOWDOWN,
)


def _clock_evidence(g: GpuView) -> dict[str, EvidenceValue]:
    ev: dict[str, EvidenceValue] = {
        "active_reasons": [x.value for x in g.reasons],
        "sm_clock_mhz": g.sm_clock_mhz,
        "max_sm_clock_mhz": g.max_sm_clock_mhz,
        "power_draw_w": g.power_draw_w,
        "power_limit_w": g.power_limit_w,
        "default_power_limit_w": g.default_power_limit_w,
        "temperature_c": g.temperature_c,
        "file": g.file,
    }
    if g.reasons_mask is not None:
        ev["clocks_event_reasons.active"] = g.reasons_mask
    return ev


def clocks_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """GPU_CLOCKS_THROTTLED.

    * CRITICAL when a hardware or thermal slowdown is active (:data:`CRITICAL_REASONS`).
    * SW power cap (NVML: "the clocks have been optimized to ensure not to go over the TDP settings") is
      what a GPU at full load does by design (h100-vm-busy: 697.7 W of a 700 W limit, clocks 1395 of 1980
      MHz). It is a WARNING only when the enforced power limit is below the default limit (someone lowered
      it, so the GPU caps earlier than its peers); otherwise INFO (the GPU is busy: GPU_FOREIGN_PROCESS says
      by whom).
    * GPU idle, application/display clock settings and sync boost are not findings.
    """
    out = []
    for g in node.gpus:
        severe = [x.value for x in g.reasons if x in CRITICAL_REASONS]
        code, subject = FindingCode.GPU_CLOCKS_THROTTLED, _subject(g.index)
        if severe:
            msg = "clocks slowed by " + ", ".join(severe)
            out.append(_finding(node, code, Severity.CRITICAL, subject, msg, _clock_evidence(g)))
        elif ClockEventReason.SW_POWER_CAP in g.reasons:
            limit, default = g.power_limit_w, g.default_power_limit_w
            if limit is not None and default is not None and limit < default:
                sev, msg = (
                    Severity.WARNING,
                    f"power capped at a lowered limit ({limit} W, default {default} W)",
                )
            else:
                sev, msg = (
                    Severity.INFO,
                    f"at its power limit ({g.power_draw_w} of {limit} W): the GPU is busy",
                )
            out.append(_finding(node, code, sev, subject, msg, _clock_evidence(g)))
    return out


# --- PCIe link ------------------------------------------------------------------------------------------


def pcie_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """PCIE_LINK_DEGRADED (warning).

    * Width: current lanes below the maximum, at any load (a x16 GPU training at x8 has half its host
      bandwidth: a bad riser, slot or seating).
    * Generation: judged only under load (:attr:`~fleetdx.probes.facts.GpuView.under_load`), because GPUs lower their
    link
      generation when idle to save power (``nvidia-smi --help-query-gpu``, pcie.link.gen.current: "The current
      link generation. These may be reduced when the GPU is not in use.").
    """
    out = []
    for g in node.gpus:
        problems = []
        if g.width_current is not None and g.width_max is not None and g.width_current < g.width_max:
            problems.append(f"x{g.width_current} of x{g.width_max}")
        busy = g.under_load
        if busy and g.gen_current is not None and g.gen_max is not None and g.gen_current < g.gen_max:
            problems.append(f"Gen{g.gen_current} of Gen{g.gen_max} under load")
        if problems:
            ev: dict[str, EvidenceValue] = {
                "gen_current": g.gen_current,
                "gen_max": g.gen_max,
                "width_current": g.width_current,
                "width_max": g.width_max,
                "under_load": busy,
                "bus_id": g.bus_id,
                "file": g.file,
            }
            out.append(
                _finding(
                    node,
                    FindingCode.PCIE_LINK_DEGRADED,
                    Severity.WARNING,
                    _subject(g.index),
                    "PCIe link degraded: " + ", ".join(problems),
                    ev,
                )
            )
    return out


# --- XIDs -----------------------------------------------------------------------------------------------

_MAX_LINES = 10
#: XIDs that a fault before them causes (:data:`xid_table.CONSEQUENCE_XIDS`)
CONSEQUENCE_XIDS = xid_table.CONSEQUENCE_XIDS
#: consequence groups listed in the root finding's details
_MAX_CONSEQUENCES = 16


def _consequences(
    groups: dict[tuple[str, int], list[XidEvent]], judged: dict[tuple[str, int], xid_table.XidJudgement]
) -> tuple[tuple[str, int] | None, list[tuple[str, int]]]:
    """(root, its consequences): the node's first critical XID group (by line), and the XID 43/45 groups of any
    GPU of the node that start after it. A root fault then reads as one finding, not one per GPU it took down;
    XID 45 without a root stays what it is (an application teardown)."""
    roots = [k for k in groups if judged[k].xid_class.severity is Severity.CRITICAL]
    if not roots:
        return None, []
    root = min(roots, key=lambda k: groups[k][0].line)
    start = groups[root][0].line
    return root, [k for k in groups if k != root and k[1] in CONSEQUENCE_XIDS and groups[k][0].line > start]


#: distinct pids listed in a GPU_XID finding's evidence (what the store's history reads back)
_MAX_PIDS = 16


def _episodes(
    node: NodeFacts,
) -> tuple[dict[tuple[str, int], list[XidEvent]], dict[tuple[str, int], tuple[list[XidEvent], GpuReset]]]:
    """(open, closed): the node's XID events grouped by (PCI address, code), those of a GPU that a later clean
    reset closed apart, each closed group with the first reset after it (:class:`GpuReset`)."""
    assert node.xids is not None
    resets: dict[tuple[int, int, int], list[GpuReset]] = defaultdict(list)
    for r in node.xids.resets:
        if r.pci_key is not None:
            resets[r.pci_key].append(r)
    groups: dict[tuple[str, int], list[XidEvent]] = defaultdict(list)
    closed: dict[tuple[str, int], tuple[list[XidEvent], GpuReset]] = {}
    for e in node.xids.events:
        after = next((r for r in resets.get(e.pci_key, ()) if r.line > e.line), None) if e.pci_key else None
        if after is None:
            groups[(e.pci, e.code)].append(e)
        else:
            closed.setdefault((e.pci, e.code), ([], after))[0].append(e)
    return groups, closed


def _jobs(events: Iterable[XidEvent]) -> set[str]:
    return {f"pid:{e.pid}" for e in events if e.pid is not None}


def _cross_job(
    node: NodeFacts, groups: dict[tuple[str, int], list[XidEvent]]
) -> dict[tuple[int, int, int] | None, set[str]]:
    """GPU (PCI key) -> the distinct jobs that raised an application XID of :data:`xid_table.CROSS_JOB_XIDS` on
    it: the pids of this log's lines, and the job keys of the store's history (``node.xid_history``)."""
    out: dict[tuple[int, int, int] | None, set[str]] = defaultdict(set)
    for (_, code), events in groups.items():
        if code in xid_table.CROSS_JOB_XIDS:
            key = events[0].pci_key
            out[key] |= _jobs(events)
            if node.xid_history is not None:
                out[key] |= node.xid_history.jobs(key, xid_table.CROSS_JOB_XIDS)
    return out


def _history_said(node: NodeFacts) -> str:
    h = node.xid_history
    if h is None:
        return "none (no store): single-run judgement over this kernel log"
    return f"store: {h.runs} earlier run(s), {len(h.sightings)} XID finding(s) since {h.since:.0f}"


def _xid_evidence(
    pci: str, code: int, events: list[XidEvent], cls: xid_table.XidClass, info: xid_table.XidInfo
) -> dict[str, EvidenceValue]:
    pol = xid_table.policy(code)
    pids = sorted({e.pid for e in events if e.pid is not None})
    return {
        "xid": code,
        "mnemonic": info.mnemonic,
        "class": cls.value,
        "origin": pol.origin.value,
        "drains": pol.drains,
        "count": len(events),
        "pci": pci,
        "lines": [e.line for e in events[:_MAX_LINES]],
        "pids": [p for p in pids[:_MAX_PIDS]],
        "first_message": events[0].message,
        "first_uptime_s": events[0].uptime_s,
        "first_time": events[0].time,
        "last_uptime_s": events[-1].uptime_s,
        "last_time": events[-1].time,
        "file": DMESG_FILE,
    }


def _closed_findings(node: NodeFacts, closed: dict[tuple[str, int], tuple[list[XidEvent], GpuReset]]) -> list[Finding]:
    """INFO findings for the XIDs a clean reset of their GPU closed: history, not the GPU's state."""
    by_bus = gpu_index_by_bus(node.gpus)
    out = []
    for (pci, code), (events, reset) in closed.items():
        info = xid_table.lookup(code)
        cls = xid_table.judge_xid(code, [e.message for e in events]).xid_class
        idx = by_bus.get(events[0].pci_key) if events[0].pci_key is not None else None
        evidence = _xid_evidence(pci, code, events, cls, info) | {
            "closed_by_reset": reset.line,
            "reset_tool": reset.tool,
            "reset_raw": reset.raw,
        }
        message = (
            f"XID {code} ({info.mnemonic}) x{len(events)}: {info.meaning}; before a clean reset of this GPU "
            f"(line {reset.line}, {reset.tool}): history, not its current state"
        )
        out.append(_finding(node, FindingCode.GPU_XID, Severity.INFO, _subject_of(idx, pci), message, evidence))
    return out


def _fallen_keys(groups: dict[tuple[str, int], list[XidEvent]]) -> set[tuple[int, int, int]]:
    """PCI keys of the GPUs with an open XID 79 (fallen off the bus)."""
    return {ev[0].pci_key for (_, code), ev in groups.items() if code == 79 and ev[0].pci_key is not None}


def _fallen_lines(node: NodeFacts, key: tuple[int, int, int] | None) -> list[DriverEvent]:
    assert node.xids is not None
    return [d for d in node.xids.driver_events if d.kind is DriverEventKind.FALLEN_OFF_BUS and d.pci_key == key]


def xid_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """GPU_XID: one finding per (GPU, XID code), severity from the class in :mod:`xid_table` (application XIDs
    such as 13, 31, 43 are INFO and never condemn the node; repeated "escalates if repeats" codes, XID
    154's recovery action and the NVLink XIDs' own fatal / non-fatal word are honoured). Events are grouped so a
    storm of one code is one finding with a count, its pids, and its first and last time seen (the kernel log's
    stamps); the XID 43/45 teardowns that follow a critical XID on any GPU of the node join that root's finding
    (``details["consequences"]``, :func:`_consequences`), as do the driver's own "fallen off the bus" lines of
    a GPU whose XID 79 is there (``details["driver_lines"]``; NVSentinel issue #155: the same fall).

    Over time (:func:`xid_table.policy`): an application XID of :data:`xid_table.CROSS_JOB_XIDS` raised on one GPU
    by :data:`xid_table.CROSS_JOB_THRESHOLD` distinct jobs (pids of this log and, when a store is given, of
    the earlier runs' findings in ``node.xid_history``) is the GPU's fault: HW-INVESTIGATE, critical;
    ``details["history"]`` says what was looked at (without a store: the single-run judgement). The XIDs of a GPU
    before a clean reset of it (:class:`~fleetdx.probes.parsers.xid.GpuReset`) are INFO: history, not state.
    Then GPU_LOST for the driver events without an XID (:func:`gpu_lost_findings`)."""
    if node.xids is None:
        return []
    groups, closed = _episodes(node)
    judgements = {k: xid_table.judge_xid(k[1], [e.message for e in events]) for k, events in groups.items()}
    root, folded = _consequences(groups, judgements)
    jobs = _cross_job(node, groups)
    out = []
    by_bus = gpu_index_by_bus(node.gpus)  # once per node, not per XID group
    for (pci, code), events in groups.items():
        if (pci, code) in folded:
            continue
        judged = judgements[(pci, code)]
        cls = judged.xid_class
        info = xid_table.lookup(code)
        idx = by_bus.get(events[0].pci_key) if events[0].pci_key is not None else None
        message = f"XID {code} ({info.mnemonic}) x{len(events)}: {info.meaning}; {info.action}"
        if judged.note:
            message += f"; {judged.note}: that XID's own line judges its GPU"
        evidence = _xid_evidence(pci, code, events, cls, info)
        if code in xid_table.CROSS_JOB_XIDS:
            seen = jobs[events[0].pci_key]
            evidence |= {"jobs": len(seen), "history": _history_said(node)}
            if len(seen) >= xid_table.CROSS_JOB_THRESHOLD:
                cls = xid_table.XidClass.HW_INVESTIGATE
                evidence["class"] = cls.value
                message += (
                    f"; raised on this GPU by {len(seen)} distinct jobs (threshold {xid_table.CROSS_JOB_THRESHOLD}): "
                    "the GPU, not the job (NVIDIA's XID catalog: escalate when one GPU raises it for several "
                    "unrelated jobs); drain and run a GPU diagnostic (dcgmi diag -r 3)"
                )
        if code in xid_table.FATALITY_IN_MESSAGE:
            message = _nvlink_fatality(code, events, cls, info, message, evidence)
        if (pci, code) == root and folded:
            message += _fold_consequences(groups, folded, pci, evidence)
        if code == 79 and (lines := _fallen_lines(node, events[0].pci_key)):
            evidence["driver_lines"] = [d.line for d in lines[:_MAX_LINES]]
            message += f"; the driver's own 'fallen off the bus' line(s) for this GPU: {len(lines)}, the same fall"
        out.append(_finding(node, FindingCode.GPU_XID, cls.severity, _subject_of(idx, pci), message, evidence))
    return out + _closed_findings(node, closed) + gpu_lost_findings(node, _fallen_keys(groups))


def _nvlink_fatality(
    code: int,
    events: list[XidEvent],
    cls: xid_table.XidClass,
    info: xid_table.XidInfo,
    message: str,
    evidence: dict[str, EvidenceValue],
) -> str:
    """The NVLink XIDs' fatal / non-fatal count into ``evidence``; the message of a non-critical one."""
    said = Counter(xid_table.message_fatality(e.message) for e in events)
    evidence["fatality"] = {"fatal": said[True], "nonfatal": said[False], "unmarked": said[None]}
    if cls.severity is not Severity.CRITICAL:
        return (
            f"XID {code} ({info.mnemonic}) x{len(events)}: {info.meaning}, non-fatal by the driver's own "
            "message: watch the link (nvidia-smi nvlink -e); a fatal one needs a reset"
        )
    return message


def _fold_consequences(
    groups: dict[tuple[str, int], list[XidEvent]],
    folded: list[tuple[str, int]],
    pci: str,
    evidence: dict[str, EvidenceValue],
) -> str:
    """The root's words for the teardowns it caused; their groups into ``evidence["consequences"]``."""
    after = [groups[k] for k in folded]
    gpus = len({k[0] for k in folded} - {pci})
    codes = "/".join(str(c) for c in sorted({k[1] for k in folded}))
    # "<pci> XID <code>" -> lines, at most _MAX_CONSEQUENCES (evidence values are flat)
    evidence["consequences"] = {f"{k[0]} XID {k[1]}": len(groups[k]) for k in folded[:_MAX_CONSEQUENCES]}
    return (
        f"; then XID {codes} on {gpus} other GPU(s) of this node ({sum(map(len, after))} lines): "
        "teardowns this fault caused, not faults of their own"
    )


_LOST_WHAT = {
    DriverEventKind.FALLEN_OFF_BUS: (
        "has fallen off the bus (the driver's message, no XID): it does not answer on PCIe; drain, reboot or "
        "power-cycle, check PCIe AER, riser and slot"
    ),
    DriverEventKind.INIT_FAILED: (
        "could not be initialised by the driver (RmInitAdapter failed): it cannot be used; drain, reset or "
        "reboot, check the driver and firmware versions and the PCIe link"
    ),
    DriverEventKind.PROBE_FAILED: (
        "rejected a GPU at probe or initialised none: a GPU cannot be used; drain, check which GPU is missing "
        "(nvidia-smi, lspci) and the messages before this one"
    ),
    DriverEventKind.GSP_TIMEOUT: (
        "lost its GPU System Processor (GSP heartbeat or RPC timeout, no XID: XID 119's fault): drain, reset the "
        "GPU or reboot, check the driver version"
    ),
}


def gpu_lost_findings(node: NodeFacts, fallen: Collection[tuple[int, int, int]] = ()) -> list[Finding]:
    """GPU_LOST (critical), one per (device, kind) of the kernel log's driver events without an XID
    (:class:`~fleetdx.probes.parsers.xid.DriverEvent`): a GPU that fell off the bus, that the driver could not
    initialise, or a driver probe that failed. NVIDIA's "Xid Errors" documentation (docs.nvidia.com/deploy/
    xid-errors) has a GPU off the bus (XID 79) need a node reboot; the same fall printed without an XID, or a
    GPU the driver never brought up, leaves the node short of a GPU as surely. Evidence: the PCI address, the
    line numbers and the first raw line(s). The "fallen off the bus" lines of a GPU in ``fallen`` (PCI keys of
    the GPUs whose XID 79 the log holds) are left out: the XID's finding carries them."""
    if node.xids is None:
        return []
    groups: dict[tuple[object, DriverEventKind], list[DriverEvent]] = defaultdict(list)
    for e in node.xids.driver_events:
        if e.kind is DriverEventKind.FALLEN_OFF_BUS and e.pci_key is not None and e.pci_key in fallen:
            continue
        groups[(e.pci_key or e.pci, e.kind)].append(e)
    by_bus = gpu_index_by_bus(node.gpus)
    out = []
    for (_, kind), events in groups.items():
        first = events[0]
        idx = by_bus.get(first.pci_key) if first.pci_key is not None else None
        if idx is not None:
            subject = _subject(idx)
        else:
            subject = f"PCI:{first.pci}" if first.pci else "NVIDIA driver"
        who = subject if kind is not DriverEventKind.PROBE_FAILED else "the NVIDIA driver"
        out.append(
            _finding(
                node,
                FindingCode.GPU_LOST,
                Severity.CRITICAL,
                subject,
                f'{who} {_LOST_WHAT[kind]}; x{len(events)}, first: "{first.message}"',
                {
                    "kind": kind.value,
                    "pci": first.pci,
                    "pci_id": first.pci_id,
                    "count": len(events),
                    "lines": [e.line for e in events[:_MAX_LINES]],
                    "raw": first.raw,
                    "last_uptime_s": events[-1].uptime_s,
                    "last_time": events[-1].time,
                    "file": DMESG_FILE,
                },
            )
        )
    return out


# --- micro-benchmarks -----------------------------------------------------------------------------------

_METRICS: tuple[tuple[ref.Metric, FindingCode, str, str], ...] = (
    (ref.Metric.GEMM_BF16, FindingCode.GEMM_SLOW, "bf16 GEMM", "TFLOP/s"),
    (ref.Metric.D2D, FindingCode.HBM_SLOW, "device memory copy (read+write)", "GB/s"),
    (ref.Metric.H2D_PINNED, FindingCode.H2D_SLOW, "pinned host-to-device copy", "GB/s"),
    (ref.Metric.D2H_PINNED, FindingCode.H2D_SLOW, "pinned device-to-host copy", "GB/s"),
)


def _value(m: Microbench, metric: ref.Metric) -> float | None:
    v = getattr(m, metric.value)
    return v if isinstance(v, float) else None


class PeerFigures:
    """One figure (a :class:`~references.Metric`) of one GPU model over every node of a fleet: all the values,
    sorted, and each host's own. The median over the *peers* of a host (every node but the host's) is that of
    the sorted values less the host's k values, found in O(k log n) without copying the n values.

    Figures are finite (the micro-benchmark parser rejects others), so sorting them is a total order.
    """

    def __init__(self) -> None:
        self.values: list[float] = []
        self.by_host: dict[str, list[float]] = defaultdict(list)

    def add(self, host: str, value: float) -> None:
        self.by_host[host].append(value)

    def seal(self) -> None:
        """Sort the values once all are added."""
        self.values = sorted(v for own in self.by_host.values() for v in own)

    def peer_median(self, host: str) -> tuple[float, int] | None:
        """(median, count) of the values of every host but ``host``, as ``statistics.median`` gives it;
        ``None`` when there is none."""
        values = self.values
        own = sorted(self.by_host.get(host, ()))
        count = len(values) - len(own)
        if count <= 0:
            return None
        # positions of the host's values in ``values``: a value seen c times takes the first c of its run
        gone: list[int] = []
        for i, v in enumerate(own):
            gone.append(gone[-1] + 1 if i and own[i - 1] == v else bisect_left(values, v))

        def at(rank: int) -> float:  # the rank-th (0-based) of the values left
            i = rank
            for g in gone:
                if g > i:
                    break
                i += 1
            return values[i]

        half = count // 2
        if count % 2:
            return at(half), count
        return (at(half - 1) + at(half)) / 2, count


def _peer_figures(fleet: Fleet) -> dict[tuple[str, ref.Metric], PeerFigures]:
    """(GPU model, metric) -> its :class:`PeerFigures` over ``fleet``. Once per fleet (:meth:`Fleet.derived`)."""
    out: dict[tuple[str, ref.Metric], PeerFigures] = {}
    for node in fleet.nodes:
        for m in node.microbench:
            if m.gpu_name is None:
                continue
            for metric, *_ in _METRICS:
                v = _value(m, metric)
                if v is not None:
                    out.setdefault((m.gpu_name, metric), PeerFigures()).add(node.host, v)
    for figures in out.values():
        figures.seal()
    return out


def _peer_median(node: NodeFacts, fleet: Fleet, name: str | None, metric: ref.Metric) -> tuple[float, int] | None:
    """(median, count) of ``metric`` over the GPUs named ``name`` of ``node``'s peers, else ``None``."""
    if name is None:
        return None
    figures = fleet.derived(_peer_figures).get((name, metric))
    return figures.peer_median(node.host) if figures is not None else None


def _bench_subject(node: NodeFacts, m: Microbench) -> str:
    """``GPU<index>``; the flat one-GPU JSON names no index: then the node's only GPU (``nvidia-smi -q -x``'s,
    read from its GPU view), if it has one."""
    if m.gpu_index is not None:
        return _subject(m.gpu_index)
    if node.gpu_source == SMI_XML_FILE and len(node.gpus) == 1 and len(node.microbench) == 1:
        return _subject(node.gpus[0].index)
    return "GPU"


def microbench_rule(node: NodeFacts, fleet: Fleet) -> list[Finding]:
    """GEMM_SLOW (bf16 GEMM), HBM_SLOW (device copy), H2D_SLOW (pinned H2D or D2H), all WARNING.

    A figure is slow when it is below the model's expected figure by more than the tolerance
    (:func:`references.expected`), or below ``(1 - PEER_TOLERANCE)`` x the median of the same figure on the
    peers' GPUs of the same model. A GPU of an unknown model without peers is not judged. On a GPU that another
    process holds (GPU_FOREIGN_PROCESS) the figures measure the sharing, not the GPU: a slow one is INFO and says
    so (on a lent H100 a foreign bf16 GEMM loop halved the device copy, 1608 against 3006 GB/s, and left the GPU
    sound).
    """
    out = []
    shared = {_subject_of(p.gpu_index, p.bus_id): p for p in node.gpu_processes}
    for m in node.microbench:
        spec = ref.spec_for(m.gpu_name)
        for metric, code, what, unit in _METRICS:
            value = _value(m, metric)
            if value is None:
                continue
            exp = ref.expected(spec, metric) if spec is not None else None
            peers = _peer_median(node, fleet, m.gpu_name, metric)
            slow_ref = exp is not None and value < exp.threshold
            slow_peers = peers is not None and value < peers[0] * (1 - ref.PEER_TOLERANCE)
            if not (slow_ref or slow_peers):
                continue
            ev: dict[str, EvidenceValue] = {
                "metric": metric.value,
                "measured": round(value, 2),
                "unit": unit,
                "gpu_name": m.gpu_name,
                "file": MICROBENCH_FILE,
            }
            parts = []
            if exp is not None:
                ev |= {
                    "expected": round(exp.value, 2),
                    "basis": exp.basis.value,
                    "tolerance": exp.tolerance,
                    "below_expected": slow_ref,
                }
                parts.append(f"expected {exp.value:.0f} ({exp.basis.value})")
            if peers is not None:
                ev |= {
                    "peer_median": round(peers[0], 2),
                    "peer_gpus": peers[1],
                    "peer_tolerance": ref.PEER_TOLERANCE,
                    "below_peers": slow_peers,
                }
                parts.append(f"peer median {peers[0]:.0f} over {peers[1]} GPUs")
            subject = _bench_subject(node, m)
            other = shared.get(subject)
            if other is not None:
                ev["shared_with_pid"] = other.pid
                parts.append(
                    f"measured while pid {other.pid} ({other.name or '?'}) used {subject}: not evidence of a slow "
                    "GPU; measure again once it is idle"
                )
            out.append(
                _finding(
                    node,
                    code,
                    Severity.INFO if other is not None else Severity.WARNING,
                    subject,
                    f"{what} {value:.1f} {unit} is slow: " + "; ".join(parts),
                    ev,
                )
            )
    return out


RULES: list[Rule] = [
    gpu_count_rule,
    foreign_process_rule,
    ecc_rule,
    row_remap_rule,
    clocks_rule,
    pcie_rule,
    xid_rule,
    microbench_rule,
]

#: the rules of ``RULES`` that read the fleet (:data:`~fleetdx.orchestrator.diagnosis.base.PEER_FIELDS` only)
PEER_RULES: list[Rule] = [gpu_count_rule, microbench_rule]
