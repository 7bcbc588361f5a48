"""Parser for NVIDIA XID events in a kernel log (``dmesg``, ``dmesg -T``, ``journalctl -k``, syslog), and for the
driver's lines that lose or fail a GPU without an XID.

The driver prints one line per XID event (NVIDIA "Xid Errors", docs.nvidia.com/deploy/xid-errors)::

    [ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
    [Sun Nov 22 10:58:12 2026] NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics ...
    Nov 22 10:58:12 node01 kernel: NVRM: Xid (PCI:0000:86:00): 31, pid=3208, Ch 00000008, intr 10000000 ...

The regex follows Meta GCM's ``NVRM: Xid \\(([^)]+)\\): (\\d+)``. A line that names ``NVRM: Xid`` but cannot be
read raises :class:`~fleetdx.probes.errors.ParseError`, as does binary input: an unreadable log never reads as
"no XIDs".

Some of the worst failures print no XID at all (NVIDIA's XID documentation lists XID 79 for a GPU that fell off
the bus, but the driver also reports a lost or unusable GPU in plain ``NVRM:`` lines; NVIDIA NVSentinel issue
#155 shows one with no XID beside it). These are :class:`DriverEvent` s:

* ``FALLEN_OFF_BUS``: ``NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this system has fallen
  off the bus and is not responding to commands.``, which dmesg often wraps over three ``NVRM:`` lines (the
  later ones with no timestamp; in the journal each with its own prefix), ``NVRM: GPU 0000:b3:00.0: GPU has
  fallen off the bus.`` (open kernel module) and ``NVRM: GPU at 0000:b3:00.0 has fallen off the bus.`` (older);
  the resource manager's status for it, ``NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus
  [NV_ERR_GPU_IS_LOST]`` (no device named), when the driver's calls to the GPU start failing.
* ``INIT_FAILED``: ``NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x22:0x56:894)`` and its companion
  ``rm_init_adapter failed, device minor number 0`` (older drivers: the same words with no device).
* ``PROBE_FAILED``: ``NVRM: The NVIDIA probe routine failed for 1 device(s).``, ``... was not called for ...``,
  ``NVRM: None of the NVIDIA devices were initialized.`` (no device named).
* ``GSP_TIMEOUT``: ``NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, ...`` and the
  ``_kgspLogRpcTimeout: *** GSP Timeout ***`` banner (open-gpu-kernel-modules ``kernel_gsp.c``): the GPU System
  Processor stopped answering, the fault of XID 119 (GSP RPC timeout), which the open kernel module may print
  without the XID (the device is the driver's ``GPUn``, no PCI address).

Other NVRM lines (driver banner, crash-dump notices, detail lines such as ``RmInitAdapter: osInitNvMapping
failed, bailing out``) and non-NVRM lines (AER) are neither. ``NVRM: GPU at PCI:0000:3b:00: GPU-<uuid>`` (the
identity the driver prints for a GPU, read the same way by NVIDIA NVSentinel's syslog-health-monitor,
``reNvrmMap``) fills :attr:`XidLog.uuids`.

A clean GPU reset closes an XID episode (the XIDs before it are history, not the GPU's state). The driver prints
no line of its own for a reset; two public ones are read as :class:`GpuReset` s, wherever the log holds them
(the journal, syslog, a log an operator gives; ``dmesg`` and ``journalctl -k`` hold neither):

* ``nvidia-smi -r`` (``--gpu-reset``): ``GPU 00000000:1A:00.0 was successfully reset.`` (its output quoted in
  NVIDIA NVSentinel issue #1690 and pull request #1692); a refused reset prints ``could not be reset`` and is
  not read.
* NVIDIA NVSentinel's ``gpu_reset.sh``: ``logger -t nvsentinel-gpu-reset "GPU reset executed: GPU-<uuid>,
  success: true"`` (older versions: without ``success``); ``success: false`` is not a reset. The UUID is
  matched to a PCI address through the log's ``NVRM: GPU at PCI:...: GPU-<uuid>`` lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.smi_values import bus_key

FMT = "xid"
_XID_MARK = "NVRM: Xid"
_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)(?:,\s*(.*))?$")
_UPTIME_RE = re.compile(r"^\s*\[\s*(\d+\.\d+)\]")
_PREFIX_TIME_RE = re.compile(r"^\s*\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]")
_SYSLOG_TIME_RE = re.compile(r"^([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.+\-]+)\s")
_PID_RE = re.compile(r"\bpid=(?:'?<unknown>'?|(\d+))")
_NAME_RE = re.compile(r"\bname=([^,]*)")

_NVRM = "NVRM:"
#: a PCI address as the driver prints it outside XID lines: "0000:b3:00.0", "PCI:0000:b3:00"
_PCI_RE = re.compile(
    r"(?<![0-9A-Fa-f:])(?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)(?![0-9A-Fa-f])"
)
_PCI_ID_RE = re.compile(r"PCI ID: ([0-9A-Fa-f]{4}:[0-9A-Fa-f]{4})")
#: the start of the message dmesg wraps over several lines ("The NVIDIA GPU 0000:b3:00.0" / "(PCI ID: ...)
#: installed in this system has" / "fallen off the bus and is not responding to commands.")
_WRAPPED_START_RE = re.compile(r"^The NVIDIA GPU \S+")
_MAX_CONTINUATION = 3
#: how a message of its own begins (a line that begins otherwise may continue a wrapped message)
_MESSAGE_START_RE = re.compile(r"^(?:The NVIDIA|GPU\b|RmInitAdapter|rm_init_adapter|None of the NVIDIA|loading NVIDIA)")
_END_RE = re.compile(r"[.!]\s*$")
#: ``NVRM: GPU at PCI:0000:3b:00: GPU-<uuid>`` (NVSentinel syslog-health-monitor ``reNvrmMap``)
_UUID_RE = re.compile(r"NVRM: GPU at PCI:([0-9A-Fa-f:.]+): (GPU-[0-9A-Fa-f-]+)")
#: ``nvidia-smi -r``: ``GPU 00000000:1A:00.0 was successfully reset.``
_SMI_RESET_RE = re.compile(r"\bGPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]) was successfully reset\b")
#: NVSentinel ``gpu_reset.sh``: ``GPU reset executed: GPU-<uuid>, success: true``
_NVS_RESET_RE = re.compile(r"GPU reset executed: (GPU-[0-9A-Fa-f-]+)(?:, success: (\w+))?")
#: cheap pre-checks of a line before the reset regexes
RESET_MARKS = ("successfully reset", "GPU reset executed")


class DriverEventKind(str, Enum):
    """What an NVRM line without an XID says happened to a GPU (see the module doc)."""

    FALLEN_OFF_BUS = "fallen-off-bus"  #: the GPU stopped answering on PCIe
    INIT_FAILED = "init-failed"  #: the driver could not initialise the GPU (RmInitAdapter)
    PROBE_FAILED = "probe-failed"  #: the driver's probe rejected a device or initialised none
    #: the GPU System Processor stopped answering: XID 119's fault (GSP RPC timeout) printed without an XID
    GSP_TIMEOUT = "gsp-timeout"


_DRIVER_RES: list[tuple[DriverEventKind, re.Pattern[str]]] = [
    (DriverEventKind.FALLEN_OFF_BUS, re.compile(r"fallen off the bus|GPU lost from the bus|NV_ERR_GPU_IS_LOST", re.I)),
    (DriverEventKind.INIT_FAILED, re.compile(r"\bRmInitAdapter failed\b|\brm_init_adapter failed\b")),
    (
        DriverEventKind.PROBE_FAILED,
        re.compile(r"probe routine (?:failed|was not called)|None of the NVIDIA devices (?:were|was) initiali[sz]ed"),
    ),
    (DriverEventKind.GSP_TIMEOUT, re.compile(r"_kgspIsHeartbeatTimedOut: Heartbeat timed out|\bGSP Timeout\b")),
]


class XidEvent(Contract):
    """One ``NVRM: Xid`` line."""

    line: int  #: 1-based line number in the log
    code: int  #: the XID number
    pci: str  #: the device as printed, e.g. "0000:3b:00"
    pci_key: tuple[int, int, int] | None = None  #: (domain, bus, device), comparable with nvidia-smi bus ids
    uptime_s: float | None = None  #: dmesg seconds since boot, when printed
    time: str | None = None  #: wall-clock timestamp as printed (``dmesg -T``, journal, syslog)
    pid: int | None = None
    process_name: str | None = None
    message: str  #: the text after the code, e.g. "pid=..., name=..., GPU has fallen off the bus."


class DriverEvent(Contract):
    """One NVRM message, possibly wrapped over several lines, that reports a lost or failed GPU without an XID."""

    line: int  #: 1-based line number of the message's first line
    kind: DriverEventKind
    pci: str | None = None  #: the device as printed, e.g. "0000:b3:00.0"; None when the line names none
    pci_key: tuple[int, int, int] | None = None  #: (domain, bus, device), comparable with nvidia-smi bus ids
    pci_id: str | None = None  #: vendor:device, e.g. "10de:20b0", when printed
    uptime_s: float | None = None
    time: str | None = None
    message: str  #: the NVRM text, wrapped lines joined with a space
    raw: str  #: the log line(s) as read, joined with newlines


class GpuReset(Contract):
    """One successful GPU reset read from a log (see the module doc): the XIDs of that GPU before it are
    history."""

    line: int  #: 1-based line number
    pci: str | None = None  #: as printed (nvidia-smi), or from the log's UUID line; None when unknown
    pci_key: tuple[int, int, int] | None = None
    uuid: str | None = None  #: the GPU UUID the line names (NVSentinel's marker)
    tool: str  #: "nvidia-smi" or "nvsentinel"
    uptime_s: float | None = None
    time: str | None = None
    raw: str


class XidLog(Contract):
    """The XID events of one kernel log, in log order, the driver events without an XID, the successful GPU
    resets, the GPU UUIDs the driver named (UUID -> PCI address as printed), and how many lines were read."""

    events: list[XidEvent] = Field(default_factory=list)
    driver_events: list[DriverEvent] = Field(default_factory=list)
    resets: list[GpuReset] = Field(default_factory=list)
    uuids: dict[str, str] = Field(default_factory=dict)
    lines_read: int = 0

    def codes(self) -> list[int]:
        return [e.code for e in self.events]


def _event(lineno: int, line: str) -> XidEvent:
    m = _XID_RE.search(line)
    if m is None:
        raise ParseError(FMT, lineno, "NVRM: Xid (PCI:dddd:bb:dd): <code>, ...", line)
    rest = (m.group(3) or "").strip()
    pid_m, name_m = _PID_RE.search(rest), _NAME_RE.search(rest)
    name = name_m.group(1).strip() if name_m else None
    uptime_m, t_m, s_m = _UPTIME_RE.match(line), _PREFIX_TIME_RE.match(line), _SYSLOG_TIME_RE.match(line)
    return XidEvent(
        line=lineno,
        code=int(m.group(2)),
        pci=m.group(1),
        pci_key=bus_key(m.group(1)),
        uptime_s=float(uptime_m.group(1)) if uptime_m else None,
        time=t_m.group(1) if t_m else (s_m.group(1) if s_m else None),
        pid=int(pid_m.group(1)) if pid_m and pid_m.group(1) else None,
        process_name=None if name in (None, "", "<unknown>") else name,
        message=rest,
    )


def _nvrm_text(line: str) -> str:
    return line.split(_NVRM, 1)[1].strip()


def _driver_kind(message: str) -> DriverEventKind | None:
    for kind, pattern in _DRIVER_RES:
        if pattern.search(message):
            return kind
    return None


def _driver_event(kind: DriverEventKind, chunk: list[tuple[int, str]]) -> DriverEvent:
    first_no, first = chunk[0]
    message = " ".join(_nvrm_text(line) for _, line in chunk)
    pci_m, id_m = _PCI_RE.search(message), _PCI_ID_RE.search(message)
    pci = pci_m.group(1) if pci_m else None
    uptime_m, t_m, s_m = _UPTIME_RE.match(first), _PREFIX_TIME_RE.match(first), _SYSLOG_TIME_RE.match(first)
    return DriverEvent(
        line=first_no,
        kind=kind,
        pci=pci,
        pci_key=bus_key(pci) if pci else None,
        pci_id=id_m.group(1) if id_m else None,
        uptime_s=float(uptime_m.group(1)) if uptime_m else None,
        time=t_m.group(1) if t_m else (s_m.group(1) if s_m else None),
        message=message,
        raw="\n".join(line for _, line in chunk),
    )


def _stamps(line: str) -> tuple[float | None, str | None]:
    uptime_m, t_m, s_m = _UPTIME_RE.match(line), _PREFIX_TIME_RE.match(line), _SYSLOG_TIME_RE.match(line)
    return (
        float(uptime_m.group(1)) if uptime_m else None,
        t_m.group(1) if t_m else (s_m.group(1) if s_m else None),
    )


def _reset(lineno: int, line: str) -> GpuReset | None:
    """The successful reset ``line`` reports, else ``None`` (a failed one, or no reset line)."""
    uptime, time = _stamps(line)
    m = _SMI_RESET_RE.search(line)
    if m is not None:
        pci = m.group(1)
        return GpuReset(
            line=lineno, pci=pci, pci_key=bus_key(pci), tool="nvidia-smi", uptime_s=uptime, time=time, raw=line
        )
    n = _NVS_RESET_RE.search(line)
    if n is not None and (n.group(2) is None or n.group(2).lower() == "true"):
        return GpuReset(line=lineno, uuid=n.group(1), tool="nvsentinel", uptime_s=uptime, time=time, raw=line)
    return None


def _with_uuid_pcis(resets: list[GpuReset], uuids: dict[str, str]) -> list[GpuReset]:
    out = []
    for r in resets:
        if r.pci is None and r.uuid is not None and r.uuid in uuids:
            pci = uuids[r.uuid]
            r = r.model_copy(update={"pci": pci, "pci_key": bus_key(pci)})
        out.append(r)
    return out


#: what :meth:`str.splitlines` ends a line on (:func:`parse_xid` reads a text's lines that way)
_LINE_BREAK_RE = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def xid_line_keys(lines: Sequence[str]) -> list[tuple[int, str] | None] | None:
    """How :func:`parse_xid` reads ``lines`` (a kernel log's ``NVRM:`` lines, joined by newlines) as to its XID
    lines: for each line, (XID code, device as printed) if it is one, else ``None``; ``None`` for the whole when
    it would read them otherwise (bad bytes, a line that :meth:`str.splitlines` cuts, a malformed XID line: it
    then raises, or numbers the lines differently). :func:`parse_xid` reads each XID line alone, and an XID line
    ends whatever message the lines before it began: so the lines between XID lines can be parsed apart, and a
    reader that caps events by code and device (:class:`fleetdx.probes.parsers.joblog_kernel.KernelLogScanner`)
    skips the parse of the XID lines it would drop."""
    keys: list[tuple[int, str] | None] = []
    for line in lines:
        if "\x00" in line or "\ufffd" in line or _LINE_BREAK_RE.search(line):
            return None
        if _XID_MARK not in line:
            keys.append(None)
            continue
        m = _XID_RE.search(line)
        if m is None:
            return None
        keys.append((int(m.group(2)), m.group(1)))
    return keys


def parse_xid(text: str) -> XidLog:
    """All XID events and driver events of a kernel log. Raises :class:`ParseError` for NUL/binary input or a
    malformed ``NVRM: Xid`` line.

    A line starting the driver's wrapped message (``NVRM: The NVIDIA GPU <pci>`` with no sentence end) takes up
    to three following ``NVRM:`` lines until one ends the sentence; an XID line, or a line that begins a message
    of its own, cuts it, and a cut message, or one that says nothing of the kinds above, is dropped (never half
    a message read as a fall).
    """
    if "\x00" in text or "\ufffd" in text:
        raise ParseError(FMT, None, "kernel log text", "binary data in input")
    events: list[XidEvent] = []
    driver: list[DriverEvent] = []
    lines = text.splitlines()
    pending: list[tuple[int, str]] = []
    resets: list[GpuReset] = []
    uuids: dict[str, str] = {}

    def flush() -> None:
        if pending:
            kind = _driver_kind(" ".join(_nvrm_text(line) for _, line in pending))
            if kind is not None:
                driver.append(_driver_event(kind, list(pending)))
            pending.clear()

    for n, line in enumerate(lines, start=1):
        if _XID_MARK in line:
            pending.clear()  # a wrapped message cut short by an XID line is not read as a whole one
            events.append(_event(n, line))
            continue
        if _NVRM not in line:
            if any(mark in line for mark in RESET_MARKS) and (r := _reset(n, line)) is not None:
                resets.append(r)
            continue
        if (u := _UUID_RE.search(line)) is not None:
            uuids[u.group(2)] = u.group(1)
        body = _nvrm_text(line)
        if pending:
            if not _MESSAGE_START_RE.match(body):
                pending.append((n, line))
                if _END_RE.search(body) or len(pending) > _MAX_CONTINUATION:
                    flush()
                continue
            pending.clear()  # the wrapped message never ended: this line begins another
        if _WRAPPED_START_RE.match(body) and not _END_RE.search(body):
            pending.append((n, line))
            continue
        kind = _driver_kind(body)
        if kind is not None:
            driver.append(_driver_event(kind, [(n, line)]))
    pending.clear()  # a wrapped message cut by the end of the log says nothing whole
    return XidLog(
        events=events,
        driver_events=driver,
        resets=_with_uuid_pcis(resets, uuids),
        uuids=uuids,
        lines_read=len(lines),
    )


class XidSighting(Contract):
    """One earlier run's GPU_XID finding about a host, as the store holds it."""

    code: int
    pci: str  #: the GPU's PCI address as the XID line printed it
    jobs: list[str] = Field(default_factory=list)  #: "pid:<n>" per process that raised it; "run:<id>" if none
    run_id: str
    at: float  #: the run's start, Unix seconds


class XidHistory(Contract):
    """The store's earlier GPU_XID findings about one host since ``since`` (Unix seconds): what a pre-flight
    with a store passes to the XID rule (``NodeFacts.xid_history``; built by
    :mod:`fleetdx.orchestrator.store.xid_history`, judged by the XID policy of
    :mod:`fleetdx.orchestrator.diagnosis.xid_table`) so that application XIDs are judged across jobs. ``None``
    in its place means no store: the single-run judgement."""

    host: str
    since: float
    runs: int = 0  #: earlier runs of the host in the window that were looked at
    sightings: list[XidSighting] = Field(default_factory=list)

    def jobs(self, pci_key: tuple[int, int, int] | None, codes: frozenset[int]) -> set[str]:
        """The job keys of earlier findings of ``codes`` on the GPU at ``pci_key``."""
        out: set[str] = set()
        for s in self.sightings:
            if s.code in codes and pci_key is not None and bus_key(s.pci) == pci_key:
                out.update(s.jobs or [f"run:{s.run_id}"])
        return out
