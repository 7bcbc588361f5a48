"""The kernel-log follower (issue 23 item 4, agent mode): the ``/dev/kmsg`` record parser on a real capture,
the follower's state (last sequence number and boot), lost records, the ``journalctl --cursor-file``
alternative, and the bundle it feeds the XID rule.

``tests/fixtures/kmsg/lkml-20200813-printk-caller-dict.kmsg``: four records as ``cat /dev/kmsg`` printed them
on a kernel with CONFIG_PRINTK_CALLER, quoted in LKML message <20200813113155.GA483@jagdpanzerIV.localdomain>
(Sergey Senozhatsky, "Re: [RFC PATCH] printk: Change timestamp to triplet as mono, boot and real", 2020-08-13).
The XID records below are *modified*: that record prefix around real ``NVRM: Xid`` texts. The follower runs on
regular files standing in for the device (a regular file returns many records per read, the device one; the
follower reads both) and, where this machine lets it, on the real ``/dev/kmsg``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from fleetdx.probes.bundle import BundleData, CommandMeta
from fleetdx.probes.catalog import DMESG_FILE
from fleetdx.probes.contracts import RunStatus
from fleetdx.probes.errors import ParseError
from fleetdx.probes.kmsg import (
    KMSG,
    follow_journal,
    follow_kernel_log,
    follow_kmsg,
    keep_xid_lines,
    with_followed_kernel_log,
)
from fleetdx.probes.parsers.kmsg import dmesg_line, parse_kmsg
from fleetdx.probes.parsers.xid import parse_xid
from fleetdx.probes.runner import RunResult

LKML = Path(__file__).parent / "fixtures" / "kmsg" / "lkml-20200813-printk-caller-dict.kmsg"
BOOT = "09263a00-0a40-465d-a1f8-55dbdc7caf92"


def test_real_capture_records_with_caller_field_and_dictionary() -> None:
    recs = parse_kmsg(LKML.read_text())
    assert [r.seq for r in recs] == [223, 224, 225, 226]
    first = recs[0]
    assert (first.facility, first.level, first.ts_usec, first.flag, first.extra) == (0, 6, 93298, "-", ["caller=T1"])
    assert first.props == {"SUBSYSTEM": "acpi", "DEVICE": "+acpi:PNP0A08:00"}
    assert recs[2].props == {} and recs[2].message == "PCI host bridge to bus 0000:00"
    assert dmesg_line(recs[2]) == "[    0.093540] PCI host bridge to bus 0000:00"
    assert "OS requires [ExtendedConfig ASPM ClockPM MSI]" in recs[1].message  # a ';' in the text is text


def test_escapes_and_bad_records() -> None:
    (r,) = parse_kmsg("14,7,1500000,-;a\\x5cb tab\\x09end\n")
    assert (r.facility, r.level, r.message) == (1, 6, "a\\b tab\tend")
    (multi,) = parse_kmsg("4,8,2000000,-;one\\x0atwo\n")
    assert dmesg_line(multi) == "[    2.000000] one\n[    2.000000] two"
    with pytest.raises(ParseError):
        parse_kmsg("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    with pytest.raises(ParseError):
        parse_kmsg(" SUBSYSTEM=pci\n")
    with pytest.raises(ParseError):
        parse_kmsg("6,1,2,-;x\x00y\n")


def _xid_records(start: int, n: int = 2) -> str:
    """Modified records: the capture's prefix form around real XID texts."""
    texts = [
        "NVRM: Xid (PCI:0000:18:00): 79, pid=1818987, name=python3, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:2a:00): 45, pid=1818988, name=python3, Ch 00000001",
        "br0: port 4(veth1) entered disabled state",
    ]
    return "".join(f"4,{start + i},{9_000_000 + i * 1000},-,caller=T7;{texts[i % 3]}\n" for i in range(n))


def test_xid_records_reach_the_xid_parser_with_their_uptime() -> None:
    text = "\n".join(dmesg_line(r) for r in parse_kmsg(_xid_records(100, 3)))
    log = parse_xid(text)
    assert [(e.code, e.uptime_s) for e in log.events] == [(79, 9.0), (45, 9.001)]


def _device(tmp_path: Path, text: str) -> Path:
    dev = tmp_path / "kmsg"
    dev.write_text(text)
    return dev


def _boot(tmp_path: Path, boot: str = BOOT) -> Path:
    p = tmp_path / "boot_id"
    p.write_text(boot + "\n")
    return p


def test_follower_reads_each_record_once_and_keeps_its_place(tmp_path: Path) -> None:
    state = tmp_path / "state" / "kmsg.json"
    dev, boot = _device(tmp_path, LKML.read_text() + _xid_records(227)), _boot(tmp_path)
    first = follow_kmsg(state, dev, boot)
    assert (first.status, first.records, first.first_seq, first.last_seq, first.new_boot) == (
        RunStatus.OK,
        6,
        223,
        228,
        True,
    )
    assert "[    9.000000] NVRM: Xid (PCI:0000:18:00): 79" in first.text
    again = follow_kmsg(state, dev, boot)
    assert (again.records, again.text, again.new_boot, again.lost) == (0, "", False, 0)
    dev.write_text(dev.read_text() + _xid_records(229, 3))
    more = follow_kmsg(state, dev, boot, keep=keep_xid_lines)
    assert (more.records, more.first_seq, more.last_seq) == (3, 229, 231)
    assert more.text.count("NVRM: Xid") == 2 and "br0:" not in more.text  # kept as the dmesg probe keeps lines


def test_a_gap_counts_lost_records_and_a_new_boot_rereads(tmp_path: Path) -> None:
    state = tmp_path / "kmsg.json"
    boot = _boot(tmp_path)
    follow_kmsg(state, _device(tmp_path, _xid_records(10)), boot)
    # the ring buffer wrapped: the records 12-19 were overwritten before this read
    wrapped = follow_kmsg(state, _device(tmp_path, _xid_records(20)), boot)
    assert (wrapped.lost, wrapped.first_seq) == (8, 20)
    # a reboot: the sequence starts again; the state of the old boot does not hide the new records
    rebooted = follow_kmsg(state, _device(tmp_path, _xid_records(0)), _boot(tmp_path, "other-boot"))
    assert (rebooted.new_boot, rebooted.records, rebooted.lost) == (True, 2, 0)


def test_a_device_that_cannot_be_read_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = follow_kmsg(tmp_path / "s.json", tmp_path / "no-such-device", _boot(tmp_path))
    assert absent.status is RunStatus.SKIPPED and "no-such-device" in str(absent.reason)

    def denied(path: object, flags: int) -> int:  # what open(2) answers without CAP_SYSLOG under dmesg_restrict
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "open", denied)
    said = follow_kmsg(tmp_path / "s.json", KMSG, _boot(tmp_path))
    assert said.status is RunStatus.SKIPPED and "CAP_SYSLOG" in str(said.reason)
    assert not (tmp_path / "s.json").exists()


def test_unparsable_records_fail_not_pass(tmp_path: Path) -> None:
    got = follow_kmsg(tmp_path / "s.json", _device(tmp_path, "garbage\n"), _boot(tmp_path))
    assert got.status is RunStatus.FAILED and "kmsg" in str(got.reason)


@pytest.mark.skipif(not os.access(KMSG, os.R_OK), reason="/dev/kmsg is not readable here (CAP_SYSLOG)")
def test_the_real_dev_kmsg_is_followed(tmp_path: Path) -> None:
    state = tmp_path / "kmsg.json"
    first = follow_kmsg(state, KMSG)
    assert first.status is RunStatus.OK and first.records > 0 and first.new_boot
    assert first.last_seq is not None and first.first_seq is not None and first.last_seq >= first.first_seq
    second = follow_kmsg(state, KMSG)
    assert second.status is RunStatus.OK and not second.new_boot
    assert second.first_seq is None or second.first_seq > first.last_seq


class StandInJournal:
    """A stand-in runner for ``journalctl`` (this machine's journal is empty): answers with two kernel lines
    in ``-o short-monotonic`` form and records the argv."""

    def __init__(self, status: RunStatus = RunStatus.OK) -> None:
        self.argv: list[str] = []
        self.status = status

    def run(self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult:
        self.argv = list(argv)
        if self.status is not RunStatus.OK:
            return RunResult(argv=list(argv), status=self.status, reason="journalctl: not installed")
        out = (
            "[ 9.000000] gpu1 kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=7, name=python3, "
            "GPU has fallen off the bus.\n"
            "[ 9.100000] gpu1 kernel: br0: port 4(veth1) entered disabled state\n"
        )
        return RunResult(argv=list(argv), status=RunStatus.OK, returncode=0, stdout=out)


def test_journal_follower_passes_the_cursor_file(tmp_path: Path) -> None:
    runner = StandInJournal()
    got = follow_journal(runner, tmp_path / "cursor", keep=keep_xid_lines)
    assert runner.argv[:4] == ["journalctl", "-k", "--cursor-file", str(tmp_path / "cursor")]
    assert (got.status, got.records) == (RunStatus.OK, 2)
    assert [e.uptime_s for e in parse_xid(got.text).events] == [9.0]


def test_kmsg_first_then_the_journal_then_both_reasons(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    runner = StandInJournal()
    via = follow_kernel_log(state, runner, device=tmp_path / "absent")
    assert via.source == "journalctl" and runner.argv[3] == str(tmp_path / "s.json.journal-cursor")
    neither = follow_kernel_log(state, StandInJournal(RunStatus.SKIPPED), device=tmp_path / "absent")
    assert neither.status is RunStatus.SKIPPED and "journalctl: not installed" in str(neither.reason)


def test_the_bundle_judges_only_the_new_records(tmp_path: Path) -> None:
    dmesg = CommandMeta(file=DMESG_FILE, argv=["dmesg"], status=RunStatus.OK, started_at=1.0)
    old = "[ 1.0] NVRM: Xid (PCI:0000:18:00): 48, pid=1, name=x, DBE\n"
    bundle = BundleData(host="n", files={DMESG_FILE: old}, commands=[dmesg])
    state = tmp_path / "s.json"
    dev, boot = _device(tmp_path, _xid_records(5, 2)), _boot(tmp_path)
    followed = with_followed_kernel_log(bundle, follow_kmsg(state, dev, boot, keep_xid_lines))
    assert [e.code for e in parse_xid(followed.files[DMESG_FILE]).events] == [79, 45]
    meta = followed.meta_for(DMESG_FILE)
    assert meta is not None and "2 new record(s), seq 5-6" in str(meta.reason)
    quiet = with_followed_kernel_log(bundle, follow_kmsg(state, dev, boot, keep_xid_lines))
    assert quiet.files[DMESG_FILE] == ""
    skipped = with_followed_kernel_log(bundle, follow_kmsg(state, tmp_path / "absent", boot))
    assert skipped.files[DMESG_FILE] == old
    kept = skipped.meta_for(DMESG_FILE)
    assert kept is not None and "the whole dmesg is judged" in str(kept.reason)


@pytest.mark.skipif(not os.access(KMSG, os.R_OK), reason="/dev/kmsg is not readable here (CAP_SYSLOG)")
def test_a_node_job_that_follows_judges_only_the_new_records(tmp_path: Path) -> None:
    """NodeJob.follow_kernel_log on this machine: the first check reads this boot's records, the next only what
    came since (the state file on the node)."""
    from fleetdx.orchestrator.preflight.run import NodeJob, collect_on_node
    from fleetdx.probes.contracts import Level

    job = NodeJob(host="here", level=Level.QUICK, follow_kernel_log=tmp_path / "kmsg.json")
    first = collect_on_node(job).meta_for(DMESG_FILE)
    assert first is not None and first.argv == [str(KMSG)] and "from the start of this boot" in str(first.reason)
    second = collect_on_node(job).meta_for(DMESG_FILE)
    assert second is not None and "from the start of this boot" not in str(second.reason)


def test_lines_that_drain_are_carried_until_a_reset_closes_them(tmp_path: Path) -> None:
    """A retest must not read as clean only because the XID 79 was logged before the last check: the lines
    that drain (orchestrator's drains_node: XID policy) are carried into every later result of the boot; a
    successful reset of that GPU (the nvidia-smi line, here *modified* into a kmsg record) closes them."""
    from fleetdx.orchestrator.preflight.run import drains_node

    state, runner = tmp_path / "s.json", StandInJournal()
    dev = _device(tmp_path, _xid_records(40, 2))  # XID 79 on 0000:18:00, XID 45 on 0000:2a:00
    first = follow_kernel_log(state, runner, keep_xid_lines, device=dev, carry=drains_node)
    assert [e.code for e in parse_xid(first.text).events] == [79, 45] and first.carried == 0
    second = follow_kernel_log(state, runner, keep_xid_lines, device=dev, carry=drains_node)
    assert (second.records, second.carried) == (0, 1)
    assert [e.code for e in parse_xid(second.text).events] == [79]  # the teardown is not carried
    dev.write_text(dev.read_text() + "6,42,9500000,-;GPU 00000000:18:00.0 was successfully reset.\n")
    third = follow_kernel_log(state, runner, keep_xid_lines, device=dev, carry=drains_node)
    assert len(parse_xid(third.text).resets) == 1 and third.carried == 1
    fourth = follow_kernel_log(state, runner, keep_xid_lines, device=dev, carry=drains_node)
    assert (fourth.text, fourth.carried) == ("", 0)


def test_drains_node_follows_the_xid_policy() -> None:
    from fleetdx.orchestrator.preflight.run import drains_node

    assert drains_node("[ 9.0] NVRM: Xid (PCI:0000:18:00): 48, pid=1, name=x, DBE")
    assert drains_node("[ 9.0] NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.")
    assert not drains_node("[ 9.0] NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=x, Graphics SM Warp Exception")
    assert not drains_node("[ 9.0] NVRM: Xid (PCI:0000:18:00): 45, pid=1, name=x, Ch 00000001")
    assert not drains_node("[ 9.0] br0: port 4(veth1) entered disabled state")
    reboot = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    assert drains_node(f"[ 9.0] NVRM: Xid (PCI:0000:18:00): 154, pid=1, name=x, {reboot}")
    assert not drains_node(
        "[ 9.0] NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x2 (x) to 0x0 (None)"
    )
    assert not drains_node("[ 9.0] NVRM: Xid (PCI:0000:18:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0)")
