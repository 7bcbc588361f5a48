"""Parser for the records of ``/dev/kmsg``, the kernel's structured log (what the agent mode follows instead of
rereading ``dmesg``: :mod:`fleetdx.probes.kmsg`).

The format is the kernel's Documentation/ABI/testing/dev-kmsg: each ``read()`` returns one record::

    <prefix>;<message text>\\n
    [ KEY=value\\n ...]

where the prefix is ``<level>,<sequnum>,<timestamp>,<flag>[,additional values, ...]``: ``level`` the syslog
priority (facility << 3 | level, so ``6`` is kernel INFO and ``14`` user INFO), ``sequnum`` the record's 64-bit
sequence number (a gap means records were overwritten before they were read), ``timestamp`` microseconds since
boot (CLOCK_MONOTONIC), ``flag`` ``-`` (or ``c`` / ``+`` for continuation fragments on kernels before 4.9).
Kernels built with CONFIG_PRINTK_CALLER add fields after the flag (``6,225,93540,-,caller=T1;...``, as in the
capture of LKML message <20200813113155.GA483@jagdpanzerIV.localdomain>); future fields are allowed by the ABI
and ignored. Non-printable characters and a literal backslash of the message are escaped as ``\\xXX``. The
lines after the first that start with a space are the record's dictionary (``SUBSYSTEM=pci``,
``DEVICE=+pci:0000:00:1c.0``).

:func:`parse_kmsg` reads a stream of such records (one per line, dictionary lines after theirs) and
:func:`dmesg_line` renders one as ``dmesg`` prints it (``[  93.540000] PCI host bridge to bus 0000:00``), so that
the XID parser (:func:`fleetdx.probes.parsers.xid.parse_xid`) reads it with its uptime. A line that is neither a
record nor a dictionary line raises :class:`~fleetdx.probes.errors.ParseError`, as does binary input.
"""

from __future__ import annotations

import re

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError

FMT = "kmsg"
_PREFIX_RE = re.compile(r"^(\d+),(\d+),(\d+),([^,;]*)((?:,[^;]*)?);")
_ESCAPE_RE = re.compile(r"\\x([0-9a-fA-F]{2})")


class KmsgRecord(Contract):
    """One ``/dev/kmsg`` record."""

    facility: int  #: syslog facility (0: kernel)
    level: int  #: syslog level, 0 (emerg) to 7 (debug)
    seq: int  #: the record's sequence number
    ts_usec: int  #: microseconds since boot (CLOCK_MONOTONIC)
    flag: str  #: "-", or "c" / "+" for a continuation fragment (older kernels)
    extra: list[str] = Field(default_factory=list)  #: fields after the flag, e.g. ["caller=T1"]
    message: str  #: the text, ``\\xXX`` escapes decoded
    props: dict[str, str] = Field(default_factory=dict)  #: the dictionary lines, e.g. {"SUBSYSTEM": "pci"}


def _unescape(text: str) -> str:
    return _ESCAPE_RE.sub(lambda m: chr(int(m.group(1), 16)), text)


def parse_record(lineno: int, text: str) -> KmsgRecord:
    """One record from its first line (prefix and message, no newline). Raises :class:`ParseError`."""
    m = _PREFIX_RE.match(text)
    if m is None:
        raise ParseError(FMT, lineno, "<level>,<seqnum>,<timestamp usec>,<flag>[,...];<message>", text)
    pri = int(m.group(1))
    extra = [f for f in m.group(5).split(",") if f]
    return KmsgRecord(
        facility=pri >> 3,
        level=pri & 7,
        seq=int(m.group(2)),
        ts_usec=int(m.group(3)),
        flag=m.group(4),
        extra=extra,
        message=_unescape(text[m.end() :]),
    )


def parse_kmsg(text: str) -> list[KmsgRecord]:
    """Every record of ``text`` (records as ``/dev/kmsg`` gives them, one after another), with its dictionary.
    Empty lines are skipped. Raises :class:`ParseError` for binary input, a line that is not a record and does
    not continue one, or a dictionary line without ``=``."""
    if "\x00" in text:
        raise ParseError(FMT, None, "kmsg records", "binary data in input")
    heads: list[tuple[int, str, dict[str, str]]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line:
            continue
        if line.startswith(" "):
            key, sep, value = line[1:].partition("=")
            if not heads or not sep:
                raise ParseError(FMT, n, " KEY=value after a record", line)
            heads[-1][2][key] = _unescape(value)
            continue
        heads.append((n, line, {}))
    out = []
    for n, line, props in heads:
        record = parse_record(n, line)
        out.append(record.model_copy(update={"props": props}) if props else record)
    return out


def dmesg_line(record: KmsgRecord) -> str:
    """``record`` as ``dmesg`` prints it: ``[<seconds since boot>.<usec>] <message>``; a message of several
    lines (an escaped newline) gives several lines, each with the stamp."""
    stamp = f"[{record.ts_usec // 1_000_000:5d}.{record.ts_usec % 1_000_000:06d}] "
    return "\n".join(stamp + part for part in record.message.split("\n"))
