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
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import accumulate
from typing import NamedTuple

from fleetdx.probes.contracts import JsonScalar
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.joblog import (
    MAX_TEXT,
    SHELL_PROMPT,
    EventKind,
    JobEvent,
    JobLog,
    over_cap,
)
from fleetdx.probes.parsers.literals import Literals
from fleetdx.probes.parsers.logline import MAX_LINE, MEMO_MAX_CHARS, LogLine, host_of, normalise_line, stamp_ts
from fleetdx.probes.parsers.msgcatalog import Catalog, catalog
from fleetdx.probes.parsers.xid import parse_xid, xid_line_keys

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
#: a shell prompt before a command that prints a kernel log (``root@node1:~# dmesg -T``, ``[user@gpu-01 ~]$ sudo
#: journalctl -k``): the log that follows is that host's, until another prompt
_PROMPT_RE = re.compile(SHELL_PROMPT + r"(?:dmesg|journalctl|cat /var/log/|grep |less |tail |zcat )")
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
    # a shell prompt pasted before the output of the command that printed the kernel log (_PROMPT_RE)
    "dmesg",
    "journalctl",
    "/var/log/",
)
#: the message catalog's kernel rows that its scan reads (``linux`` rows of the ``catalog`` extractor: mlx5's health
#: and firmware-command timeouts): a kernel log gives their events too, the PCI address as ``pci`` and ``bus_id``
_KERNEL_ROWS = Catalog([r for r in catalog().rows if r.extractor == "catalog" and r.source.project == "linux"])
#: the keys and those rows' literals as one Aho-Corasick automaton: one pass over a line, or over a block of lines
#: (:meth:`KernelLogScanner.feed_lines`: a job log's lines all meet it, most miss it)
_TRIGGER_GATE = Literals((*_TRIGGER_KEYS, *_KERNEL_ROWS.literals))


_Said1 = tuple[EventKind, str, dict[str, JsonScalar]]  # kind, subject (what the caps count by), details


class _Said(NamedTuple):
    """What one kernel-log body says (:func:`_said`), in the order it is judged: the first of an IB link, an IB
    port state or an AER line; else an AER error bit (of the device of the AER line before it, if the body names
    it); else a catalog row or the OOM killer."""

    first: _Said1 | None
    bit: dict[str, JsonScalar] | None
    later: _Said1 | None


def _read_said(body: str) -> _Said:
    # each pattern runs only on a body holding a fixed substring it needs (``in`` costs a tenth of a search)
    m = _LINK_RE.search(body) if "ink " in body else None
    if m is not None:
        kind = EventKind.IB_LINK_DOWN if m.group("state").lower() == "down" else EventKind.IB_LINK_UP
        return _Said((kind, m.group("dev"), {"device": m.group("dev"), "pci": m.group("pci")}), None, None)
    m = _PORT_RE.search(body) if "ort" in body else None
    if m is not None and (m.group("module") is not None or "mlx" in body or "ib" in body.lower()):
        det: dict[str, JsonScalar] = {
            "device": dev.group(1) if (dev := _IBDEV_RE.search(body)) else None,
            "port": m.group("port"),
            "state": m.group("state"),
            "module": m.group("module"),
            "event": m.group("event"),
        }
        return _Said((EventKind.IB_PORT_STATE, str(m.group("port") or m.group("module")), det), None, None)
    m = _AER_RE.search(body) if ("AER: " in body or "PCIe Bus Error" in body or "[" in body) else None
    if m is not None and (m.group("recv") or m.group("sev")):
        det = {"pci": m.group("dev"), "received": m.group("recv"), "severity": m.group("sev"), "type": m.group("type")}
        return _Said((EventKind.AER, m.group("dev"), det), None, None)
    b = _AER_BIT_RE.search(body) if "[" in body else None
    bit: dict[str, JsonScalar] | None = None
    if b is not None:
        bit = {"bit": int(b.group("bit")), "error": b.group("name"), "first": bool(b.group("first"))}
    for cm in _KERNEL_ROWS.scan(body):
        det = dict(cm.details)
        pci = det.get("bus_id")
        det.update({"pci": pci, "catalog": cm.row.id, "failure_class": cm.row.failure_class, "role": cm.row.role})
        return _Said(None, bit, (EventKind(cm.row.kind), str(pci), det))
    m = _OOM_RE.search(body) if ("of memory" in body or "oom-kill:" in body) else None
    if m is not None:
        pid = m.group("pid")
        det = {"pid": int(pid) if pid else None, "process": m.group("name") or m.group("task")}
        return _Said(None, bit, (EventKind.OOM_HOST, "", det))
    return _Said(None, bit, None)


@lru_cache(maxsize=4_096)
def _said(body: str) -> _Said:
    """:func:`_read_said`, memoised (the same words on many ranks or GPUs; callers never change what it gives:
    :meth:`KernelLogScanner._add` copies the details)."""
    return _read_said(body)


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
        #: the host of the last shell prompt before a kernel-log command (_PROMPT_RE)
        self._prompt_host: str | None = None

    def _host_of(self, ll: LogLine) -> str | None:
        """The host of a line: its own (a syslog or journal prefix), else the scanner's, else the last prompt's."""
        if ll.host is not None:
            return ll.host
        return self.host if self.host is not None else self._prompt_host

    def _full(self, key: tuple[EventKind, str | None, str]) -> bool:
        """Whether an event of ``key`` (kind, host, subject) is over the job-log parser's caps (:func:`over_cap`)."""
        return over_cap(self._per_key, key, len(self.events))

    def _add(
        self,
        kind: EventKind,
        at: tuple[int, str, LogLine],
        subject: str,
        det: dict[str, JsonScalar],
        text: str | None = None,
    ) -> None:
        """Keep the event of ``kind`` that line ``at`` (number, text, normalised) tells, with the details ``det``
        (``None`` values left out) and ``text`` (default: the line's, stripped, up to MAX_TEXT), unless its (kind,
        host, subject) is over the job-log parser's caps: past EVENT_BUDGET the first of each key only, never more
        than MAX_EVENTS (counted as dropped, before the event is built)."""
        n, raw, ll = at
        host = self._host_of(ll)
        key = (kind, host, subject)
        if self._full(key):
            self.dropped += 1
            return
        self._per_key[key] = self._per_key.get(key, 0) + 1
        details: dict[str, JsonScalar] = {k: v for k, v in det.items() if v is not None}
        details["kernel_log"] = True  # read from a kernel log: the job's window and node list apply
        if ll.uptime_s is not None:
            details["uptime_s"] = ll.uptime_s
        self.events.append(
            JobEvent(
                kind=kind,
                host=host,
                time=ll.time,
                ts=stamp_ts(ll.time, self.year) if ll.time else None,
                file=self.file,
                line=n,
                text=text if text is not None else raw.strip()[:MAX_TEXT],
                details=details,
            )
        )

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
        self._read(n, raw)

    def _read(self, n: int, raw: str) -> None:
        """Read line ``n``, one that holds a gate literal or the device of the last AER line."""
        raw = raw[:MAX_LINE].rstrip("\r\n")
        if "@" in raw[:100] and (p := _PROMPT_RE.match(raw)) is not None:
            if self._nvrm:
                self._flush_nvrm()
            host, _ = host_of(p.group("host"))
            self._prompt_host = host
            return
        ll = normalise_line(raw)[0] if raw.strip() else LogLine(body="")
        if "NVRM" in raw:
            self._nvrm.append((n, raw, ll))
            if len(self._nvrm) >= XID_CHUNK:
                self._flush_nvrm()
            return
        if self._nvrm:
            self._flush_nvrm()
        body = ll.body
        said = _said(body) if len(body) <= MEMO_MAX_CHARS else _read_said(body)
        if said.first is not None:
            kind, subject, det = said.first
            if kind is EventKind.AER:
                self._aer_dev = subject  # its error bits follow, naming the same device
            self._add(kind, (n, raw, ll), subject, det)
        elif said.bit is not None and self._aer_dev is not None and self._aer_dev in body:
            self._add(EventKind.AER, (n, raw, ll), self._aer_dev, {"pci": self._aer_dev, **said.bit})
        elif said.later is not None:
            kind, subject, det = said.later
            self._add(kind, (n, raw, ll), subject, det)

    def feed_lines(self, lines: Sequence[str], read: bytes | None = None) -> None:
        """Read a block of lines: the same as :meth:`feed` on each in turn, with the lines no kernel message can
        start on (most of a job log) found by one pass over the block (:meth:`Literals.lines_holding`) and
        counted, not read one by one. ``read``: the lines as a reader read them (lines without newlines, their
        bytes joined by ``b"\\n"``; :meth:`Literals.lines_holding` says what it saves).

        Raises:
            ParseError: as :meth:`feed` (``lines`` is the number of lines read up to the bad one).
        """
        if b"\x00" in read if read is not None else "\x00" in "".join(lines):  # fed one by one: names its line
            for raw in lines:
                self.feed(raw)
            return
        hits = _TRIGGER_GATE.lines_holding(lines, read)
        where: list[tuple[str, list[int]]] = []  # the block's text and its lines' starts, once an AER line needs it
        h, i, end = 0, 0, len(lines)
        while i < end:
            while h < len(hits) and hits[h] < i:
                h += 1
            nxt = hits[h] if h < len(hits) else end
            if self._nvrm and self._aer_dev is None and nxt != i:
                self.lines += 1  # line i holds no gate literal: it ends their message (as :meth:`feed` reads it)
                self._flush_nvrm()
                i += 1
                continue
            if self._nvrm:  # held NVRM lines: the next line says whether their message goes on
                nxt = i
            elif self._aer_dev is not None:  # an AER error-bit line names the device of the AER line before it
                nxt = self._aer_line(self._aer_dev, lines, i, nxt, where)
            self.lines += nxt - i
            if h < len(hits) and nxt == hits[h]:  # it holds a gate literal: read it
                self.lines += 1
                self._read(self.lines, lines[nxt])
            elif nxt < end:
                self.feed(lines[nxt])
            i = nxt + 1

    @staticmethod
    def _aer_line(dev: str, lines: Sequence[str], i: int, nxt: int, where: list[tuple[str, list[int]]]) -> int:
        """The first of ``lines[i:nxt]`` that holds ``dev``, else ``nxt`` (``where``: the block's text and where
        each line starts in it, made on the first call)."""
        if not where:
            where.append(("".join(lines), list(accumulate(map(len, lines), initial=0))))
        text, starts = where[0]
        at = text.find(dev, starts[i], starts[nxt])
        return nxt if at < 0 else bisect_right(starts, at) - 1

    def _flush_nvrm(self) -> None:
        """Judge the held ``NVRM:`` lines: their XID lines one by one, an XID line over its cap counted as dropped
        without its parse (:func:`xid_line_keys`), then the driver messages of the lines between them, in the
        order a parse of the whole would give (its XID events, then its driver events)."""
        chunk, self._nvrm = self._nvrm, []
        keys = xid_line_keys([raw for _, raw, _ in chunk])
        if keys is None:
            self._judge_nvrm(chunk)
            return
        runs, start = [], 0
        for i, key in enumerate(keys):
            if key is None:
                continue
            runs.append(chunk[start:i])
            start = i + 1
            ll = chunk[i][2]
            if self._full((EventKind.XID, self._host_of(ll), f"{key[0]}/{key[1]}")):
                self.dropped += 1
            else:
                self._judge_nvrm(chunk[i : i + 1])
        runs.append(chunk[start:])
        for run in runs:
            if run:
                self._judge_nvrm(run)

    def _judge_nvrm(self, chunk: list[tuple[int, str, LogLine]]) -> None:
        """Add the XID and driver events :func:`parse_xid` reads in ``chunk`` (NVRM lines read as one text)."""
        xlog = parse_xid("\n".join(raw for _, raw, _ in chunk))
        for x in xlog.events:
            self._add(
                EventKind.XID,
                chunk[x.line - 1],
                f"{x.code}/{x.pci}",
                {"xid": x.code, "pci": x.pci, "pid": x.pid, "process": x.process_name, "message": x.message[:300]},
            )
        for d in xlog.driver_events:
            text = "\n".join(r for _, r, _ in chunk[d.line - 1 : d.line - 1 + d.raw.count("\n") + 1])
            self._add(
                EventKind.GPU_LOST,
                chunk[d.line - 1],
                str(d.pci),
                {"event": d.kind.value, "pci": d.pci},
                text=text[: MAX_TEXT * 2],
            )

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
