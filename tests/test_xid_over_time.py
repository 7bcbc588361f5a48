"""XIDs judged over time (issue 23 item 4): root and consequence in the pre-flight diagnosis and the postmortem,
the per-XID policy, repeats across jobs with and without the store's history, dedup with first and last seen,
and a clean GPU reset closing an episode.

The kernel logs here are *modified* (hand-assembled) from real line formats: the XID 79 line and the driver's
``GPU has fallen off the bus`` line as NVIDIA NVSentinel issue #155 and tests/fixtures/joblogs/05_* print
them, the ``GPU at PCI:...: GPU-<uuid>`` identity line of the same capture, and XID 45 teardowns as
tests/fixtures/joblogs/32_* (NVIDIA/open-gpu-kernel-modules#1150) prints them, with and without the newer
drivers' ``caused by previous Xid N``. Bus ids are those of an 8-GPU HGX H100 board; pids are made up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis import xid_table
from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import diagnose
from fleetdx.orchestrator.diagnosis.rules_gpu import xid_rule
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.postmortem.run import run_postmortem
from fleetdx.orchestrator.postmortem.sources import Bundles
from fleetdx.probes.catalog import XID_LINE_RE
from fleetdx.probes.contracts import Severity
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.xid import XidHistory, XidSighting, parse_xid

BUSES = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
pytest_plugins = ["tests.pgfixtures"]

XID_CODES = {FindingCode.GPU_XID, FindingCode.GPU_LOST, FindingCode.GPU_HW_FAULT, FindingCode.CUDA_ERROR}


def _issue_case(caused_by: bool, journal: bool) -> str:
    """One XID 79 on GPU 0000:18:00, the driver's own fall line for it, then XID 45 on the 7 other GPUs."""

    def pre(t: int) -> str:
        return f"Nov 22 10:58:{t:02d} gpu1 kernel: " if journal else f"[74889.64{t:04d}] "

    lines = [
        pre(1) + "NVRM: GPU at PCI:0000:18:00: GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df",
        pre(1) + "NVRM: GPU Board Serial Number: 0322716036227",
        pre(1) + "NVRM: Xid (PCI:0000:18:00): 79, pid=1818987, name=python3, GPU has fallen off the bus.",
        pre(2) + "NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.",
    ]
    for i, b in enumerate(BUSES[1:]):
        tail = " caused by previous Xid 79" if caused_by else ""
        lines.append(
            pre(3 + i) + f"NVRM: Xid (PCI:0000:{b}:00): 45, pid={1818988 + i}, name=python3, Ch 0000000{i + 1}{tail}"
        )
    return "\n".join(lines) + "\n"


CASES = [(c, j) for c in (False, True) for j in (False, True)]


@pytest.mark.parametrize(("caused_by", "journal"), CASES)
def test_modified_issue_case_preflight_one_critical_at_most_three_xid_findings(caused_by: bool, journal: bool) -> None:
    node = NodeFacts(host="gpu1", xids=parse_xid(_issue_case(caused_by, journal)))
    found = diagnose(Fleet(nodes=[node])).findings
    critical = [f for f in found if f.severity is Severity.CRITICAL]
    assert len(critical) == 1 and len([f for f in found if f.code in XID_CODES]) <= 3
    (root,) = critical
    assert root.code is FindingCode.GPU_XID and root.details["xid"] == 79
    consequences = root.details["consequences"]
    assert isinstance(consequences, dict) and len(consequences) == 7 and root.details["driver_lines"] == [4]
    assert "XID 45 on 7 other GPU(s)" in root.message and "the same fall" in root.message
    assert root.details["first_time" if journal else "first_uptime_s"] is not None


@pytest.mark.parametrize(("caused_by", "journal"), CASES)
def test_modified_issue_case_postmortem_one_critical_at_most_three_xid_causes(
    tmp_path: Path, caused_by: bool, journal: bool
) -> None:
    d = tmp_path / "gpu1"
    d.mkdir()
    (d / "dmesg.txt").write_text(_issue_case(caused_by, journal))
    causes = run_postmortem([Bundles([d])]).causes
    critical = [c for c in causes if c.severity is Severity.CRITICAL]
    assert len(critical) == 1 and len([c for c in causes if c.code in XID_CODES]) <= 3
    (root,) = critical
    assert root.code is FindingCode.GPU_HW_FAULT and root.message.startswith("XID 79 ")
    assert "then XID 45 on 7 other GPU(s) of this host (7 lines)" in root.message
    assert "alike" not in root.message  # teardowns are not the same fault repeated


def test_xid45_alone_is_never_critical_in_either_path(tmp_path: Path) -> None:
    """XID 45 without a root: an application teardown (NVSentinel: "not solo: IGNORE"), even on 8 GPUs."""
    text = "\n".join(
        f"[100.{i}] NVRM: Xid (PCI:0000:{b}:00): 45, pid={900 + i}, name=python3, Ch 00000001"
        for i, b in enumerate(BUSES)
    )
    found = diagnose(Fleet(nodes=[NodeFacts(host="gpu1", xids=parse_xid(text))])).findings
    assert found and all(f.severity is not Severity.CRITICAL for f in found)
    d = tmp_path / "gpu1"
    d.mkdir()
    (d / "dmesg.txt").write_text(text + "\n")
    causes = run_postmortem([Bundles([d])]).causes
    assert causes and all(c.severity is not Severity.CRITICAL for c in causes)


# --- the policy table ---------------------------------------------------------------------------------------


def test_policy_follows_xid_md() -> None:
    """../shared/xid.md: APP codes never drain, 45 is a teardown, RESET/NODE/HW-INVESTIGATE drain on one event."""
    for code in (13, 31, 43, 45, 68):
        p = xid_table.policy(code)
        assert p.origin is xid_table.XidOrigin.APPLICATION and not p.drains, code
    for code in (13, 31, 43):
        p = xid_table.policy(code)
        assert (p.repeat_jobs, p.repeat_window_s) == (
            3,
            86400.0,
        ) and p.escalates_to is xid_table.XidClass.HW_INVESTIGATE
    assert xid_table.policy(45).repeat_jobs is None  # a teardown never escalates by itself
    for code in (48, 79, 95, 64, 74):
        assert xid_table.policy(code).drains and xid_table.policy(code).origin is xid_table.XidOrigin.HARDWARE
    assert xid_table.policy(119).origin is xid_table.XidOrigin.DRIVER and xid_table.policy(119).drains
    assert xid_table.policy(8).repeat_events == 2 and not xid_table.policy(8).drains
    assert all("docs.nvidia.com/deploy/xid-errors" in p.source for p in xid_table.policy_table())
    for p in xid_table.policy_table():
        assert p.drains == (xid_table.lookup(p.code).xid_class.severity is Severity.CRITICAL)
    assert not xid_table.policy(154).drains  # by the recovery action its message names


# --- repeats across jobs ------------------------------------------------------------------------------------


def _xid13(pids: list[int], bus: str = "3a") -> str:
    return "\n".join(
        f"[{200 + i}.5] NVRM: Xid (PCI:0000:{bus}:00): 13, pid={p}, name=python3, Graphics SM Warp Exception on "
        "(GPC 1, TPC 0, SM 0): Out Of Range Address"
        for i, p in enumerate(pids)
    )


def test_burst_of_one_job_is_one_info_finding_with_first_and_last_seen() -> None:
    node = NodeFacts(host="n", xids=parse_xid(_xid13([4242] * 500)))
    (f,) = xid_rule(node, Fleet(nodes=[node]))
    assert (f.severity, f.details["count"], f.details["jobs"], f.details["pids"]) == (Severity.INFO, 500, 1, [4242])
    assert (f.details["first_uptime_s"], f.details["last_uptime_s"]) == (200.5, 699.5)
    assert "single-run judgement" in str(f.details["history"])


def test_three_jobs_on_one_gpu_in_one_log_escalate() -> None:
    node = NodeFacts(host="n", xids=parse_xid(_xid13([11, 11, 22, 33])))
    (f,) = xid_rule(node, Fleet(nodes=[node]))
    assert (f.severity, f.details["class"], f.details["jobs"]) == (Severity.CRITICAL, "HW-INVESTIGATE", 3)
    assert "3 distinct jobs" in f.message
    # the same three jobs spread over three GPUs: each GPU saw one job, none escalates
    spread = NodeFacts(
        host="n", xids=parse_xid("\n".join(_xid13([p], b) for p, b in ((11, "18"), (22, "2a"), (33, "3a"))))
    )
    assert {f.severity for f in xid_rule(spread, Fleet(nodes=[spread]))} == {Severity.INFO}


def _history(*sightings: tuple[int, str, list[str]]) -> XidHistory:
    return XidHistory(
        host="n",
        since=1.0e9,
        runs=len(sightings),
        sightings=[
            XidSighting(code=c, pci=p, jobs=j, run_id=f"r{i}", at=1.0e9 + i) for i, (c, p, j) in enumerate(sightings)
        ],
    )


def test_store_history_counts_earlier_jobs_of_the_same_gpu() -> None:
    xids = parse_xid(_xid13([11, 22]))
    alone = NodeFacts(host="n", xids=xids)
    assert xid_rule(alone, Fleet(nodes=[alone]))[0].severity is Severity.INFO
    # an earlier run saw XID 31 from another job on the same GPU: three jobs, the GPU's fault
    earlier = NodeFacts(host="n", xids=xids, xid_history=_history((31, "0000:3a:00", ["pid:7"])))
    (f,) = xid_rule(earlier, Fleet(nodes=[earlier]))
    assert f.severity is Severity.CRITICAL and f.details["jobs"] == 3
    assert str(f.details["history"]).startswith("store: 1 earlier run(s)")
    # the same dmesg read again by an earlier run (same pids) adds no job; another GPU's history counts nothing
    reread = NodeFacts(
        host="n",
        xids=xids,
        xid_history=_history((13, "0000:3a:00", ["pid:11", "pid:22"]), (13, "0000:18:00", ["pid:99"])),
    )
    (g,) = xid_rule(reread, Fleet(nodes=[reread]))
    assert g.severity is Severity.INFO and g.details["jobs"] == 2


# --- a clean reset closes an episode ------------------------------------------------------------------------

_DBE = (
    "[300.1] NVRM: Xid (PCI:0000:18:00): 48, pid=55, name=python3, An uncorrectable double bit error (DBE) has "
    "been detected on GPU in the framebuffer at partition 6, subpartition 0."
)


def test_nvidia_smi_reset_closes_the_episode() -> None:
    text = _DBE + "\nGPU 00000000:18:00.0 was successfully reset.\n"
    node = NodeFacts(host="n", xids=parse_xid(text))
    (f,) = xid_rule(node, Fleet(nodes=[node]))
    assert (f.severity, f.details["closed_by_reset"], f.details["reset_tool"]) == (Severity.INFO, 2, "nvidia-smi")
    assert "history, not its current state" in f.message
    # the same XID again after the reset is current
    again = NodeFacts(host="n", xids=parse_xid(text + _DBE.replace("300.1", "400.2")))
    got = sorted((f.severity.value, f.details.get("closed_by_reset")) for f in xid_rule(again, Fleet(nodes=[again])))
    assert got == [("critical", None), ("info", 2)]
    # a reset of another GPU closes nothing
    other = NodeFacts(host="n", xids=parse_xid(_DBE + "\nGPU 00000000:2A:00.0 was successfully reset.\n"))
    assert [f.severity for f in xid_rule(other, Fleet(nodes=[other]))] == [Severity.CRITICAL]


def test_nvsentinel_reset_marker_is_matched_by_uuid() -> None:
    uuid = "GPU-455d8f70-2051-db6c-0430-ffc457bff834"
    head = f"[10.0] NVRM: GPU at PCI:0000:18:00: {uuid}\n{_DBE}\n"
    ok = parse_xid(head + f"Jul 10 07:38:05 n nvsentinel-gpu-reset: GPU reset executed: {uuid}, success: true\n")
    assert ok.uuids == {uuid: "0000:18:00"} and ok.resets[0].pci_key == (0, 0x18, 0)
    node = NodeFacts(host="n", xids=ok)
    assert [f.severity for f in xid_rule(node, Fleet(nodes=[node]))] == [Severity.INFO]
    failed = parse_xid(head + f"GPU reset executed: {uuid}, success: false\n")
    assert failed.resets == []
    refused = parse_xid(
        _DBE + "\nThe following GPUs could not be reset:\n  GPU 00000000:18:00.0: In use by another client\n"
    )
    assert refused.resets == []


def test_the_dmesg_probe_keeps_reset_lines() -> None:
    assert XID_LINE_RE.search("GPU 00000000:18:00.0 was successfully reset.")
    assert XID_LINE_RE.search("nvsentinel-gpu-reset: GPU reset executed: GPU-1, success: true")


# --- the store's history reaches the rule -----------------------------------------------------------------


def test_stored_runs_make_the_history_and_escalate_a_third_job(migrated_url: str) -> None:
    """Two earlier pre-flights (stored) each saw XID 13 from one job on GPU 0000:3a:00; the third run's log
    shows a third job: the stored findings' pids make it three jobs, critical. A re-read of the same log adds
    none. The history's window leaves older runs out."""
    from fleetdx.orchestrator.preflight.run import report_of, stored_xid_history, with_xid_history
    from fleetdx.orchestrator.report import RunKind
    from fleetdx.orchestrator.store import Store

    url = migrated_url
    t0 = 1_763_800_000.0
    with Store.open(url) as store:
        for i, pid in enumerate((11, 22)):
            node = NodeFacts(host="n", xids=parse_xid(_xid13([pid])))
            diag = diagnose(Fleet(nodes=[node]))
            assert [f.severity for f in diag.findings] == [Severity.INFO]
            store.save_report(report_of(RunKind.PREFLIGHT, diag, started_at=t0 + i * 600, level=None, simulated=False))
    history = stored_xid_history(url, ["n", "other"], now=t0 + 3600)
    assert history is not None and history["other"].sightings == [] and history["n"].runs == 2
    assert [s.jobs for s in history["n"].sightings] == [["pid:11"], ["pid:22"]]
    third = with_xid_history(NodeFacts(host="n", xids=parse_xid(_xid13([33]))), history)
    (f,) = diagnose(Fleet(nodes=[third])).findings
    assert (
        f.severity is Severity.CRITICAL
        and f.details["jobs"] == 3
        and "store: 2 earlier run(s)" in str(f.details["history"])
    )
    again = with_xid_history(NodeFacts(host="n", xids=parse_xid(_xid13([22]))), history)
    assert diagnose(Fleet(nodes=[again])).findings[0].severity is Severity.INFO
    later = stored_xid_history(url, ["n"], now=t0 + 2 * 86400)
    assert later is not None and later["n"].sightings == []


def test_an_unreachable_store_gives_the_single_run_judgement(tmp_path: Path) -> None:
    from fleetdx.orchestrator.preflight.run import stored_xid_history

    blocker = tmp_path / "file"
    blocker.write_text("")
    assert stored_xid_history(f"sqlite:///{blocker}/sub/x.db", ["n"]) is None
