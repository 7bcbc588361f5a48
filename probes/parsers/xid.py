"""Parser for NVIDIA XID events in a kernel log (``dmesg``, ``dmesg -T``, ``journalctl -k``, syslog).

The driver prints one line per event (NVIDIA "Xid Errors", docs.nvidia.com/deploy/xid-errors)::

    [ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
    [Sun Nov 22 10:58:12 2026] NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics ...
    Nov 22 10:58:12 node01 kernel: NVRM: Xid (PCI:0000:86:00): 31, pid=3208, Ch 00000008, intr 10000000 ...

The regex follows Meta GCM's ``NVRM: Xid \\(([^)]+)\\): (\\d+)``; lines without ``NVRM: Xid`` (other NVRM or
AER
messages) are not events and are ignored. A line that names ``NVRM: Xid`` but cannot be read raises
:class:`~fleetdx.probes.errors.ParseError`, as does binary input: an unreadable log never reads as "no XIDs".
"""

from __future__ import annotations

import re

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


class XidLog(Contract):
    """The XID events of one kernel log, in log order, plus how many lines were read."""

    events: list[XidEvent] = Field(default_factory=list)
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


def parse_xid(text: str) -> XidLog:
    """All XID events of a kernel log. Raises :class:`ParseError` for NUL/binary input or a malformed
    ``NVRM: Xid`` line."""
    if "\x00" in text or "\ufffd" in text:
        raise ParseError(FMT, None, "kernel log text", "binary data in input")
    events = []
    lines = text.splitlines()
    for n, line in enumerate(lines, start=1):
        if _XID_MARK in line:
            events.append(_event(n, line))
    return XidLog(events=events, lines_read=len(lines))
