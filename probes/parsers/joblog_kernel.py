"""Parser for a node's kernel log (``dmesg``, ``dmesg -T``, ``journalctl -k``, syslog) as postmortem events:
the same :class:`~fleetdx.probes.parsers.joblog.JobEvent` the job-log parser gives, so both go on one
timeline.

Read, line by line in bounded memory:

* XIDs and the driver's lines that lose a GPU without one (fallen off the bus, ``RmInitAdapter failed``):
  through :func:`fleetdx.probes.parsers.xid.parse_xid`, fed the ``NVRM:`` lines in runs of at most
  :data:`XID_CHUNK` (a wrapped ``fallen off the bus`` message is contiguous ``NVRM:`` lines);
* mlx5/InfiniBand links: ``mlx5_core 0000:5e:00.0 ibp94s0: Link down`` / ``Link up`` (the netdev's carrier,
  drivers/net/ethernet/mellanox/mlx5/core/en_main.c ``mlx5e_update_carrier``; any ``ib*``/``mlx5*`` netdev),
  port state changes (``port 1 state changed to DOWN``, ``mlx5_port_module_event: Port module event:
  module 0, Cable unplugged``);
* PCIe AER (drivers/pci/pcie/aer.c): ``AER: Corrected error received``, ``AER: Uncorrected (Fatal) error
  received``, ``PCIe Bus Error: severity=..., type=...`` and the error bits that follow (``[ 5] Surprise Down
  Error``);
* the host OOM killer: ``Out of memory: Killed process 1234 (python)``, ``oom-kill:``, ``Memory cgroup out of
  memory``;
* the message catalog's ``linux`` rows that its scan reads (``probes/parsers/messages.yaml``: mlx5's ``device's
  health compromised``, a firmware command's ``timeout. Will cause a leak of a command resource``), with the
  row's ``catalog`` id, ``failure_class`` and ``role`` and the adapter's PCI address as ``pci``.

Times: ``dmesg``'s ``[  74785.660366]`` is seconds since boot (``details["uptime_s"]``, no ``ts``); ``dmesg
-T``, ``journalctl -k`` / syslog (``Nov 22 10:58:12 host kernel:``, the host read from it) and ISO stamps give
``ts`` (syslog's yearless stamp takes ``year``).

Errors: :class:`~fleetdx.probes.errors.ParseError` for binary input or a malformed ``NVRM: Xid`` line (format
``"xid"``, from the XID parser).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fleetdx.probes.contracts import JsonScalar
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.joblog import (
    EVENT_BUDGET,
    MAX_EVENTS,
    MAX_EVENTS_PER_KEY,
    MAX_TEXT,
    EventKind,
    JobEvent,
    JobLog,
)
from fleetdx.probes.parsers.literals import Literals
from fleetdx.probes.parsers.logline import MAX_LINE, LogLine, normalise_line, stamp_ts
from fleetdx.probes.parsers.msgcatalog import Catalog, catalog
from fleetdx.probes.parsers.xid import parse_xid

FMT = "kernel-log"
#: NVRM lines handed to the XID parser at once
XID_CHUNK = 64

_LINK_RE = re.compile(
    r"(?:(?P<drv>mlx5_core|mlx5_ib|mlx4_core|ib_core|bnxt_en|ice|irdma)\s+(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:"
    r"[0-9a-fA-F]{2}\.\d)\s+)?(?P<dev>(?:ib|mlx|en|eth|bond|hsn)[\w.\-]*):\s+(?:NIC\s+)?[Ll]ink (?:is )?"
    r"(?P<state>[Dd]own|[Uu]p)\b"
)
#: the RDMA device a port line names (``mlx5_0``, ``ibp94s0``)
_IBDEV_RE = re.compile(r"\b(mlx[45]_(?:bond_)?\d+|ib[a-z]*\d\w*)")
_PORT_RE = re.compile(
    r"\b[Pp]ort:? ?(?P<port>\d+)\b.*?state (?:changed |change )?"
    r"(?:to |from \w+ to )?(?P<state>DOWN|ACTIVE|INIT|ARMED|ACTIVE_DEFER|POLLING|DISABLED)"
    r"|Port module event(?:\[error\])?: module (?P<module>\d+), (?P<event>.+)$"
)
_AER_RE = re.compile(
    r"(?P<dev>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d).*?(?:"
    r"AER: (?P<recv>(?:Multiple )?(?:Corrected|Uncorrected \((?:Fatal|Non-Fatal)\)|Uncorrectable)) error"
    r"|PCIe Bus Error: severity=(?P<sev>[^,]+), type=(?P<type>[^,]+)"
    r"|^\s*\[\s*(?P<bit>\d+)\]\s+(?P<name>[A-Za-z].*?)\s*(?P<first>\(First\))?$)"
)
_AER_BIT_RE = re.compile(r":\s+\[\s*(?P<bit>\d+)\]\s+(?P<name>[A-Za-z][^(]*?)\s*(?P<first>\(First\))?\s*$")
_OOM_RE = re.compile(
    r"Out of memory: Kill(?:ed)? process (?P<pid>\d+) \((?P<name>[^)]*)\)|Memory cgroup out of memory"
    r"|oom-kill:.*?task=(?P<task>[^,]+)"
)
#: substrings a line must hold to be read further (an AER error-bit line is read only after its AER line)
#: (each a substring its patterns require: ``[Ll]ink (is )?(down|up)`` of _LINK_RE, ``state `` or ``module event``
#: of _PORT_RE; narrower than "Link"/"ort ", which a job log's "report", "abort" and "import" lines all held)
_TRIGGER_KEYS = (
    "NVRM",
    "ink is ",
    "ink down",
    "ink Down",
    "ink up",
    "ink Up",
    "state ",
    "module event",
    "AER",
    "PCIe Bus Error",
    "ut of memory",
    "oom-kill",
)
#: the message catalog's kernel rows that its scan reads (``linux`` rows of the ``catalog`` extractor: mlx5's health
#: and firmware-command timeouts): a kernel log gives their events too, the PCI address as ``pci`` and ``bus_id``
_KERNEL_ROWS = Catalog([r for r in catalog().rows if r.extractor == "catalog" and r.source.project == "linux"])
#: the keys and those rows' literals as one Aho-Corasick automaton: one pass over a line (a job log's lines all meet
#: it, most miss it)
_TRIGGER_GATE = Literals((*_TRIGGER_KEYS, *_KERNEL_ROWS.literals))


def _event(kind: EventKind, file: str, n: int, raw: str, ll: LogLine, year: int | None, **det: JsonScalar) -> JobEvent:
    details: dict[str, JsonScalar] = {k: v for k, v in det.items() if v is not None}
    details["kernel_log"] = True  # read from a kernel log: the job's window and node list apply
    if ll.uptime_s is not None:
        details["uptime_s"] = ll.uptime_s
    return JobEvent(
        kind=kind,
        host=ll.host,
        time=ll.time,
        ts=stamp_ts(ll.time, year) if ll.time else None,
        file=file,
        line=n,
        text=raw.strip()[:MAX_TEXT],
        details=details,
    )


class KernelLogScanner:
    """Streams a kernel log: :meth:`feed` one line at a time, then :meth:`result`. ``host`` names the node
    when the lines do not (``dmesg`` output of one node)."""

    def __init__(self, file: str, host: str | None = None, year: int | None = None) -> None:
        self.file = file
        self.host = host
        self.year = year
        self.lines = 0
        self.events: list[JobEvent] = []
        self.dropped = 0
        self._per_key: dict[tuple[EventKind, str | None, str], int] = {}
        self._nvrm: list[tuple[int, str, LogLine]] = []
        self._aer_dev: str | None = None

    def _keep(self, ev: JobEvent, subject: str = "") -> None:
        if ev.host is None and self.host is not None:
            ev = ev.model_copy(update={"host": self.host})
        key = (ev.kind, ev.host, subject)
        n = self._per_key.get(key, 0)
        kept = len(self.events)
        # the job-log parser's bounds: past EVENT_BUDGET the first of each key only, never more than MAX_EVENTS
        if kept >= MAX_EVENTS or n >= (MAX_EVENTS_PER_KEY if kept < EVENT_BUDGET else 1):
            self.dropped += 1
            return
        self._per_key[key] = n + 1
        self.events.append(ev)

    def feed(self, raw: str) -> None:
        """Read one line.

        Raises:
            ParseError: binary input, or a malformed ``NVRM: Xid`` line.
        """
        self.lines += 1
        n = self.lines
        if "\x00" in raw:
            raise ParseError(FMT, n, "kernel log text", "binary data (NUL byte) in input")
        if not _TRIGGER_GATE.any_in(raw) and not (self._aer_dev is not None and self._aer_dev in raw):
            if self._nvrm:
                self._flush_nvrm()
            return
        raw = raw[:MAX_LINE].rstrip("\r\n")
        ll = normalise_line(raw)[0] if raw.strip() else LogLine(body="")
        if "NVRM" in raw:
            self._nvrm.append((n, raw, ll))
            if len(self._nvrm) >= XID_CHUNK:
                self._flush_nvrm()
            return
        if self._nvrm:
            self._flush_nvrm()
        body = ll.body
        m = _LINK_RE.search(body)
        if m is not None:
            kind = EventKind.IB_LINK_DOWN if m.group("state").lower() == "down" else EventKind.IB_LINK_UP
            self._keep(
                _event(kind, self.file, n, raw, ll, self.year, device=m.group("dev"), pci=m.group("pci")),
                m.group("dev"),
            )
            return
        m = _PORT_RE.search(body)
        if m is not None and (m.group("module") is not None or "mlx" in body or "ib" in body.lower()):
            self._keep(
                _event(
                    EventKind.IB_PORT_STATE,
                    self.file,
                    n,
                    raw,
                    ll,
                    self.year,
                    device=dev.group(1) if (dev := _IBDEV_RE.search(body)) else None,
                    port=m.group("port"),
                    state=m.group("state"),
                    module=m.group("module"),
                    event=m.group("event"),
                ),
                str(m.group("port") or m.group("module")),
            )
            return
        m = _AER_RE.search(body)
        if m is not None and (m.group("recv") or m.group("sev")):
            self._aer_dev = m.group("dev")
            self._keep(
                _event(
                    EventKind.AER,
                    self.file,
                    n,
                    raw,
                    ll,
                    self.year,
                    pci=m.group("dev"),
                    received=m.group("recv"),
                    severity=m.group("sev"),
                    type=m.group("type"),
                ),
                m.group("dev"),
            )
            return
        b = _AER_BIT_RE.search(body)
        if b is not None and self._aer_dev is not None and self._aer_dev in body:
            self._keep(
                _event(
                    EventKind.AER,
                    self.file,
                    n,
                    raw,
                    ll,
                    self.year,
                    pci=self._aer_dev,
                    bit=int(b.group("bit")),
                    error=b.group("name"),
                    first=bool(b.group("first")),
                ),
                self._aer_dev,
            )
            return
        for cm in _KERNEL_ROWS.scan(body):
            det = dict(cm.details)
            pci = det.get("bus_id")
            det.update({"pci": pci, "catalog": cm.row.id, "failure_class": cm.row.failure_class, "role": cm.row.role})
            self._keep(_event(EventKind(cm.row.kind), self.file, n, raw, ll, self.year, **det), str(pci))
            return
        m = _OOM_RE.search(body)
        if m is not None:
            pid = m.group("pid")
            self._keep(
                _event(
                    EventKind.OOM_HOST,
                    self.file,
                    n,
                    raw,
                    ll,
                    self.year,
                    pid=int(pid) if pid else None,
                    process=m.group("name") or m.group("task"),
                )
            )

    def _flush_nvrm(self) -> None:
        chunk, self._nvrm = self._nvrm, []
        xlog = parse_xid("\n".join(raw for _, raw, _ in chunk))
        for x in xlog.events:
            n, raw, ll = chunk[x.line - 1]
            self._keep(
                _event(
                    EventKind.XID,
                    self.file,
                    n,
                    raw,
                    ll,
                    self.year,
                    xid=x.code,
                    pci=x.pci,
                    pid=x.pid,
                    process=x.process_name,
                    message=x.message[:300],
                ),
                f"{x.code}/{x.pci}",
            )
        for d in xlog.driver_events:
            n, raw, ll = chunk[d.line - 1]
            text = "\n".join(r for _, r, _ in chunk[d.line - 1 : d.line - 1 + d.raw.count("\n") + 1])
            ev = _event(EventKind.GPU_LOST, self.file, n, raw, ll, self.year, event=d.kind.value, pci=d.pci)
            self._keep(ev.model_copy(update={"text": text[: MAX_TEXT * 2]}), str(d.pci))

    def flush(self) -> None:
        """Judge the ``NVRM:`` lines held back (an XID message may continue on the next line) as if the log ended
        here: a live reader (``fleetdx watch``) calls it when a log has paused."""
        if self._nvrm:
            self._flush_nvrm()

    def result(self) -> JobLog:
        self.flush()
        hosts = list(dict.fromkeys(e.host for e in self.events if e.host is not None))
        return JobLog(
            file=self.file, events=self.events, lines_read=self.lines, events_dropped=self.dropped, hosts=hosts
        )


def parse_kernel_log(
    lines: Iterable[str] | str, file: str = "<kernel>", host: str | None = None, year: int | None = None
) -> JobLog:
    """The postmortem events of a kernel log given as text or an iterable of lines (a file object streams).

    Raises:
        ParseError: binary input, or a malformed ``NVRM: Xid`` line.
    """
    scanner = KernelLogScanner(file, host, year)
    for raw in lines.splitlines() if isinstance(lines, str) else lines:
        scanner.feed(raw)
    return scanner.result()
