"""Parser for ``nvidia-smi -q -x``: per-GPU inventory and health as :class:`SmiReport`.

Reads, per ``<gpu>``: name, architecture, UUID, PCI bus id, MIG mode, PCIe generation and width (current and
max), clocks (current and max) and the clock event reasons, ECC mode and counters (volatile and aggregate),
remapped rows, retired pages, running processes, power draw and limit, temperatures, utilisation and memory.

Handles the element names of older and newer drivers: ``clocks_throttle_reasons`` (before R535) and
``clocks_event_reasons``; ``power_readings`` (older) and ``gpu_power_readings``; ECC as
``single_bit``/``double_bit`` totals (pre-Ampere), ``sram_*``/``dram_*`` and the newest
``sram_uncorrectable_parity``/``_secded`` split. ``N/A`` and ``Not Supported`` become ``None``.

Units: memory in bytes (nvidia-smi prints MiB = 2**20 B), clocks in MHz, power in W, temperature in °C,
utilisation in percent.

The input is untrusted text: a document type with an internal subset or any ``<!ENTITY`` declaration is
rejected before parsing (entity expansion "billion laughs"); the stdlib expat parser never fetches the
external
``nvsmi_device_v*.dtd`` that real output names. Every failure raises :class:`~fleetdx.probes.errors.ParseError`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers import smi_values as V
from fleetdx.probes.parsers.smi_values import ClockEventReason

FMT = "smi-xml"
_DOCTYPE_SUBSET_RE = re.compile(r"<!DOCTYPE[^>\[]*\[", re.IGNORECASE)


class PcieLink(Contract):
    """PCIe link of one GPU. Generation and width as the GPU reports them; ``None`` where ``N/A``."""

    gen_current: int | None = None
    gen_max: int | None = None  #: max_link_gen: the most both GPU and slot support
    width_current: int | None = None  #: lanes, from "16x"
    width_max: int | None = None
    replay_counter: int | None = None


class Clocks(Contract):
    """Clocks in MHz."""

    sm_mhz: int | None = None
    graphics_mhz: int | None = None
    mem_mhz: int | None = None
    max_sm_mhz: int | None = None
    max_mem_mhz: int | None = None


class EccCounts(Contract):
    """ECC error counts of one scope (volatile: since the driver loaded; aggregate: lifetime, kept in the
    InfoROM). ``sram_uncorrectable`` sums parity and SEC-DED where the driver splits them; pre-Ampere drivers
    report only single-bit (correctable) and double-bit (uncorrectable) totals, kept in ``*_total``."""

    sram_correctable: int | None = None
    sram_uncorrectable: int | None = None
    dram_correctable: int | None = None
    dram_uncorrectable: int | None = None
    correctable_total: int | None = None
    uncorrectable_total: int | None = None

    @property
    def uncorrectable(self) -> int | None:
        """SRAM + DRAM uncorrectable, or the double-bit total; ``None`` when nothing was reported."""
        parts = [v for v in (self.sram_uncorrectable, self.dram_uncorrectable) if v is not None]
        if parts:
            return sum(parts)
        return self.uncorrectable_total


class RemappedRows(Contract):
    """Row remapping state (A100 and later; NVIDIA "A100/H100 GPU Memory Error Management")."""

    correctable: int | None = None  #: rows remapped after correctable errors
    uncorrectable: int | None = None  #: rows remapped after uncorrectable errors
    pending: bool | None = None  #: a remap waits for a GPU reset
    failure: bool | None = None  #: a remap could not be recorded (no spare row)


class GpuProcess(Contract):
    """A process holding a context on the GPU."""

    pid: int
    name: str | None = None
    type: str | None = None  #: "C" compute, "G" graphics, "C+G"
    used_memory_bytes: int | None = None


class SmiGpu(Contract):
    """One ``<gpu>`` element; ``index`` is its position in the document (nvidia-smi lists GPUs by index)."""

    index: int
    bus_id: str
    name: str | None = None
    architecture: str | None = None
    uuid: str | None = None
    serial: str | None = None
    mig_mode: str | None = None  #: current MIG mode, "Enabled"/"Disabled"; None where MIG is not supported
    persistence_mode: str | None = None
    performance_state: str | None = None  #: "P0" ... "P12"
    pcie: PcieLink = Field(default_factory=PcieLink)
    clocks: Clocks = Field(default_factory=Clocks)
    clock_event_reasons: dict[ClockEventReason, bool] = Field(default_factory=dict)
    ecc_mode: str | None = None  #: current ECC mode, "Enabled"/"Disabled"
    ecc_volatile: EccCounts = Field(default_factory=EccCounts)
    ecc_aggregate: EccCounts = Field(default_factory=EccCounts)
    remapped_rows: RemappedRows | None = None
    retired_pages_pending: bool | None = None
    processes: list[GpuProcess] = Field(default_factory=list)
    power_draw_w: float | None = None  #: average power draw where reported, else instant
    power_limit_w: float | None = None  #: current (enforced) power limit
    default_power_limit_w: float | None = None
    temperature_c: float | None = None
    memory_temperature_c: float | None = None
    utilization_gpu_pct: float | None = None
    utilization_memory_pct: float | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None

    @property
    def active_clock_reasons(self) -> list[ClockEventReason]:
        return [r for r, on in self.clock_event_reasons.items() if on]


class SmiReport(Contract):
    """``nvidia-smi -q -x`` of one node."""

    driver_version: str | None = None
    cuda_version: str | None = None
    timestamp: str | None = None  #: as printed, local time of the node
    attached_gpus: int | None = None
    gpus: list[SmiGpu] = Field(default_factory=list)


def _t(el: ET.Element | None, path: str) -> str | None:
    """Text of ``path`` under ``el`` (``None`` if absent); "not available" markers are kept for the caller."""
    if el is None:
        return None
    child = el.find(path)
    if child is None or child.text is None:
        return None
    return child.text.strip()


def _first(el: ET.Element, *paths: str) -> str | None:
    for p in paths:
        v = _t(el, p)
        if v is not None and not V.is_not_available(v):
            return v
    return None


def _int(el: ET.Element | None, path: str, units: tuple[str, ...] = ()) -> int | None:
    return V.integer(FMT, _t(el, path), units)


def _pcie(gpu: ET.Element) -> PcieLink:
    link = gpu.find("pci/pci_gpu_link_info")
    width = link.find("link_widths") if link is not None else None
    gen = link.find("pcie_gen") if link is not None else None
    return PcieLink(
        gen_current=_int(gen, "current_link_gen"),
        gen_max=_int(gen, "max_link_gen"),
        width_current=_int(width, "current_link_width", ("x",)),
        width_max=_int(width, "max_link_width", ("x",)),
        replay_counter=_int(gpu.find("pci"), "replay_counter"),
    )


def _clocks(gpu: ET.Element) -> Clocks:
    mhz = ("MHz",)
    return Clocks(
        sm_mhz=_int(gpu, "clocks/sm_clock", mhz),
        graphics_mhz=_int(gpu, "clocks/graphics_clock", mhz),
        mem_mhz=_int(gpu, "clocks/mem_clock", mhz),
        max_sm_mhz=_int(gpu, "max_clocks/sm_clock", mhz),
        max_mem_mhz=_int(gpu, "max_clocks/mem_clock", mhz),
    )


def _clock_reasons(gpu: ET.Element) -> dict[ClockEventReason, bool]:
    """``clocks_event_reasons`` (R535+) or ``clocks_throttle_reasons`` (older); element names differ only in
    the ``event``/``throttle`` word."""
    out: dict[ClockEventReason, bool] = {}
    for word in ("event", "throttle"):
        block = gpu.find(f"clocks_{word}_reasons")
        if block is None:
            continue
        for reason in ClockEventReason:
            value = V.yes_no(FMT, _t(block, f"clocks_{word}_reason_{reason.value}"))
            if value is not None:
                out[reason] = value
        break
    return out


def _ecc(scope: ET.Element | None) -> EccCounts:
    if scope is None:
        return EccCounts()
    sram_unc: int | None = _int(scope, "sram_uncorrectable")
    parity, secded = _int(scope, "sram_uncorrectable_parity"), _int(scope, "sram_uncorrectable_secded")
    if sram_unc is None and (parity is not None or secded is not None):
        sram_unc = (parity or 0) + (secded or 0)
    return EccCounts(
        sram_correctable=_int(scope, "sram_correctable"),
        sram_uncorrectable=sram_unc,
        dram_correctable=_int(scope, "dram_correctable"),
        dram_uncorrectable=_int(scope, "dram_uncorrectable"),
        correctable_total=_int(scope, "single_bit/total"),
        uncorrectable_total=_int(scope, "double_bit/total"),
    )


def _remapped(gpu: ET.Element) -> RemappedRows | None:
    el = gpu.find("remapped_rows")
    if el is None or (el.text is not None and V.is_not_available(el.text) and len(el) == 0):
        return None
    return RemappedRows(
        correctable=_int(el, "remapped_row_corr"),
        uncorrectable=_int(el, "remapped_row_unc"),
        pending=V.yes_no(FMT, _t(el, "remapped_row_pending")),
        failure=V.yes_no(FMT, _t(el, "remapped_row_failure")),
    )


def _processes(gpu: ET.Element) -> list[GpuProcess]:
    out = []
    for p in gpu.findall("processes/process_info"):
        pid = V.integer(FMT, _t(p, "pid"))
        if pid is None:
            raise ParseError(FMT, None, "a pid in <process_info>", _t(p, "pid") or "")
        out.append(
            GpuProcess(
                pid=pid,
                name=V.text(_t(p, "process_name")),
                type=V.text(_t(p, "type")),
                used_memory_bytes=V.mib_to_bytes(FMT, _t(p, "used_memory")),
            )
        )
    return out


def _power(gpu: ET.Element) -> tuple[float | None, float | None, float | None]:
    """(draw, current limit, default limit) in W, from ``gpu_power_readings`` or older ``power_readings``."""
    w = ("W",)
    draw = V.number(
        FMT,
        _first(
            gpu,
            "gpu_power_readings/average_power_draw",
            "gpu_power_readings/instant_power_draw",
            "gpu_power_readings/power_draw",
            "power_readings/average_power_draw",
            "power_readings/power_draw",
            "power_readings/instant_power_draw",
        ),
        w,
    )
    limit = V.number(
        FMT,
        _first(
            gpu,
            "gpu_power_readings/current_power_limit",
            "gpu_power_readings/enforced_power_limit",
            "power_readings/current_power_limit",
            "power_readings/enforced_power_limit",
            "power_readings/power_limit",
        ),
        w,
    )
    default = V.number(
        FMT, _first(gpu, "gpu_power_readings/default_power_limit", "power_readings/default_power_limit"), w
    )
    return draw, limit, default


def _gpu(index: int, gpu: ET.Element) -> SmiGpu:
    bus_id = gpu.get("id") or _t(gpu, "pci/pci_bus_id")
    if not bus_id:
        raise ParseError(FMT, None, "<gpu id=...> or <pci_bus_id>", f"GPU #{index}")
    draw, limit, default = _power(gpu)
    pending_retire = _first(gpu, "retired_pages/pending_retirement", "retired_pages/pending_blacklist")
    return SmiGpu(
        index=index,
        bus_id=bus_id,
        name=V.text(_t(gpu, "product_name")),
        architecture=V.text(_t(gpu, "product_architecture")),
        uuid=V.text(_t(gpu, "uuid")),
        serial=V.text(_t(gpu, "serial")),
        mig_mode=V.text(_t(gpu, "mig_mode/current_mig")),
        persistence_mode=V.text(_t(gpu, "persistence_mode")),
        performance_state=V.text(_t(gpu, "performance_state")),
        pcie=_pcie(gpu),
        clocks=_clocks(gpu),
        clock_event_reasons=_clock_reasons(gpu),
        ecc_mode=V.text(_t(gpu, "ecc_mode/current_ecc")),
        ecc_volatile=_ecc(gpu.find("ecc_errors/volatile")),
        ecc_aggregate=_ecc(gpu.find("ecc_errors/aggregate")),
        remapped_rows=_remapped(gpu),
        retired_pages_pending=V.yes_no(FMT, pending_retire),
        processes=_processes(gpu),
        power_draw_w=draw,
        power_limit_w=limit,
        default_power_limit_w=default,
        temperature_c=V.number(FMT, _t(gpu, "temperature/gpu_temp"), ("C",)),
        memory_temperature_c=V.number(FMT, _t(gpu, "temperature/memory_temp"), ("C",)),
        utilization_gpu_pct=V.number(FMT, _t(gpu, "utilization/gpu_util"), ("%",)),
        utilization_memory_pct=V.number(FMT, _t(gpu, "utilization/memory_util"), ("%",)),
        memory_total_bytes=V.mib_to_bytes(FMT, _t(gpu, "fb_memory_usage/total")),
        memory_used_bytes=V.mib_to_bytes(FMT, _t(gpu, "fb_memory_usage/used")),
    )


def _root(text: str) -> ET.Element:
    if "<!ENTITY" in text or _DOCTYPE_SUBSET_RE.search(text):
        raise ParseError(FMT, None, "no entity declarations or internal DTD subset", "<!ENTITY/<!DOCTYPE [")
    if "\x00" in text:
        raise ParseError(FMT, None, "XML text", "NUL byte in input")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line = exc.position[0] if exc.position else None
        raise ParseError(FMT, line, "well-formed XML", str(exc)) from None
    except ValueError as exc:  # e.g. an encoding declaration the str input cannot honour
        raise ParseError(FMT, None, "well-formed XML", str(exc)) from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(FMT, None, "root element <nvidia_smi_log>", f"<{root.tag}>")
    return root


def parse_smi_xml(text: str) -> SmiReport:
    """Parse ``nvidia-smi -q -x`` output.

    Returns an :class:`SmiReport` with one :class:`SmiGpu` per ``<gpu>``. Raises :class:`ParseError` for
    malformed or truncated XML, a DTD with entities, a root other than ``<nvidia_smi_log>``, an
    ``attached_gpus`` count that disagrees with the ``<gpu>`` elements, or a value that is neither a number
    with the expected unit nor a "not available" marker.
    """
    root = _root(text)
    gpus = [_gpu(i, g) for i, g in enumerate(root.findall("gpu"))]
    attached = V.integer(FMT, _t(root, "attached_gpus"))
    if attached is not None and attached != len(gpus):
        raise ParseError(FMT, None, f"{attached} <gpu> elements (attached_gpus)", f"{len(gpus)}")
    return SmiReport(
        driver_version=V.text(_t(root, "driver_version")),
        cuda_version=V.text(_t(root, "cuda_version")),
        timestamp=V.text(_t(root, "timestamp")),
        attached_gpus=attached,
        gpus=gpus,
    )
