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
    QUERY_GPU_FILE,
    SMI_XML_FILE,
    NamedNcclLog,
    NamedNcclTests,
    ProbeSpec,
    rows_reading,
)
from fleetdx.probes.contracts import Contract, RunStatus
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.ibstat import IbReport
from fleetdx.probes.parsers.lscpu import CpuInfo
from fleetdx.probes.parsers.microbench import Microbench
from fleetdx.probes.parsers.numactl import NumaTopology
from fleetdx.probes.parsers.p2p import P2PMatrix
from fleetdx.probes.parsers.smi_csv import SmiCsv
from fleetdx.probes.parsers.smi_values import ClockEventReason
from fleetdx.probes.parsers.smi_xml import SmiReport
from fleetdx.probes.parsers.topo import TopoMatrix
from fleetdx.probes.parsers.xid import XidLog

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
    xids: XidLog | None = None
    nccl_tests: list[NamedNcclTests] = Field(default_factory=list)
    nccl_logs: list[NamedNcclLog] = Field(default_factory=list)
    microbench: list[Microbench] = Field(default_factory=list)
    #: NodeFacts field -> the bundle file that filled it, for the single-model fields (e.g.
    #: ``{"ib": "sysfs_infiniband.txt"}`` when ``ibstat`` was skipped); nccl-tests/log files carry their own names
    sources: dict[str, str] = Field(default_factory=dict)
    #: the per-GPU view (see the module doc) and the file it was read from (``None``: no GPU inventory);
    #: derived from ``smi``/``query_gpu`` when not given
    gpus: list[GpuView] = Field(default_factory=list)
    gpu_source: str | None = None

    @model_validator(mode="after")
    def _derive_gpu_view(self) -> NodeFacts:
        if self.gpu_source is None and not self.gpus:
            gpus, source = gpu_views(self.smi, self.query_gpu)
            object.__setattr__(self, "gpus", gpus)  # frozen model: set once, while it is being built
            object.__setattr__(self, "gpu_source", source)
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
