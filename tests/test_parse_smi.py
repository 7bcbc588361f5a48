"""nvidia-smi XML and CSV parsers on the captured H100 outputs (tests/fixtures/hosts/README.md).

Expected values were read by eye from the fixture files; modified copies (older driver element names,
faults) are built by text substitution on the real files and say so in their names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.smi_csv import SmiQuery, parse_smi_csv
from fleetdx.probes.parsers.smi_values import ClockEventReason, bus_key
from fleetdx.probes.parsers.smi_xml import parse_smi_xml

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
IDLE, BUSY = HOSTS / "h100-vm-idle", HOSTS / "h100-vm-busy"
MIB = 1 << 20


def read(p: Path) -> str:
    return p.read_text()


# --- XML ------------------------------------------------------------------------------------------------


def test_xml_idle_inventory_and_link() -> None:
    r = parse_smi_xml(read(IDLE / "nvidia-smi_-q_-x.xml"))
    assert (r.driver_version, r.cuda_version, r.attached_gpus) == ("580.159.04", "13.0", 1)
    (g,) = r.gpus
    assert g.index == 0
    assert g.bus_id == "00000000:00:06.0"
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert g.architecture == "Hopper"
    assert g.uuid == "GPU-1f13c8ac-bd86-896c-5961-bb1ba51ca883"
    assert g.mig_mode == "Disabled"
    assert (g.pcie.gen_current, g.pcie.gen_max, g.pcie.width_current, g.pcie.width_max) == (5, 5, 16, 16)
    assert g.pcie.replay_counter == 0


def test_xml_idle_clocks_power_memory() -> None:
    (g,) = parse_smi_xml(read(IDLE / "nvidia-smi_-q_-x.xml")).gpus
    assert (g.clocks.sm_mhz, g.clocks.max_sm_mhz, g.clocks.mem_mhz) == (345, 1980, 2619)
    assert g.active_clock_reasons == [ClockEventReason.GPU_IDLE]
    assert g.clock_event_reasons[ClockEventReason.SW_POWER_CAP] is False
    assert (g.power_draw_w, g.power_limit_w, g.default_power_limit_w) == (73.58, 700.0, 700.0)
    assert (g.temperature_c, g.memory_temperature_c) == (39.0, 41.0)
    assert g.memory_total_bytes == 81559 * MIB and g.memory_used_bytes == 0
    assert g.utilization_gpu_pct == 0.0
    assert g.processes == []


def test_xml_idle_ecc_and_remapped_rows() -> None:
    (g,) = parse_smi_xml(read(IDLE / "nvidia-smi_-q_-x.xml")).gpus
    assert g.ecc_mode == "Enabled"
    assert g.ecc_volatile.uncorrectable == 0 and g.ecc_aggregate.uncorrectable == 0
    assert g.ecc_volatile.dram_correctable == 0
    assert g.remapped_rows is not None
    assert (g.remapped_rows.correctable, g.remapped_rows.uncorrectable) == (0, 0)
    assert (g.remapped_rows.pending, g.remapped_rows.failure) == (False, False)
    assert g.retired_pages_pending is None  # the fixture prints N/A (H100 uses row remapping, not retirement)


def test_xml_busy_foreign_process_and_power_cap() -> None:
    (g,) = parse_smi_xml(read(BUSY / "nvidia-smi_-q_-x.xml")).gpus
    (p,) = g.processes
    assert (p.pid, p.name, p.type, p.used_memory_bytes) == (1929, "python3", "C", 19948 * MIB)
    assert g.active_clock_reasons == [ClockEventReason.SW_POWER_CAP]
    assert g.clocks.sm_mhz == 1395
    assert g.power_draw_w == 697.70
    assert g.utilization_gpu_pct == 100.0
    assert g.memory_used_bytes == 19957 * MIB


def test_xml_older_driver_throttle_reason_names() -> None:
    """Modified copy: pre-R535 drivers name the block clocks_throttle_reasons / clocks_throttle_reason_*."""
    text = read(BUSY / "nvidia-smi_-q_-x.xml").replace("clocks_event_reason", "clocks_throttle_reason")
    (g,) = parse_smi_xml(text).gpus
    assert g.active_clock_reasons == [ClockEventReason.SW_POWER_CAP]


def test_xml_older_driver_power_readings_and_ecc_totals() -> None:
    """Modified copy: older drivers print <power_readings><power_draw>/<power_limit>, single/double-bit
    ECC."""
    text = read(IDLE / "nvidia-smi_-q_-x.xml")
    text = text.replace("<gpu_power_readings>", "<power_readings>").replace(
        "</gpu_power_readings>", "</power_readings>"
    )
    text = text.replace(
        "<average_power_draw>73.58 W</average_power_draw>", "<power_draw>80.25 W</power_draw>"
    )
    text = text.replace(
        "<current_power_limit>700.00 W</current_power_limit>", "<power_limit>700.00 W</power_limit>"
    )
    text = text.replace(
        "<volatile>",
        "<volatile><single_bit><total>3</total></single_bit><double_bit><total>2</total></double_bit>",
        1,
    )
    text = text.replace("<dram_uncorrectable>0</dram_uncorrectable>", "", 1)
    text = text.replace("<sram_uncorrectable_parity>0</sram_uncorrectable_parity>", "", 1)
    text = text.replace("<sram_uncorrectable_secded>0</sram_uncorrectable_secded>", "", 1)
    (g,) = parse_smi_xml(text).gpus
    assert g.power_draw_w == 80.25 and g.power_limit_w == 700.0
    assert g.ecc_volatile.uncorrectable_total == 2
    assert g.ecc_volatile.uncorrectable == 2


def test_xml_na_values_become_none() -> None:
    """Modified copy: ECC disabled prints N/A counters; those are unknown, not zero."""
    text = read(IDLE / "nvidia-smi_-q_-x.xml").replace(
        "<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>N/A</dram_uncorrectable>"
    )
    text = text.replace("<sram_uncorrectable_parity>0<", "<sram_uncorrectable_parity>N/A<")
    text = text.replace("<sram_uncorrectable_secded>0<", "<sram_uncorrectable_secded>N/A<")
    (g,) = parse_smi_xml(text).gpus
    assert g.ecc_volatile.dram_uncorrectable is None
    assert g.ecc_volatile.uncorrectable is None


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t[: len(t) // 2],  # truncated
        lambda t: t.replace("<gpu_temp>39 C</gpu_temp>", "<gpu_temp>hot</gpu_temp>"),  # unreadable value
        lambda t: t.replace("<attached_gpus>1</attached_gpus>", "<attached_gpus>2</attached_gpus>"),
        lambda t: t.replace("nvidia_smi_log", "other_log"),
        lambda t: "",
        lambda t: "\x00\x01binary",
    ],
    ids=["truncated", "bad-value", "count-disagrees", "wrong-root", "empty", "binary"],
)
def test_xml_bad_input_raises_parse_error(mutate) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParseError):
        parse_smi_xml(mutate(read(IDLE / "nvidia-smi_-q_-x.xml")))


def test_xml_entity_expansion_rejected() -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><nvidia_smi_log>&b;</nvidia_smi_log>'
    )
    with pytest.raises(ParseError, match="entity"):
        parse_smi_xml(bomb)


# --- CSV ------------------------------------------------------------------------------------------------


def test_csv_query_gpu_idle() -> None:
    t = parse_smi_csv(read(IDLE / "nvidia-smi_query-gpu.csv"))
    assert t.query is SmiQuery.GPU and t.header
    assert [c.name for c in t.columns][:4] == ["index", "name", "uuid", "pci.bus_id"]
    assert next(c for c in t.columns if c.name == "memory.total").unit == "MiB"
    assert t.rows[0]["retired_pages.pending"] == "[N/A]"  # generic row keeps the raw cell
    (g,) = t.gpus()
    assert (g.index, g.name, g.bus_id) == (0, "NVIDIA H100 80GB HBM3", "00000000:00:06.0")
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) == (5, 5, 16, 16)
    assert (g.sm_clock_mhz, g.max_sm_clock_mhz) == (
        345,
        1980,
    )  # asked as clocks.sm, printed clocks.current.sm
    assert g.clock_event_mask == 0x1 and g.clock_event_reasons == [ClockEventReason.GPU_IDLE]
    assert (g.temperature_c, g.power_draw_w, g.power_limit_w) == (39.0, 73.59, 700.0)
    assert (g.memory_total_bytes, g.memory_used_bytes) == (81559 * MIB, 0)
    assert g.ecc_uncorrected_volatile_total == 0
    assert g.retired_pages_pending is None
    assert g.driver_version == "580.159.04"


def test_csv_query_gpu_busy() -> None:
    (g,) = parse_smi_csv(read(BUSY / "nvidia-smi_query-gpu.csv")).gpus()
    assert (g.utilization_gpu_pct, g.utilization_memory_pct) == (100.0, 32.0)
    assert g.clock_event_mask == 0x4 and g.clock_event_reasons == [ClockEventReason.SW_POWER_CAP]
    assert (g.sm_clock_mhz, g.power_draw_w, g.memory_used_bytes) == (1395, 698.18, 19957 * MIB)
    assert g.name is None  # not queried


def test_csv_compute_apps_busy() -> None:
    t = parse_smi_csv(read(BUSY / "nvidia-smi_query-compute-apps.csv"))
    assert t.query is SmiQuery.COMPUTE_APPS
    (a,) = t.compute_apps()
    assert (a.pid, a.process_name, a.used_memory_bytes, a.bus_id) == (
        1929,
        "python3",
        19948 * MIB,
        "00000000:00:06.0",
    )


def test_csv_compute_apps_header_only_is_no_process() -> None:
    """Modified copy: no compute process prints the header line alone."""
    header = read(BUSY / "nvidia-smi_query-compute-apps.csv").splitlines()[0] + "\n"
    t = parse_smi_csv(header)
    assert t.compute_apps() == []


def test_csv_remapped_rows_idle() -> None:
    t = parse_smi_csv(read(IDLE / "nvidia-smi_query-remapped-rows.csv"))
    assert t.query is SmiQuery.REMAPPED_ROWS
    (r,) = t.remapped_rows()
    assert (r.bus_id, r.correctable, r.uncorrectable, r.pending, r.failure) == (
        "00000000:00:06.0",
        0,
        0,
        False,
        False,
    )


def test_csv_noheader_nounits_with_fields() -> None:
    """Modified copy: ``--format=csv,noheader,nounits`` drops the header line and the units in the cells."""
    body = read(BUSY / "nvidia-smi_query-gpu.csv").splitlines()[1]
    body = body.replace(" %", "").replace(" MHz", "").replace(" W", "").replace(" MiB", "")
    fields = [
        "index",
        "utilization.gpu",
        "utilization.memory",
        "clocks.sm",
        "clocks_throttle_reasons.active",
        "power.draw",
        "temperature.gpu",
        "memory.used",
    ]
    t = parse_smi_csv(body + "\n", fields=fields)
    assert not t.header
    (g,) = t.gpus()
    assert (g.utilization_gpu_pct, g.sm_clock_mhz, g.power_draw_w) == (100.0, 1395, 698.18)
    assert g.clock_event_reasons == [ClockEventReason.SW_POWER_CAP]
    assert g.memory_used_bytes == 19957 * MIB


def test_csv_not_supported_cell() -> None:
    """Modified copy: ``[Not Supported]`` is unknown, never zero."""
    text = read(IDLE / "nvidia-smi_query-gpu.csv").replace(", 0, [N/A],", ", [Not Supported], [N/A],")
    (g,) = parse_smi_csv(text).gpus()
    assert g.ecc_uncorrected_volatile_total is None


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t.replace("345 MHz", "345 GHz"),  # wrong unit
        lambda t: t.replace(", 39,", ", warm,"),  # not a number
        lambda t: t.replace("0x0000000000000001", "0xZZ"),
        lambda t: t.splitlines()[1] + "\n",  # header dropped, no fields given
        lambda t: t.rsplit(",", 1)[0] + "\n",  # a cell missing
        lambda t: "",
    ],
    ids=["unit", "nan", "mask", "noheader-without-fields", "short-row", "empty"],
)
def test_csv_bad_input_raises_parse_error(mutate) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParseError):
        parse_smi_csv(mutate(read(IDLE / "nvidia-smi_query-gpu.csv")))


def test_bus_key_matches_across_tools() -> None:
    assert bus_key("00000000:00:06.0") == bus_key("0000:00:06.0") == bus_key("PCI:0000:00:06") == (0, 0, 6)
    assert bus_key("0000:3b:00") == (0, 0x3B, 0)
    assert bus_key("GPU0") is None


# --- CSV header plausibility and long lines -------------------------------------------------------------


def test_csv_long_line_of_one_letter_is_not_a_header() -> None:
    """A 50 MB line of ``A`` (a corrupt capture) used to read as a one-column header."""
    with pytest.raises(ParseError) as e:
        parse_smi_csv("A" * (50 * 1024 * 1024))
    assert e.value.line == 1
    assert "index, name" in e.value.expected and "[MiB]" in e.value.expected
    assert len(e.value.detail) < 300  # the error carries a clipped excerpt, not the 50 MB line


def test_csv_long_line_with_commas_is_refused_without_splitting() -> None:
    """A 50 MB line of ``a,`` would make 25 M cells if split: refused as a header by its length."""
    with pytest.raises(ParseError) as e:
        parse_smi_csv("a," * (25 * 1024 * 1024))
    assert e.value.line == 1 and len(e.value.detail) < 300


def test_csv_long_data_line_after_a_real_header() -> None:
    """The real idle query-gpu header, then one 50 MB row of ``0,``: a row with the wrong cell count."""
    header = read(IDLE / "nvidia-smi_query-gpu.csv").splitlines()[0]
    with pytest.raises(ParseError) as e:
        parse_smi_csv(header + "\n" + "0," * (25 * 1024 * 1024) + "\n")
    assert e.value.line == 2 and "19 cells" in e.value.expected and len(e.value.detail) < 300


@pytest.mark.parametrize(
    "first",
    [
        "Hello, world",  # words, not field names
        "Failed to initialize NVML: Driver/library version mismatch",  # nvidia-smi's own error
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
        "foo, bar, baz",  # plausible shapes but no nvidia-smi field
        "index, name, memory.total [MiB] [MiB]",
    ],
)
def test_csv_first_line_that_is_no_header(first: str) -> None:
    body = read(IDLE / "nvidia-smi_query-gpu.csv").splitlines()[1]
    with pytest.raises(ParseError) as e:
        parse_smi_csv(first + "\n" + body + "\n")
    assert e.value.line == 1 and "header" in e.value.expected


@pytest.mark.parametrize(
    "header",
    [
        "index, name, fan.speed [%], pstate, encoder.stats.sessionCount",  # camelCase field of --help-query-gpu
        "timestamp, gpu_uuid, pid, used_gpu_memory [MiB]",
        "pci.bus_id, clocks_event_reasons.hw_slowdown",
    ],
)
def test_csv_other_real_field_names_are_headers(header: str) -> None:
    t = parse_smi_csv(header + "\n")
    assert t.header and t.rows == []
