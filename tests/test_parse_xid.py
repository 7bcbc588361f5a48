"""Kernel-log XID parser.

The captured ``dmesg_nvrm.txt`` (h100-vm-idle) has NVRM lines but no XID. The XID lines below are
constructed in the documented formats (the driver's ``NVRM: Xid (PCI:dddd:bb:dd): N, ...`` line quoted in
/work/shared/xid.md and in NVIDIA/NVSentinel issue #155: ``NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off
the bus``), with dmesg, ``dmesg -T`` and journal prefixes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.xid import parse_xid

DMESG = Path(__file__).parent / "fixtures" / "hosts" / "h100-vm-idle" / "dmesg_nvrm.txt"

CONSTRUCTED = """\
[    0.404945] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)
[ 1843.308145] NVRM: Xid (PCI:0000:44:00): 79, pid=2961, name=python3, GPU has fallen off the bus.
[Sun Nov 22 10:58:12 2026] NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception
Nov 22 10:58:13 node07 kernel: NVRM: Xid (PCI:0000:86:00): 31, pid=3208, Ch 00000008, intr 10000000. MMU Fault
[ 1900.000001] pcieport 0000:40:01.1: AER: Corrected error received: 0000:44:00.0
"""


def test_real_dmesg_has_no_xid() -> None:
    log = parse_xid(DMESG.read_text())
    assert log.events == []
    assert log.lines_read == 3  # three NVRM lines, read by eye


def test_constructed_events() -> None:
    log = parse_xid(CONSTRUCTED)
    assert log.codes() == [79, 13, 31]
    e79, e13, e31 = log.events
    assert (e79.line, e79.pci, e79.pci_key, e79.uptime_s) == (2, "0000:44:00", (0, 0x44, 0), 1843.308145)
    assert (e79.pid, e79.process_name) == (2961, "python3")
    assert e79.message.endswith("GPU has fallen off the bus.")
    assert (e13.pid, e13.process_name, e13.time) == (None, None, "Sun Nov 22 10:58:12 2026")
    assert (e31.pid, e31.time, e31.pci_key) == (3208, "Nov 22 10:58:13", (0, 0x86, 0))


def test_older_line_without_pid() -> None:
    (e,) = parse_xid("NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.\n").events
    assert (e.code, e.pid, e.process_name) == (79, None, None)


@pytest.mark.parametrize(
    "text",
    ["[ 1.0] NVRM: Xid (PCI:0000:44:00): seventy-nine, GPU gone\n", "\x00\x00\x7fELF", "NVRM: Xid (\n"],
    ids=["code-not-number", "binary", "cut"],
)
def test_bad_input_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_xid(text)
