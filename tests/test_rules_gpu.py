"""GPU diagnosis rules on NodeFacts built from the parsed fixtures (tests/fixtures/hosts/), plus modified
copies
for faults the fixtures do not show (named ``*_modified_*`` and saying what was changed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis import references as ref
from fleetdx.orchestrator.diagnosis import rules_gpu as R
from fleetdx.orchestrator.diagnosis import xid_table
from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.judgement.envelope import exclude_hostlist
from fleetdx.probes.contracts import Severity
from fleetdx.probes.facts import NodeFacts
from fleetdx.probes.parsers.microbench import Microbench, parse_microbench
from fleetdx.probes.parsers.smi_csv import parse_smi_csv
from fleetdx.probes.parsers.smi_xml import parse_smi_xml
from fleetdx.probes.parsers.xid import parse_xid

HOSTS = Path(__file__).parent / "fixtures" / "hosts"


def xml_text(bundle: str) -> str:
    return (HOSTS / bundle / "nvidia-smi_-q_-x.xml").read_text()


def facts(
    bundle: str, host: str, *, xml: str | None = None, with_xml: bool = True, **extra: object
) -> NodeFacts:
    d = HOSTS / bundle
    kw: dict[str, object] = {}
    if with_xml:
        kw["smi"] = parse_smi_xml(xml if xml is not None else xml_text(bundle))
    kw["query_gpu"] = parse_smi_csv((d / "nvidia-smi_query-gpu.csv").read_text())
    for name, slot in (
        ("nvidia-smi_query-compute-apps.csv", "compute_apps"),
        ("nvidia-smi_query-remapped-rows.csv", "remapped_rows"),
    ):
        if (d / name).exists():
            kw[slot] = parse_smi_csv((d / name).read_text())
    if (d / "dmesg_nvrm.txt").exists():
        kw["xids"] = parse_xid((d / "dmesg_nvrm.txt").read_text())
    kw["microbench"] = parse_microbench((d / "torch_microbench.json").read_text()).gpus
    kw.update(extra)
    return NodeFacts(host=host, **kw)  # type: ignore[arg-type]


IDLE = facts("h100-vm-idle", "idle")
BUSY = facts("h100-vm-busy", "busy")


def run_all(node: NodeFacts, fleet: Fleet) -> list:  # type: ignore[type-arg]
    return [f for rule in R.RULES for f in rule(node, fleet)]


def test_idle_node_is_clean() -> None:
    assert run_all(IDLE, Fleet(nodes=[IDLE], expected_gpus_per_node=1)) == []


def test_busy_node_foreign_process() -> None:
    (f,) = R.foreign_process_rule(BUSY, Fleet(nodes=[BUSY]))
    assert (f.code, f.severity, f.node, f.subject) == (
        FindingCode.GPU_FOREIGN_PROCESS,
        Severity.CRITICAL,
        "busy",
        "GPU0",
    )
    assert f.details["pid"] == 1929 and f.details["process_name"] == "python3"
    assert f.details["used_memory_mib"] == 19948
    assert f.details["file"] == "nvidia-smi_-q_-x.xml"


def test_busy_node_foreign_process_from_csv_when_xml_missing() -> None:
    node = facts("h100-vm-busy", "busy", with_xml=False)
    (f,) = R.foreign_process_rule(node, Fleet(nodes=[node]))
    # the busy query-gpu CSV has no pci.bus_id column, so the GPU is named by its bus id, not guessed
    assert f.subject == "PCI:00000000:00:06.0"
    assert f.details["file"] == "nvidia-smi_query-compute-apps.csv" and f.details["pid"] == 1929


def test_busy_node_power_cap_is_info_only() -> None:
    (f,) = R.clocks_rule(BUSY, Fleet(nodes=[BUSY]))
    assert (f.code, f.severity, f.subject) == (FindingCode.GPU_CLOCKS_THROTTLED, Severity.INFO, "GPU0")
    assert f.details["active_reasons"] == ["sw_power_cap"]
    assert (f.details["sm_clock_mhz"], f.details["power_draw_w"]) == (1395, 697.7)


def test_modified_lowered_power_limit_power_cap_is_warning() -> None:
    """Modified copy of the busy XML: the enforced power limit lowered to 500 W (default stays 700 W)."""
    text = xml_text("h100-vm-busy").replace(
        "<current_power_limit>700.00 W</current_power_limit>",
        "<current_power_limit>500.00 W</current_power_limit>",
        1,
    )
    node = facts("h100-vm-busy", "busy", xml=text)
    (f,) = R.clocks_rule(node, Fleet(nodes=[node]))
    assert f.severity is Severity.WARNING
    assert (f.details["power_limit_w"], f.details["default_power_limit_w"]) == (500.0, 700.0)


@pytest.mark.parametrize(
    "reason", ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"]
)
def test_modified_hw_slowdown_is_critical(reason: str) -> None:
    """Modified copy of the busy XML: one hardware/thermal slowdown reason set Active."""
    tag = f"clocks_event_reason_{reason}"
    text = xml_text("h100-vm-busy").replace(f"<{tag}>Not Active</{tag}>", f"<{tag}>Active</{tag}>")
    node = facts("h100-vm-busy", "busy", xml=text)
    (f,) = R.clocks_rule(node, Fleet(nodes=[node]))
    assert (f.code, f.severity, f.subject) == (FindingCode.GPU_CLOCKS_THROTTLED, Severity.CRITICAL, "GPU0")
    assert reason in f.message and set(f.details["active_reasons"]) == {reason, "sw_power_cap"}  # type: ignore


def test_idle_gpu_reason_is_not_a_finding() -> None:
    assert R.clocks_rule(IDLE, Fleet(nodes=[IDLE])) == []


def test_modified_ecc_uncorrectable_volatile() -> None:
    """Modified copy of the idle XML: 2 volatile DRAM uncorrectable errors (first <dram_uncorrectable> is the
    volatile block)."""
    text = xml_text("h100-vm-idle").replace(
        "<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>2</dram_uncorrectable>", 1
    )
    node = facts("h100-vm-idle", "idle", xml=text)
    (f,) = R.ecc_rule(node, Fleet(nodes=[node]))
    assert (f.code, f.severity, f.subject) == (FindingCode.GPU_ECC_UNCORRECTABLE, Severity.CRITICAL, "GPU0")
    assert f.details["volatile_dram_uncorrectable"] == 2 and f.details["aggregate_uncorrectable"] == 0


def test_modified_ecc_aggregate_only_is_history_not_a_finding() -> None:
    """Modified copy: only the aggregate (lifetime) counter is non-zero."""
    text = xml_text("h100-vm-idle")
    first = text.index("<dram_uncorrectable>0</dram_uncorrectable>")
    second = text.index("<dram_uncorrectable>0</dram_uncorrectable>", first + 1)
    text = text[:second] + "<dram_uncorrectable>5</dram_uncorrectable>" + text[second + 41 :]
    node = facts("h100-vm-idle", "idle", xml=text)
    assert node.smi is not None and node.smi.gpus[0].ecc_aggregate.dram_uncorrectable == 5
    assert R.ecc_rule(node, Fleet(nodes=[node])) == []


def test_modified_ecc_from_csv_when_xml_missing() -> None:
    """Modified copy of the idle query-gpu CSV: ecc.errors.uncorrected.volatile.total 0 -> 3."""
    text = (
        (HOSTS / "h100-vm-idle" / "nvidia-smi_query-gpu.csv")
        .read_text()
        .replace(", 0, [N/A],", ", 3, [N/A],")
    )
    node = facts("h100-vm-idle", "idle", with_xml=False, query_gpu=parse_smi_csv(text))
    (f,) = R.ecc_rule(node, Fleet(nodes=[node]))
    assert f.subject == "GPU0" and f.details["ecc.errors.uncorrected.volatile.total"] == 3


def test_modified_row_remap_pending_and_failure_xml() -> None:
    """Modified copy of the idle XML: remapped_row_pending and remapped_row_failure Yes."""
    text = xml_text("h100-vm-idle").replace("<remapped_row_pending>No<", "<remapped_row_pending>Yes<")
    text = text.replace("<remapped_row_failure>No<", "<remapped_row_failure>Yes<")
    node = facts("h100-vm-idle", "idle", xml=text)
    got = {f.code: f for f in R.row_remap_rule(node, Fleet(nodes=[node]))}
    assert got[FindingCode.GPU_ROW_REMAP_FAILURE].severity is Severity.CRITICAL
    assert got[FindingCode.GPU_ROW_REMAP_PENDING].severity is Severity.WARNING
    assert got[FindingCode.GPU_ROW_REMAP_PENDING].subject == "GPU0"


def test_modified_row_remap_pending_csv() -> None:
    """Modified copy of the remapped-rows CSV (pending No -> Yes), no XML: subject from the bus id."""
    text = (HOSTS / "h100-vm-idle" / "nvidia-smi_query-remapped-rows.csv").read_text()
    text = text.replace("0, 0, No, No", "0, 1, Yes, No")
    node = facts("h100-vm-idle", "idle", with_xml=False, remapped_rows=parse_smi_csv(text))
    (f,) = R.row_remap_rule(node, Fleet(nodes=[node]))
    assert (f.code, f.subject) == (FindingCode.GPU_ROW_REMAP_PENDING, "GPU0")
    assert f.details["remapped_rows_uncorrectable"] == 1


def test_modified_pcie_width_degraded() -> None:
    """Modified copy of the idle XML: current link width 16x -> 8x."""
    text = xml_text("h100-vm-idle").replace("<current_link_width>16x<", "<current_link_width>8x<")
    node = facts("h100-vm-idle", "idle", xml=text)
    (f,) = R.pcie_rule(node, Fleet(nodes=[node]))
    assert (f.code, f.severity, f.subject) == (FindingCode.PCIE_LINK_DEGRADED, Severity.WARNING, "GPU0")
    assert (f.details["width_current"], f.details["width_max"]) == (8, 16)


def test_modified_pcie_gen_low_judged_only_under_load() -> None:
    """Modified copies: current link gen 5 -> 3 on the idle XML (no finding) and on the busy XML (finding)."""
    idle = facts(
        "h100-vm-idle",
        "idle",
        xml=xml_text("h100-vm-idle").replace("<current_link_gen>5<", "<current_link_gen>3<"),
    )
    assert R.pcie_rule(idle, Fleet(nodes=[idle])) == []
    busy = facts(
        "h100-vm-busy",
        "busy",
        xml=xml_text("h100-vm-busy").replace("<current_link_gen>5<", "<current_link_gen>3<"),
    )
    (f,) = R.pcie_rule(busy, Fleet(nodes=[busy]))
    assert "Gen3 of Gen5" in f.message and f.details["under_load"] is True


def test_gpu_count_vs_expected() -> None:
    (f,) = R.gpu_count_rule(
        IDLE, Fleet(nodes=[IDLE], expected_gpus_per_node=8, expected_gpus_source="--gpus")
    )
    assert (f.code, f.severity, f.subject) == (FindingCode.GPU_COUNT_MISMATCH, Severity.CRITICAL, "node")
    assert (f.details["gpus"], f.details["expected"], f.details["expected_from"]) == (1, 8, "--gpus")


def test_modified_gpu_count_vs_majority() -> None:
    """Modified copies: three nodes show the fixture's 1 GPU, a fourth has the GPU missing from its XML."""
    text = xml_text("h100-vm-idle")
    empty = text[: text.index("<gpu id=")] + "</nvidia_smi_log>\n"
    empty = empty.replace("<attached_gpus>1</attached_gpus>", "<attached_gpus>0</attached_gpus>")
    lost = facts("h100-vm-idle", "lost", xml=empty)
    peers = [IDLE.model_copy(update={"host": f"n{i}"}) for i in range(3)]
    fleet = Fleet(nodes=[*peers, lost])
    (f,) = R.gpu_count_rule(lost, fleet)
    assert (f.details["gpus"], f.details["expected"]) == (0, 1)
    assert f.details["expected_from"] == "majority of 4 nodes"
    assert R.gpu_count_rule(peers[0], fleet) == []
    two = Fleet(nodes=[peers[0], lost])  # 1 vs 0: no majority, no judgement
    assert R.gpu_count_rule(lost, two) == []


def test_modified_xid_fallen_off_bus_is_critical_on_gpu0() -> None:
    """Modified copy of the idle dmesg: an XID 79 line for the fixture GPU's bus (00:06) appended."""
    text = (HOSTS / "h100-vm-idle" / "dmesg_nvrm.txt").read_text()
    text += "\n[ 5000.000001] NVRM: Xid (PCI:0000:00:06): 79, pid=1929, name=python3, "
    text += "GPU has fallen off the bus."
    node = facts("h100-vm-idle", "idle", xids=parse_xid(text))
    (f,) = R.xid_rule(node, Fleet(nodes=[node]))
    assert (f.code, f.severity, f.subject) == (FindingCode.GPU_XID, Severity.CRITICAL, "GPU0")
    assert (f.details["xid"], f.details["class"], f.details["count"]) == (79, "NODE", 1)
    assert f.details["lines"] == [5]


def test_modified_application_xids_never_condemn() -> None:
    """Modified dmesg: XIDs 13, 31, 43 (application faults) on the fixture GPU, and 45 (teardown)."""
    lines = [
        f"[ {100 + i}.0] NVRM: Xid (PCI:0000:00:06): {c}, pid=7, name=a.out, app fault"
        for i, c in enumerate((13, 31, 43, 13))
    ]
    node = facts("h100-vm-idle", "idle", xids=parse_xid("\n".join(lines)))
    got = {f.details["xid"]: f for f in R.xid_rule(node, Fleet(nodes=[node]))}
    assert set(got) == {13, 31, 43}
    assert all(f.severity is Severity.INFO for f in got.values())
    assert got[13].details["count"] == 2


def test_xid_table_classes_follow_xid_md() -> None:
    assert xid_table.lookup(48).xid_class is xid_table.XidClass.RESET
    assert xid_table.lookup(63).xid_class is xid_table.XidClass.INFO
    assert xid_table.lookup(79).xid_class is xid_table.XidClass.NODE
    assert xid_table.lookup(32).xid_class is xid_table.XidClass.HW_INVESTIGATE
    assert xid_table.lookup(3).xid_class is xid_table.XidClass.HW_INVESTIGATE  # "unused" on A100/H100
    assert xid_table.classify(8, 1) is xid_table.XidClass.APP
    assert xid_table.classify(8, 2) is xid_table.XidClass.RESET  # "APP -> RESET if repeats"
    msg = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    assert xid_table.classify(154, 1, msg) is xid_table.XidClass.NODE


def _idle_with(*lines: str) -> NodeFacts:
    """Modified copy of the idle dmesg (whose GPU0 sits at PCI 0000:00:06.0) with ``lines`` appended."""
    text = (HOSTS / "h100-vm-idle" / "dmesg_nvrm.txt").read_text().rstrip("\n") + "\n" + "\n".join(lines) + "\n"
    return facts("h100-vm-idle", "idle", xids=parse_xid(text))


# --- issue 14: a GPU lost or failed without an XID --------------------------------------------------------


def test_modified_fallen_off_the_bus_without_xid_is_critical_and_excludes_the_node() -> None:
    """The driver's message of NVSentinel issue #155, moved to the fixture GPU's bus (00:06), as dmesg wraps it."""
    node = _idle_with(
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:00:06.0",
        "               NVRM: (PCI ID: 10de:2330) installed in this system has",
        "               NVRM: fallen off the bus and is not responding to commands.",
        "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).",
    )
    got = R.xid_rule(node, Fleet(nodes=[node]))
    assert [(f.code, f.severity, f.subject) for f in got] == [
        (FindingCode.GPU_LOST, Severity.CRITICAL, "GPU0"),
        (FindingCode.GPU_LOST, Severity.CRITICAL, "NVIDIA driver"),
    ]
    fallen, probe = got
    assert fallen.nodes == ["idle"]
    assert fallen.details["kind"] == "fallen-off-bus" and fallen.details["pci"] == "0000:00:06.0"
    assert fallen.details["pci_id"] == "10de:2330" and fallen.details["lines"] == [4]
    assert str(fallen.details["raw"]).splitlines()[2].endswith("not responding to commands.")
    assert "fallen off the bus" in fallen.message
    assert probe.details["kind"] == "probe-failed" and probe.details["lines"] == [7]
    assert exclude_hostlist(got) == "idle"


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (
            "[  912.004417] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0) installed in this system has "
            "fallen off the bus and is not responding to commands.",
            "fallen-off-bus",
        ),
        ("[  903.610907] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x62:0x65:1792)", "init-failed"),
        (
            "Dec  2 11:49:53 worker4 kernel: NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x24:0x72:1568)",
            "init-failed",
        ),
    ],
)
def test_modified_gpu_not_in_the_inventory_is_named_by_its_address(line: str, kind: str) -> None:
    node = _idle_with(line)
    (f,) = R.xid_rule(node, Fleet(nodes=[node]))
    assert (f.code, f.severity, f.details["kind"]) == (FindingCode.GPU_LOST, Severity.CRITICAL, kind)
    assert f.subject.startswith("PCI:0000:") and f.details["lines"] == [4]
    assert f.details["raw"] == line


def test_modified_init_failure_lines_of_one_gpu_are_one_finding() -> None:
    node = _idle_with(
        "[  885.242168] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)",
        "[  885.242457] NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5",
        "[  926.232044] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)",
        "[  926.232358] NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5",
    )
    (f,) = R.xid_rule(node, Fleet(nodes=[node]))
    assert (f.subject, f.details["count"], f.details["lines"]) == ("PCI:0000:0a:00.0", 4, [4, 5, 6, 7])
    assert f.details["last_uptime_s"] == 926.232358


# --- issue 15: the message's own fatal / non-fatal word ---------------------------------------------------
# NVLink5 lines as the driver prints them (leptonai/gpud's tests quote them from production logs and NVIDIA's
# XID catalog), XID 74 as NVIDIA's catalog and AWS HyperPod's documentation quote it.

NVL = "NVRM: Xid (PCI:0000:00:06): "


@pytest.mark.parametrize(
    ("message", "severity", "cls"),
    [
        ("145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)",
         Severity.WARNING, "INFO"),
        ("145, pid=876767, name=ray::WorkerDict, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 "
         "0x00000001 0x00000000 0x00100000 0x00000004)", Severity.WARNING, "INFO"),
        ("144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)",
         Severity.WARNING, "INFO"),
        ("146, TLW_RX_PIPE1 Nonfatal XC0 i0 Link 03 (0x00000010 0x00000020 0x00000030 0x00000040)",
         Severity.WARNING, "INFO"),
        ("149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 03 (0x00086226 0x00000001 0x00000000 0x00000000 0x00000000 "
         "0x00000000)", Severity.WARNING, "INFO"),
        ("149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 0x00000000 0x00000000 "
         "0x00000000)", Severity.CRITICAL, "RESET"),
        ("149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
         Severity.CRITICAL, "RESET"),
        ("145, pid=11436, name=fatal_loader, RLW_SRC_TRACK Nonfatal XC1 i0 Link 03 (0x040868e2 0x00000008 "
         "0x00000000 0x00000000 0x00000000 0x00000000)", Severity.WARNING, "INFO"),  # the process name is not the word
        ("74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, "
         "0x0, 0x0, 0x0)", Severity.CRITICAL, "RESET"),
        ("74, pid=1234, name=python3, NVLink: non-fatal error detected on link 6(0x0, 0x0, 0x100, 0x0, 0x0, 0x0, "
         "0x0)", Severity.WARNING, "INFO"),
        ("74, NVLink: Nonfatal error detected on link 2", Severity.WARNING, "INFO"),
        ("74, pid=1234, name=python3, NVLink Error on GPU 0000:00:06", Severity.CRITICAL, "RESET"),  # no word: table
        ("147, TREX Fatal XC0 i0 Link 01 (0x00000001 0x00000000 0x00000000 0x00000000)", Severity.CRITICAL, "RESET"),
    ],
)
def test_modified_nvlink_xid_severity_reads_the_fatal_word(message: str, severity: Severity, cls: str) -> None:
    node = _idle_with(f"[ 5000.000001] {NVL}{message}")
    (f,) = R.xid_rule(node, Fleet(nodes=[node]))
    assert (f.code, f.severity, f.details["class"], f.subject) == (FindingCode.GPU_XID, severity, cls, "GPU0")


def test_modified_a_fatal_line_among_nonfatal_ones_makes_the_gpu_critical() -> None:
    nonfatal = "145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x0)"
    fatal = "145, RLW_SRC_TRACK Fatal XC0 i0 Link 03 (0x040868e2 0x00000008 0x00000000 0x00000000 0x00000000 0x0)"
    only_nonfatal = _idle_with(*(f"[ {5000 + i}.0] {NVL}{nonfatal}" for i in range(5)))
    (f,) = R.xid_rule(only_nonfatal, Fleet(nodes=[only_nonfatal]))
    assert f.severity is Severity.WARNING and f.details["count"] == 5
    assert f.details["fatality"] == {"fatal": 0, "nonfatal": 5, "unmarked": 0}
    assert "non-fatal" in f.message
    mixed = _idle_with(f"[ 5000.0] {NVL}{nonfatal}", f"[ 5001.0] {NVL}{fatal}", f"[ 5002.0] {NVL}{nonfatal}")
    (g,) = R.xid_rule(mixed, Fleet(nodes=[mixed]))
    assert g.severity is Severity.CRITICAL and g.details["fatality"] == {"fatal": 1, "nonfatal": 2, "unmarked": 0}


def test_fatal_word_is_read_only_for_families_that_carry_one() -> None:
    # XID 45 names the previous XID; "Nonfatal" in another family's text changes nothing
    assert xid_table.message_fatality("RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0)") is False
    assert xid_table.message_fatality("NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x0)") is True
    assert xid_table.message_fatality("NVLink: non-fatal error detected on link 6") is False
    assert xid_table.message_fatality("pid=1, name=python3, Ch 00000001 caused by previous Xid 145") is None
    assert xid_table.classify(145, 1, "RLW_RXPIPE Nonfatal XC0 i0 Link 13") is xid_table.XidClass.INFO
    assert xid_table.classify(48, 1, "DBE (double bit error) ECC error Nonfatal") is xid_table.XidClass.RESET
    assert xid_table.classify(145, 1, "") is xid_table.XidClass.RESET


def test_busy_microbench_slow_vs_reference_and_peer() -> None:
    fleet = Fleet(nodes=[IDLE, BUSY])
    got = {f.code: f for f in R.microbench_rule(BUSY, fleet)}
    assert set(got) == {FindingCode.GEMM_SLOW, FindingCode.HBM_SLOW}  # pinned H2D 54.96 is not slow
    gemm = got[FindingCode.GEMM_SLOW]
    # measured while the foreign process (pid 1929) ran: the sharing is measured, not the GPU
    assert gemm.severity is Severity.INFO and gemm.subject == "GPU0" and gemm.details["shared_with_pid"] == 1929
    assert "not evidence of a slow GPU" in gemm.message
    assert gemm.details["measured"] == 671.51 and gemm.details["expected"] == 773
    assert gemm.details["basis"] == "measured" and gemm.details["peer_median"] == 772.65
    assert got[FindingCode.HBM_SLOW].details["measured"] == 1605.54
    assert R.microbench_rule(IDLE, fleet) == []


def test_modified_h2d_slow_vs_spec_scaled_reference() -> None:
    """Modified figures: an A100-SXM4-80GB (no measured reference) at 10 GB/s pinned H2D (Gen4 x16 expected
    32 GB/s x 0.85 = 27.3; threshold at 25% tolerance 20.5)."""
    m = Microbench(gpu_index=3, gpu_name="NVIDIA A100-SXM4-80GB", h2d_pinned_gbps=10.0, d2h_pinned_gbps=24.0)
    node = NodeFacts(host="a100", microbench=[m])
    (f,) = R.microbench_rule(node, Fleet(nodes=[node]))
    assert (f.code, f.subject, f.details["basis"]) == (FindingCode.H2D_SLOW, "GPU3", "spec_scaled")
    assert f.details["metric"] == "h2d_pinned_gbps"
    exp = ref.expected(ref.spec_for("NVIDIA A100-SXM4-80GB"), ref.Metric.H2D_PINNED)  # type: ignore[arg-type]
    assert exp.threshold == pytest.approx(32 * 54.6 / 64 * 0.75)


def test_unknown_model_without_peers_is_not_judged() -> None:
    node = NodeFacts(
        host="x", microbench=[Microbench(gpu_index=0, gpu_name="Some Future GPU", gemm_bf16_tflops=1.0)]
    )
    assert R.microbench_rule(node, Fleet(nodes=[node])) == []


def test_rules_without_facts_give_no_finding() -> None:
    """Missing facts mean "cannot judge": no rule raises or reports on an empty node."""
    empty = NodeFacts(host="empty")
    fleet = Fleet(nodes=[empty, IDLE, BUSY])
    assert run_all(empty, fleet) == []


def test_registry_lists_every_rule() -> None:
    public = {n for n in dir(R) if n.endswith("_rule") and callable(getattr(R, n))}
    assert {r.__name__ for r in R.RULES} == public


def test_slow_microbench_on_an_idle_gpu_is_a_warning() -> None:
    """The busy capture's figures without its foreign process (the same numbers on a GPU nobody else holds):
    the slowness is the GPU's, a WARNING."""
    alone = BUSY.model_copy(update={"gpu_processes": []})
    got = {f.code: f for f in R.microbench_rule(alone, Fleet(nodes=[IDLE, alone]))}
    assert {f.severity for f in got.values()} == {Severity.WARNING} and FindingCode.HBM_SLOW in got
    assert "shared_with_pid" not in got[FindingCode.HBM_SLOW].details


def test_modified_xid45_teardowns_after_a_root_xid_are_one_finding() -> None:
    """Modified dmesg (issue 23): XID 79 on the fixture GPU, then XID 45 teardowns on 7 other GPUs of the node
    (made-up bus ids). Before: 1 critical and 7 XID 45 findings; now the root's one finding carries them."""
    lines = ["[ 100.0] NVRM: Xid (PCI:0000:00:06): 79, pid=7, name=python3, GPU has fallen off the bus."]
    lines += [
        f"[ {101 + i}.0] NVRM: Xid (PCI:0000:{0x10 + i:02x}:00): 45, pid=7, name=python3, Ch 00000010"
        for i in range(7)
    ]
    node = facts("h100-vm-idle", "idle", xids=parse_xid("\n".join(lines)))
    found = R.xid_rule(node, Fleet(nodes=[node]))
    (f,) = found
    assert (f.severity, f.details["xid"], f.subject) == (Severity.CRITICAL, 79, "GPU0")
    assert len(f.details["consequences"]) == 7 and "XID 45 on 7 other GPU(s)" in f.message


def test_xid45_without_a_root_stays_an_application_teardown() -> None:
    lines = [f"[ {100 + i}.0] NVRM: Xid (PCI:0000:{0x10 + i:02x}:00): 45, pid=7, name=python3, Ch 10" for i in range(3)]
    node = facts("h100-vm-idle", "idle", xids=parse_xid("\n".join(lines)))
    found = R.xid_rule(node, Fleet(nodes=[node]))
    assert len(found) == 3 and all(f.severity is not Severity.CRITICAL for f in found)
    assert all("consequences" not in f.details for f in found)


def test_a_teardown_before_the_root_is_not_its_consequence() -> None:
    lines = [
        "[ 90.0] NVRM: Xid (PCI:0000:00:10): 45, pid=7, name=python3, Ch 10",
        "[ 100.0] NVRM: Xid (PCI:0000:00:06): 79, pid=7, name=python3, GPU has fallen off the bus.",
    ]
    node = facts("h100-vm-idle", "idle", xids=parse_xid("\n".join(lines)))
    assert sorted(f.details["xid"] for f in R.xid_rule(node, Fleet(nodes=[node]))) == [45, 79]
