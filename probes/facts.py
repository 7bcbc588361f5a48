"""The parsed facts of one node, read from one bundle: what every diagnosis rule, the CLI and the topology
analyses consume, normalised once here.

:func:`node_facts` reads each raw file of a bundle with the parser of its catalog row
(:data:`fleetdx.probes.catalog.CATALOG`) into the row's :class:`NodeFacts` field; a file that fails to parse
becomes a :class:`ParseFailure` (the raw text stays in the bundle), never an exception. Where several rows
fill one field (``numactl -H`` or the sysfs NUMA dump; ``ibstat``, ``ibstatus`` or the sysfs InfiniBand dump;
``lscpu -J`` or ``lscpu``) the first in catalog order that parses wins and :attr:`NodeFacts.sources` names it.

:attr:`NodeFacts.gpus` is the one per-GPU view of clocks, power, temperature and PCIe link (:class:`GpuView`):
from ``nvidia-smi -q -x`` when it parsed, else from the ``--query-gpu`` CSV; :attr:`NodeFacts.gpu_source`
names the file. Rules read GPU state only through it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from fleetdx.probes.bundle import BundleData
from fleetdx.probes.catalog import (
    CATALOG,
    COMPUTE_APPS_FILE,
    QUERY_GPU_FILE,
    REMAPPED_ROWS_FILE,
    SMI_XML_FILE,
    NamedDcgmDiag,
    NamedDcgmHealth,
    NamedNcclLog,
    NamedNcclTests,
    ProbeSpec,
    rows_reading,
)
from fleetdx.probes.contracts import Contract, EvidenceValue, RunStatus
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.ib_counters import IbCounters, IbdiagnetSummary
from fleetdx.probes.parsers.ibstat import IbReport
from fleetdx.probes.parsers.lscpu import CpuInfo
from fleetdx.probes.parsers.microbench import Microbench
from fleetdx.probes.parsers.numactl import NumaTopology
from fleetdx.probes.parsers.p2p import P2PMatrix
from fleetdx.probes.parsers.smi_csv import SmiCsv
from fleetdx.probes.parsers.smi_values import ClockEventReason, bus_key
from fleetdx.probes.parsers.smi_xml import SmiReport
from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.probes.parsers.xid import XidHistory, XidLog

__all__ = ["GpuView", "NamedNcclLog", "NamedNcclTests", "NodeFacts", "ParseFailure", "ProbeRecord", "node_facts"]


class ProbeRecord(Contract):
    """One command of the bundle: how it ran (from ``meta.json``, or ``ok`` for a bare raw file)."""

    name: str  #: file name in the bundle, e.g. "nvidia-smi_topo_-m.txt"
    status: RunStatus
    duration_s: float | None = None
    error: str | None = None  #: skip reason, exit code text or timeout message
    argv: list[str] | None = None


class ParseFailure(Contract):
    """A raw file that did not parse; the text stays in the bundle."""

    file: str
    kind: str
    line: int | None
    message: str


class GpuView(Contract):
    """One GPU's state as the rules read it, from ``nvidia-smi -q -x`` or else the query-gpu CSV (``None``
    where the source does not say). Power in W, clocks in MHz, temperature in °C; ``file`` is the bundle file
    it was read from."""

    index: int | None
    bus_id: str | None
    name: str | None = None
    reasons: list[ClockEventReason]
    reasons_mask: str | None = None  #: the CSV's ``clocks_event_reasons.active`` cell, e.g. "0x4"
    sm_clock_mhz: int | None
    max_sm_clock_mhz: int | None
    power_draw_w: float | None
    power_limit_w: float | None
    default_power_limit_w: float | None = None
    temperature_c: float | None
    utilization_gpu_pct: float | None
    #: volatile uncorrectable ECC errors (since the driver loaded); ``ecc_evidence`` names the source's cells
    ecc_uncorrectable: int | None = None
    ecc_evidence: dict[str, EvidenceValue] = Field(default_factory=dict)
    gen_current: int | None
    gen_max: int | None
    width_current: int | None
    width_max: int | None
    file: str

    @property
    def under_load(self) -> bool | None:
        """Utilisation above 0 % and the "GPU idle" reason not active; ``None`` if utilisation is unknown."""
        if self.utilization_gpu_pct is None:
            return None
        return self.utilization_gpu_pct > 0 and ClockEventReason.GPU_IDLE not in self.reasons


class GpuProcessView(Contract):
    """A process holding a GPU: from the XML's ``<processes>``, else the compute-apps CSV (``file`` says
    which). ``gpu_index`` is ``None`` when its bus id matches no GPU of the inventory; memory in bytes."""

    pid: int
    name: str | None
    type: str | None = None  #: "C", "G" or "C+G" (XML only)
    used_memory_bytes: int | None
    bus_id: str | None
    gpu_index: int | None
    file: str


class RemapView(Contract):
    """One GPU's row-remapping state: from the XML when it reports one for any GPU, else the remapped-rows
    CSV. ``gpu_index`` as in :class:`GpuProcessView`."""

    bus_id: str | None
    gpu_index: int | None
    pending: bool | None
    failure: bool | None
    correctable: int | None
    uncorrectable: int | None
    file: str


def gpu_index_by_bus(gpus: list[GpuView]) -> dict[tuple[int, int, int], int]:
    """PCI (domain, bus, device) -> GPU index, over the per-GPU view."""
    out: dict[tuple[int, int, int], int] = {}
    for g in gpus:
        key = bus_key(g.bus_id) if g.bus_id else None
        if key is not None and g.index is not None:
            out[key] = g.index
    return out


def _index_of(index: dict[tuple[int, int, int], int], bus_id: str | None) -> int | None:
    key = bus_key(bus_id) if bus_id else None
    return index.get(key) if key is not None else None


def gpu_processes(
    smi: SmiReport | None, compute_apps: SmiCsv | None, index: dict[tuple[int, int, int], int]
) -> list[GpuProcessView]:
    """Every process holding a GPU: the XML's, else the compute-apps CSV's."""
    if smi is not None:
        return [
            GpuProcessView(
                pid=p.pid,
                name=p.name,
                type=p.type,
                used_memory_bytes=p.used_memory_bytes,
                bus_id=g.bus_id,
                gpu_index=g.index,
                file=SMI_XML_FILE,
            )
            for g in smi.gpus
            for p in g.processes
        ]
    if compute_apps is None:
        return []
    return [
        GpuProcessView(
            pid=a.pid,
            name=a.process_name,
            used_memory_bytes=a.used_memory_bytes,
            bus_id=a.bus_id,
            gpu_index=_index_of(index, a.bus_id),
            file=COMPUTE_APPS_FILE,
        )
        for a in compute_apps.compute_apps()
    ]


def remaps(
    smi: SmiReport | None, remapped_rows: SmiCsv | None, index: dict[tuple[int, int, int], int]
) -> list[RemapView]:
    """Each GPU's row remapping: the XML's when it reports it for any GPU, else the remapped-rows CSV's."""
    if smi is not None and any(g.remapped_rows is not None for g in smi.gpus):
        return [
            RemapView(
                bus_id=g.bus_id,
                gpu_index=g.index,
                pending=r.pending,
                failure=r.failure,
                correctable=r.correctable,
                uncorrectable=r.uncorrectable,
                file=SMI_XML_FILE,
            )
            for g in smi.gpus
            if (r := g.remapped_rows) is not None
        ]
    if remapped_rows is None:
        return []
    return [
        RemapView(
            bus_id=r.bus_id,
            gpu_index=_index_of(index, r.bus_id),
            pending=r.pending,
            failure=r.failure,
            correctable=r.correctable,
            uncorrectable=r.uncorrectable,
            file=REMAPPED_ROWS_FILE,
        )
        for r in remapped_rows.remapped_rows()
    ]


def gpu_views(smi: SmiReport | None, query_gpu: SmiCsv | None) -> tuple[list[GpuView], str | None]:
    """One :class:`GpuView` per GPU and the file they come from: the XML when parsed, else the query-gpu CSV,
    else ``([], None)``."""
    if smi is not None:
        return [
            GpuView(
                index=g.index,
                bus_id=g.bus_id,
                name=g.name,
                reasons=g.active_clock_reasons,
                sm_clock_mhz=g.clocks.sm_mhz,
                max_sm_clock_mhz=g.clocks.max_sm_mhz,
                power_draw_w=g.power_draw_w,
                power_limit_w=g.power_limit_w,
                default_power_limit_w=g.default_power_limit_w,
                temperature_c=g.temperature_c,
                utilization_gpu_pct=g.utilization_gpu_pct,
                ecc_uncorrectable=g.ecc_volatile.uncorrectable,
                ecc_evidence={
                    "volatile_sram_uncorrectable": g.ecc_volatile.sram_uncorrectable,
                    "volatile_dram_uncorrectable": g.ecc_volatile.dram_uncorrectable,
                    "volatile_double_bit_total": g.ecc_volatile.uncorrectable_total,
                    "aggregate_uncorrectable": g.ecc_aggregate.uncorrectable,
                },
                gen_current=g.pcie.gen_current,
                gen_max=g.pcie.gen_max,
                width_current=g.pcie.width_current,
                width_max=g.pcie.width_max,
                file=SMI_XML_FILE,
            )
            for g in smi.gpus
        ], SMI_XML_FILE
    if query_gpu is not None:
        return [
            GpuView(
                index=r.index,
                bus_id=r.bus_id,
                name=r.name,
                reasons=r.clock_event_reasons,
                reasons_mask=None if r.clock_event_mask is None else hex(r.clock_event_mask),
                sm_clock_mhz=r.sm_clock_mhz,
                max_sm_clock_mhz=r.max_sm_clock_mhz,
                power_draw_w=r.power_draw_w,
                power_limit_w=r.power_limit_w,
                temperature_c=r.temperature_c,
                utilization_gpu_pct=r.utilization_gpu_pct,
                ecc_uncorrectable=r.ecc_uncorrected_volatile_total,
                ecc_evidence={"ecc.errors.uncorrected.volatile.total": r.ecc_uncorrected_volatile_total},
                gen_current=r.pcie_gen_current,
                gen_max=r.pcie_gen_max,
                width_current=r.pcie_width_current,
                width_max=r.pcie_width_max,
                file=QUERY_GPU_FILE,
            )
            for r in query_gpu.gpus()
        ], QUERY_GPU_FILE
    return [], None


class NodeFacts(Contract):
    """Everything parsed from one node's bundle. A field is ``None`` when its raw file is absent, was skipped,
    or failed to parse (then ``parse_failures`` says why)."""

    host: str
    replayed: bool = False  #: the facts come from a replayed/simulated bundle, not a live run
    probes: list[ProbeRecord] = Field(default_factory=list)
    parse_failures: list[ParseFailure] = Field(default_factory=list)
    unreadable: dict[str, str] = Field(default_factory=dict)  #: bundle entries that could not be read -> why
    topo: TopoMatrix | None = None
    p2p: P2PMatrix | None = None
    smi: SmiReport | None = None
    query_gpu: SmiCsv | None = None
    compute_apps: SmiCsv | None = None
    remapped_rows: SmiCsv | None = None
    numa: NumaTopology | None = None
    cpu: CpuInfo | None = None
    ib: IbReport | None = None
    #: RDMA port counters: two sysfs samples (standard level), a perfquery capture, an ibdiagnet summary
    ib_counters: IbCounters | None = None
    ib_perfquery: IbCounters | None = None
    ibdiagnet: IbdiagnetSummary | None = None
    xids: XidLog | None = None
    #: the store's earlier XID findings about this host (a pre-flight with a store sets it); None: no store
    xid_history: XidHistory | None = None
    nccl_tests: list[NamedNcclTests] = Field(default_factory=list)
    nccl_logs: list[NamedNcclLog] = Field(default_factory=list)
    microbench: list[Microbench] = Field(default_factory=list)
    #: ``dcgmi diag`` runs and ``dcgmi health -c`` checks (opt-in: ``collect --dcgm LEVEL``)
    dcgm_diag: list[NamedDcgmDiag] = Field(default_factory=list)
    dcgm_health: list[NamedDcgmHealth] = Field(default_factory=list)
    #: NodeFacts field -> the bundle file that filled it, for the single-model fields (e.g.
    #: ``{"ib": "sysfs_infiniband.txt"}`` when ``ibstat`` was skipped); nccl-tests/log files carry their own names
    sources: dict[str, str] = Field(default_factory=dict)
    #: the per-GPU view (see the module doc) and the file it was read from (``None``: no GPU inventory);
    #: derived from ``smi``/``query_gpu`` when not given
    gpus: list[GpuView] = Field(default_factory=list)
    gpu_source: str | None = None
    #: processes holding a GPU, and each GPU's row remapping, normalised the same way (see their models)
    gpu_processes: list[GpuProcessView] = Field(default_factory=list)
    remaps: list[RemapView] = Field(default_factory=list)

    @model_validator(mode="after")
    def _derive_gpu_view(self) -> NodeFacts:
        """Fill the normalised GPU views from the parsed files, once, when not given."""
        if self.gpu_source is None and not self.gpus:
            gpus, source = gpu_views(self.smi, self.query_gpu)
            index = gpu_index_by_bus(gpus)
            # frozen model: set once, while it is being built
            object.__setattr__(self, "gpus", gpus)
            object.__setattr__(self, "gpu_source", source)
            object.__setattr__(self, "gpu_processes", gpu_processes(self.smi, self.compute_apps, index))
            object.__setattr__(self, "remaps", remaps(self.smi, self.remapped_rows, index))
        return self


def _probe_records(data: BundleData) -> list[ProbeRecord]:
    return [
        ProbeRecord(name=c.file, status=c.status, duration_s=c.duration_s, error=c.reason, argv=c.argv or None)
        for c in data.commands
    ]


def _parse_one(spec: ProbeSpec, name: str, text: str) -> BaseModel | ParseFailure:
    """The parsed model, or a ParseFailure for a ParseError (the only exception a parser may raise)."""
    assert spec.parser is not None
    try:
        return spec.parser.for_file(name)(text)
    except ParseError as e:
        return ParseFailure(file=name, kind=spec.parser.kind, line=e.line, message=str(e))


def node_facts(data: BundleData) -> NodeFacts:
    """Parse every file of ``data`` that a catalog row reads into that row's :class:`NodeFacts` field.

    Files whose command did not end ``ok`` are not parsed (their status is in ``probes``), except those of
    list fields (nccl-tests outputs), whose parser reads failure output too. A file that fails to parse
    becomes a :class:`ParseFailure`; this function never raises for bad content.
    """
    order = {spec.file: i for i, spec in enumerate(CATALOG) if spec.match is None}
    single: dict[str, Any] = {}
    many: dict[str, list[Any]] = {}
    failures: list[ParseFailure] = []
    sources: dict[str, str] = {}
    for name in sorted(data.files, key=lambda n: (order.get(n, len(order)), n)):
        meta = data.meta_for(name)
        for spec in rows_reading(name):
            if spec.parser is None or spec.fact is None or spec.fact in single:
                continue
            if meta is not None and meta.status is not RunStatus.OK and spec.each is None:
                continue
            got = _parse_one(spec, name, data.files[name])
            if isinstance(got, ParseFailure):
                failures.append(got)
            elif spec.each is not None:
                many.setdefault(spec.fact, []).extend(spec.each(name, got))
            else:
                single[spec.fact] = got
                sources[spec.fact] = name
    return NodeFacts(
        host=data.host,
        replayed=data.replayed,
        probes=_probe_records(data),
        parse_failures=failures,
        unreadable=dict(data.unreadable),
        sources=sources,
        **single,
        **many,
    )
