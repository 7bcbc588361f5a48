"""Kernel-log XID parser.

The captured ``dmesg_nvrm.txt`` (h100-vm-idle) has NVRM lines but no XID. The XID lines below are
constructed in the documented formats (the driver's ``NVRM: Xid (PCI:dddd:bb:dd): N, ...`` line quoted in
/work/shared/xid.md and in NVIDIA/NVSentinel issue #155: ``NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off
the bus``), with dmesg, ``dmesg -T`` and journal prefixes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.xid import DriverEventKind, parse_xid

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


# --- driver lines without an XID (issue 14) ------------------------------------------------------------------
# Modelled on real reports: NVIDIA/NVSentinel issue #155 (the fallen-off-the-bus message printed over three
# NVRM lines with no XID, then "probe routine failed"), NVIDIA/gpu-operator issue #1146 (journal lines of
# RmInitAdapter failures), NVIDIA/open-gpu-kernel-modules issue #789 (dmesg RmInitAdapter with a GSP detail
# line) and Bumblebee issue #554 (the older "GPU at ... has fallen off the bus." form).

SPLIT_FALLEN = """\
[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).
[ 1843.439669] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  (dvs-builder@U22)
"""

ONE_LINE_FALLEN = (
    "[  912.004417] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this system has fallen "
    "off the bus and is not responding to commands.\n"
)

JOURNAL_FALLEN = """\
Oct 25 10:41:07 gpu-node-17 kernel: NVRM: The NVIDIA GPU 0000:b3:00.0
Oct 25 10:41:07 gpu-node-17 kernel: NVRM: (PCI ID: 10de:26b5) installed in this system has
Oct 25 10:41:07 gpu-node-17 kernel: NVRM: fallen off the bus and is not responding to commands.
"""

INIT_FAILED = """\
Dec  2 11:49:53 worker4 kernel: [  885.242168] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)
Dec  2 11:49:53 worker4 kernel: [  885.242457] NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5
[  903.609564] NVRM: RmInitAdapter: Cannot initialize GSP firmware RM
[  903.610907] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x62:0x65:1792)
[   21.238204] NVRM: osInitNvMapping: *** Cannot attach gpu
[   21.238209] NVRM: RmInitAdapter: osInitNvMapping failed, bailing out of RmInitAdapter
[   12.100001] NVRM: RmInitAdapter failed! (0x26:0xffff:1227)
[   12.100002] NVRM: rm_init_adapter failed for device bearing minor number 0
"""


def test_fallen_off_the_bus_split_over_three_lines_is_one_event() -> None:
    log = parse_xid(SPLIT_FALLEN)
    assert log.events == []  # no XID was printed
    fallen, probe = log.driver_events
    assert (fallen.kind, fallen.line, fallen.pci, fallen.pci_key) == (
        DriverEventKind.FALLEN_OFF_BUS,
        1,
        "0000:b3:00.0",
        (0, 0xB3, 0),
    )
    assert (fallen.pci_id, fallen.uptime_s) == ("10de:26b5", 1843.308145)
    assert fallen.raw == "\n".join(SPLIT_FALLEN.splitlines()[:3])
    assert (probe.kind, probe.line, probe.pci) == (DriverEventKind.PROBE_FAILED, 4, None)
    assert probe.raw == SPLIT_FALLEN.splitlines()[3]


@pytest.mark.parametrize(
    "text",
    [
        ONE_LINE_FALLEN,
        JOURNAL_FALLEN,
        "[  361.001] NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.\n",  # open kernel module
        "[   49.261458] NVRM: GPU at 0000:b3:00.0 has fallen off the bus.\n",  # older drivers
    ],
    ids=["one-line", "journal", "open-module", "gpu-at"],
)
def test_fallen_off_the_bus_variants(text: str) -> None:
    (e,) = parse_xid(text).driver_events
    assert (e.kind, e.line, e.pci_key) == (DriverEventKind.FALLEN_OFF_BUS, 1, (0, 0xB3, 0))
    assert e.raw == text.rstrip("\n")


def test_one_line_message_keeps_the_pci_id_and_time() -> None:
    (e,) = parse_xid(ONE_LINE_FALLEN).driver_events
    assert (e.pci, e.pci_id, e.uptime_s) == ("0000:b3:00.0", "10de:20b0", 912.004417)
    (j,) = parse_xid(JOURNAL_FALLEN).driver_events
    assert (j.time, j.pci_id) == ("Oct 25 10:41:07", "10de:26b5")


def test_rm_init_adapter_failures() -> None:
    log = parse_xid(INIT_FAILED)
    assert log.events == []
    got = [(e.kind, e.line, e.pci) for e in log.driver_events]
    assert got == [
        (DriverEventKind.INIT_FAILED, 1, "0000:0a:00.0"),
        (DriverEventKind.INIT_FAILED, 2, "0000:0a:00.0"),
        (DriverEventKind.INIT_FAILED, 4, "0000:3b:00.0"),
        (DriverEventKind.INIT_FAILED, 7, None),  # older drivers name no device
        (DriverEventKind.INIT_FAILED, 8, None),
    ]
    assert log.driver_events[0].time == "Dec  2 11:49:53"


@pytest.mark.parametrize(
    "line",
    [
        "[    5.100000] NVRM: The NVIDIA probe routine failed for 1 device(s).",
        "[    5.100001] NVRM: None of the NVIDIA devices were initialized.",
        "[    5.100002] NVRM: The NVIDIA probe routine was not called for 2 device(s).",
    ],
)
def test_probe_failures(line: str) -> None:
    (e,) = parse_xid(line + "\n").driver_events
    assert (e.kind, e.pci, e.raw) == (DriverEventKind.PROBE_FAILED, None, line)


def test_xid_79_is_an_xid_not_a_driver_event_and_informational_nvrm_lines_are_nothing() -> None:
    text = """\
[74889.644112] NVRM: GPU at PCI:0000:02:00: GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df
[74889.644132] NVRM: GPU Board Serial Number: 0322716036227
[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.
[74889.700000] NVRM: A GPU crash dump has been created. If possible, please run
               NVRM: nvidia-bug-report.sh as root to collect this data before
               NVRM: the NVIDIA kernel module is unloaded.
"""
    log = parse_xid(text)
    assert log.codes() == [79] and log.driver_events == []
    assert parse_xid(DMESG.read_text()).driver_events == []


def test_a_cut_message_followed_by_an_xid_is_not_a_fall() -> None:
    """The message start without its end (the buffer wrapped), then an XID line: the XID is read, no fall is made
    up from half a message."""
    text = (
        "[ 1.0] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "[ 2.0] NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.\n"
    )
    log = parse_xid(text)
    assert log.codes() == [79] and log.driver_events == []


POOL = [
    *SPLIT_FALLEN.splitlines(),
    *JOURNAL_FALLEN.splitlines(),
    *INIT_FAILED.splitlines(),
    ONE_LINE_FALLEN.rstrip("\n"),
    *CONSTRUCTED.splitlines(),
    "[ 74889.700000] NVRM: A GPU crash dump has been created. If possible, please run",
    "               NVRM: nvidia-bug-report.sh as root to collect this data before",
]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(POOL), max_size=25))
def test_any_mix_of_real_lines_parses_and_every_event_points_at_its_lines(lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    log = parse_xid(text)
    for e in log.driver_events:
        got = e.raw.splitlines()
        assert got[0] == lines[e.line - 1] and set(got) <= set(lines)
        if e.kind is DriverEventKind.FALLEN_OFF_BUS:
            assert "fallen off the bus" in e.message
    # a one-line fall is always found, wherever it lands
    assert sum(1 for ln in lines if ln == ONE_LINE_FALLEN.rstrip("\n")) <= sum(
        1 for e in log.driver_events if e.kind is DriverEventKind.FALLEN_OFF_BUS
    )
    assert len(log.events) == sum(1 for ln in lines if "NVRM: Xid" in ln)



GSP_TIMEOUT = """\
[   24.302465] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482 \
heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200
[   84.300476] NVRM: GPU6 kbusSendSysmembarSingle_GH100: - timeout error waiting for startToken = 0x3 cnt=24105122
[   84.300488] NVRM: GPU6 _kgspLogRpcTimeout: ********************************* GSP Timeout ****************
"""


def test_gsp_heartbeat_and_rpc_timeout_without_an_xid() -> None:
    """Public dmesg of an H100 node (open-gpu-kernel-modules issue #1230's shape): the GSP stopped answering and
    no XID line was printed; the heartbeat line and the banner are GSP_TIMEOUT, the sysmembar line is neither."""
    log = parse_xid(GSP_TIMEOUT)
    assert log.events == []
    assert [(e.kind, e.line, e.pci) for e in log.driver_events] == [
        (DriverEventKind.GSP_TIMEOUT, 1, None),
        (DriverEventKind.GSP_TIMEOUT, 3, None),
    ]


def test_gpu_lost_from_the_bus_status_is_a_fall() -> None:
    """The resource manager's NV_ERR_GPU_IS_LOST assertion (open-gpu-kernel-modules issue #688's journal, a DGX
    Station A100): the GPU fell off the bus though no XID 79 and no 'fallen off' line was printed."""
    text = (
        "Feb 17 08:00:34 dgx kernel: NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus "
        "[NV_ERR_GPU_IS_LOST] (0x0000000F) returned from rmStatus @ kernel_ce_gv100.c:106\n"
        "Feb 17 08:00:34 dgx kernel: NVRM: _issueRpcAndWait: rpcSendMessage failed with status 0x0000000f for fn 76!\n"
    )
    assert [(e.kind, e.line) for e in parse_xid(text).driver_events] == [(DriverEventKind.FALLEN_OFF_BUS, 1)]
