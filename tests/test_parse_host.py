"""numactl -H, lscpu (text and -J) and ibstat/ibstatus/sysfs parsers on real captured outputs.

Expected values were read by eye from the fixture files (tests/fixtures/host/, tests/fixtures/hosts/).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.ibstat import IbFormat, LinkLayer, PhysState, PortState, parse_ibstat
from fleetdx.probes.parsers.lscpu import LscpuFormat, parse_lscpu
from fleetdx.probes.parsers.lscpu import _fields as _lscpu_fields
from fleetdx.probes.parsers.numactl import NumaFormat, parse_numactl

FIX = Path(__file__).parent / "fixtures"
HOST = FIX / "host"
IDLE = FIX / "hosts" / "h100-vm-idle"
IBSTAT = HOST / "ibstat_01_h100-node_8x-cx7-ib-400_4x-cx6dx-eth_some-down_gpud-testdata.txt"


def read(p: Path) -> str:
    return p.read_text(encoding="utf-8")


# --- numactl ------------------------------------------------------------------------------------------------


def test_numactl_della_distance_32_with_trailing_spaces() -> None:
    t = parse_numactl(read(HOST / "numactl-H_01_princeton-della-i16g1_2node_distance32.txt"))
    assert t.node_ids == [0, 1]
    assert t.nodes[0].cpus == list(range(0, 24))
    assert t.nodes[1].cpus == list(range(24, 48))
    assert (t.nodes[0].size_mb, t.nodes[0].free_mb) == (515346, 510311)
    assert (t.nodes[1].size_mb, t.nodes[1].free_mb) == (516087, 514509)
    assert t.distances == [[10, 32], [32, 10]]
    assert t.distance(0, 1) == 32
    assert t.source_format is NumaFormat.NUMACTL


def test_numactl_adroit_interleaved_cpus() -> None:
    t = parse_numactl(read(HOST / "numactl-H_02_princeton-adroit-h11g2_2node_interleaved-cpus.txt"))
    assert t.nodes[0].cpus == list(range(0, 48, 2))
    assert t.nodes[1].cpus == list(range(1, 48, 2))
    assert t.node_of_cpu(47) == 1
    assert t.node_of_cpu(46) == 0
    assert t.node_of_cpu(48) is None
    assert t.distances == [[10, 20], [20, 10]]
    assert t.nodes[1].free_mb == 507630


def test_numactl_hardware_genoa() -> None:
    t = parse_numactl(read(HOST / "numactl-hardware_03_asus-esc8000a-e12_genoa_2node.txt"))
    assert t.nodes[1].cpus == list(range(32, 64))
    assert t.nodes[0].size_mb == 193129
    assert t.distances == [[10, 32], [32, 10]]


def test_numactl_h100_vm_single_node() -> None:
    t = parse_numactl(read(IDLE / "numactl_-H.txt"))
    assert len(t.nodes) == 1
    assert t.nodes[0].cpus == list(range(16))
    assert (t.nodes[0].size_mb, t.nodes[0].free_mb) == (8411, 5927)
    assert t.distances == [[10]]


def test_numactl_memory_only_node_and_no_final_newline() -> None:
    text = (
        "available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 0 size: 100 MB\nnode 0 free: 50 MB\n"
        "node 1 cpus:\nnode 1 size: 200 MB\nnode 1 free: 10 MB\nnode distances:\nnode   0   1 \n"
        "  0:  10  20 \n  1:  20  10"
    )
    t = parse_numactl(text)
    assert t.nodes[1].cpus == []
    assert t.nodes[1].size_mb == 200


@pytest.mark.parametrize(
    "text, line",
    [
        ("", None),
        ("node 0 cpus: 0 1\n", 1),
        ("available: 2 nodes (0-1)\nnode 0 cpus: 0 1\n", None),  # node 1 has no cpus line
        ("available: 1 nodes (0)\nnode 0 cpus: 0 1\nnode 0 size: lots MB\n", 3),
        ("available: 1 nodes (0)\nnode 0 cpus: 0\nnode distances:\nnode   0\n  0:  10  20\n", 5),
        ("available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 1 cpus: 1 2\n", None),  # CPU 1 on two nodes
    ],
)
def test_numactl_bad_input_raises_parse_error(text: str, line: int | None) -> None:
    with pytest.raises(ParseError) as e:
        parse_numactl(text)
    assert e.value.fmt == "numactl"
    assert e.value.line == line


def test_numactl_reads_sysfs_dump() -> None:
    text = (
        "/sys/devices/system/node/node0/cpulist:0-3,8-11\n"
        "/sys/devices/system/node/node0/distance:10 21\n"
        "/sys/devices/system/node/node0/meminfo:Node 0 MemTotal:       8388608 kB\n"
        "/sys/devices/system/node/node0/meminfo:Node 0 MemFree:        1048576 kB\n"
        "/sys/devices/system/node/node1/cpulist:4-7,12-15\n"
        "/sys/devices/system/node/node1/distance:21 10\n"
    )
    t = parse_numactl(text)
    assert t.source_format is NumaFormat.SYSFS
    assert t.nodes[0].cpus == [0, 1, 2, 3, 8, 9, 10, 11]
    assert t.nodes[1].cpus == [4, 5, 6, 7, 12, 13, 14, 15]
    assert (t.nodes[0].size_mb, t.nodes[0].free_mb) == (8192, 1024)
    assert t.nodes[1].size_mb is None
    assert t.distances == [[10, 21], [21, 10]]


# --- lscpu --------------------------------------------------------------------------------------------------


def test_lscpu_della_text_flat_layout_interleaved_numa() -> None:
    c = parse_lscpu(read(HOST / "lscpu_01_princeton-della-k18g3_8x-h100-node_xeon8468_interleaved-numa.txt"))
    assert c.source_format is LscpuFormat.TEXT
    assert c.architecture == "x86_64"
    assert c.model_name == "Intel(R) Xeon(R) Platinum 8468"
    assert c.vendor_id == "GenuineIntel"
    assert c.cpus == 96
    assert c.online_cpus == list(range(96))
    assert (c.sockets, c.cores_per_socket, c.threads_per_core) == (2, 48, 1)
    assert c.numa_node_count == 2
    assert c.numa_cpus[0] == list(range(0, 96, 2))
    assert c.numa_cpus[1] == list(range(1, 96, 2))


@pytest.mark.parametrize("name, fmt", [("lscpu_-J.json", LscpuFormat.JSON), ("lscpu.txt", LscpuFormat.TEXT)])
def test_lscpu_h100_vm_text_and_json_agree(name: str, fmt: LscpuFormat) -> None:
    c = parse_lscpu(read(IDLE / name))
    assert c.source_format is fmt
    assert c.model_name == "Intel(R) Xeon(R) Processor"
    assert c.cpus == 16
    assert (c.sockets, c.cores_per_socket, c.threads_per_core) == (1, 16, 1)
    assert c.numa_cpus == {0: list(range(16))}


def test_lscpu_json_children_and_unknown_counts() -> None:
    text = (
        '{"lscpu": [{"field": "Architecture:", "data": "aarch64"}, {"field": "CPU(s):", "data": "72"},'
        ' {"field": "Vendor ID:", "data": "ARM", "children": [{"field": "Model name:", "data": "Neoverse-V2",'
        ' "children": [{"field": "Socket(s):", "data": "-"},'
        ' {"field": "Core(s) per socket:", "data": "72"}]}]},'
        ' {"field": "NUMA:", "data": null, "children": [{"field": "NUMA node(s):", "data": "9"},'
        ' {"field": "NUMA node0 CPU(s):", "data": "0-71"}, {"field": "NUMA node1 CPU(s):", "data": ""}]}]}'
    )
    c = parse_lscpu(text)
    assert c.architecture == "aarch64"
    assert c.model_name == "Neoverse-V2"
    assert c.sockets is None
    assert c.cores_per_socket == 72
    assert c.numa_cpus == {0: list(range(72)), 1: []}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "CPU(s): 4\n",  # no Architecture
        "Architecture: x86_64\n",  # no CPU(s)
        "Architecture: x86_64\nCPU(s): four\n",
        "Architecture: x86_64\nCPU(s): 4\nNUMA node0 CPU(s): 0-3,2-1\n",
        "Architecture: x86_64\nCPU(s): 4\nNUMA node0 CPU(s): 0-3\nNUMA node1 CPU(s): 3\n",
        "no colon here\n",
        '{"lscpu": 5}',
        '{"lscpu": [',
        "[1, 2]",
    ],
)
def test_lscpu_bad_input_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as e:
        parse_lscpu(text)
    assert e.value.fmt == "lscpu"


# --- ibstat -------------------------------------------------------------------------------------------------


def test_ibstat_h100_node_cas_in_lexical_order() -> None:
    r = parse_ibstat(read(IBSTAT))
    assert r.source_format is IbFormat.IBSTAT
    assert [ca.name for ca in r.cas] == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_10",
        "mlx5_11",
        "mlx5_2",
        "mlx5_3",
        "mlx5_4",
        "mlx5_5",
        "mlx5_6",
        "mlx5_7",
        "mlx5_8",
        "mlx5_9",
    ]
    assert all(len(ca.ports) == 1 for ca in r.cas)


def test_ibstat_active_ib_port_facts() -> None:
    ca = parse_ibstat(read(IBSTAT)).ca("mlx5_0")
    assert (ca.ca_type, ca.firmware, ca.node_guid) == ("MT4129", "28.39.1002", "0x946dae0300cde72c")
    p = ca.ports[0]
    assert p.port == 1
    assert p.state is PortState.ACTIVE
    assert p.phys_state is PhysState.LINK_UP
    assert p.rate_gbps == 400
    assert p.link_layer is LinkLayer.INFINIBAND
    assert (p.base_lid, p.sm_lid) == (75, 334)
    assert p.port_guid == "0x946dae0300cde72c"


def test_ibstat_down_disabled_ethernet_ports_with_rate_40() -> None:
    r = parse_ibstat(read(IBSTAT))
    down = [
        (ca.name, p.phys_state, p.rate_gbps, p.link_layer)
        for ca in r.cas
        for p in ca.ports
        if p.state is PortState.DOWN
    ]
    assert down == [
        ("mlx5_2", PhysState.DISABLED, 40, LinkLayer.ETHERNET),
        ("mlx5_7", PhysState.DISABLED, 40, LinkLayer.ETHERNET),
        ("mlx5_8", PhysState.DISABLED, 40, LinkLayer.ETHERNET),
    ]
    assert r.ca("mlx5_1").ports[0].rate_gbps == 100  # the active CX-6 Dx Ethernet port


def test_ibstat_last_ca_without_final_newline() -> None:
    text = read(IBSTAT)
    assert not text.endswith("\n")
    last = parse_ibstat(text).ca("mlx5_9").ports[0]
    assert last.link_layer is LinkLayer.INFINIBAND and last.base_lid == 771


#: ibstatus prints this shape (infiniband-diags scripts/ibstatus); a hand-made two-port example
IBSTATUS = """Infiniband device 'mlx4_0' port 1 status:
\tdefault gid:\t fe80:0000:0000:0000:0002:c903:00f0:e0e1
\tbase lid:\t 0x3
\tsm lid:\t\t 0x1
\tstate:\t\t 4: ACTIVE
\tphys state:\t 5: LinkUp
\trate:\t\t 40 Gb/sec (4X QDR)
\tlink_layer:\t InfiniBand

Infiniband device 'mlx4_0' port 2 status:
\tdefault gid:\t fe80:0000:0000:0000:0002:c903:00f0:e0e2
\tbase lid:\t 0x0
\tsm lid:\t\t 0x0
\tstate:\t\t 1: DOWN
\tphys state:\t 2: Polling
\trate:\t\t 10 Gb/sec (4X)
\tlink_layer:\t InfiniBand
"""


def test_ibstatus_format() -> None:
    r = parse_ibstat(IBSTATUS)
    assert r.source_format is IbFormat.IBSTATUS
    ports = r.ca("mlx4_0").ports
    assert [(p.port, p.state, p.phys_state, p.rate_gbps, p.base_lid) for p in ports] == [
        (1, PortState.ACTIVE, PhysState.LINK_UP, 40.0, 3),
        (2, PortState.DOWN, PhysState.POLLING, 10.0, 0),
    ]


def test_sysfs_infiniband_dump() -> None:
    text = (
        "/sys/class/infiniband/mlx5_0/hca_type:MT4129\n"
        "/sys/class/infiniband/mlx5_0/fw_ver:28.39.1002\n"
        "/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE\n"
        "/sys/class/infiniband/mlx5_0/ports/1/phys_state:5: LinkUp\n"
        "/sys/class/infiniband/mlx5_0/ports/1/rate:400 Gb/sec (4X NDR)\n"
        "/sys/class/infiniband/mlx5_0/ports/1/link_layer:InfiniBand\n"
        "/sys/class/infiniband/mlx5_0/ports/1/lid:0x4b\n"
        "/sys/class/infiniband/mlx5_1/ports/1/state:2: INIT\n"
        "/sys/class/infiniband/mlx5_1/ports/1/phys_state:5: LinkUp\n"
    )
    r = parse_ibstat(text)
    assert r.source_format is IbFormat.SYSFS
    p = r.ca("mlx5_0").ports[0]
    assert (p.state, p.rate_gbps, p.base_lid) == (PortState.ACTIVE, 400.0, 75)
    assert r.ca("mlx5_0").ca_type == "MT4129"
    assert r.ca("mlx5_1").ports[0].state is PortState.INIT


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello\n",
        "CA 'mlx5_0'\n\tPort 1:\n\t\tPhysical state: LinkUp\n",  # no State
        "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Sleepy\n",
        "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tRate: fast\n",
        "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\nCA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n",
        "CA 'mlx5_0'\n\t\tState: Active\n",  # port attribute before Port N:
        "/sys/class/infiniband/mlx5_0/ports/1/rate:400 Gb/sec\n",  # no state
    ],
)
def test_ibstat_bad_input_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as e:
        parse_ibstat(text)
    assert e.value.fmt == "ibstat"


# --- variants seen in public posts ----------------------------------------------------------------------------


def _wrap_flags(text: str, width: int, indent: str) -> str:
    """``text`` with its ``Flags:`` value cut into lines of at most ``width`` characters, each continuation
    line starting with ``indent`` (as a terminal-width-aware paste or ``fold -s`` with an indent shows it)."""
    lines = text.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith("Flags:"))
    head, value = lines[i][: lines[i].index("fpu")], lines[i][lines[i].index("fpu") :]
    chunks, cur = [], ""
    for word in value.split():
        if cur and len(cur) + 1 + len(word) > width:
            chunks.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    chunks.append(cur)
    lines[i : i + 1] = [head + chunks[0]] + [indent + c for c in chunks[1:]]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "path",
    [HOST / "lscpu_01_princeton-della-k18g3_8x-h100-node_xeon8468_interleaved-numa.txt", IDLE / "lscpu.txt"],
    ids=["della-flags-last", "h100-vm-flags-mid"],
)
@pytest.mark.parametrize("indent", [" " * 41, "\t", "  "], ids=["value-column", "tab", "two-spaces"])
def test_lscpu_wrapped_flags_continuation_lines(path: Path, indent: str) -> None:
    """The real lscpu text with its long ``Flags:`` value wrapped onto indented continuation lines: the
    continuation lines belong to ``Flags`` and the host's CPU facts are those of the unwrapped file."""
    text = read(path)
    wrapped = _wrap_flags(text, 100, indent)
    assert wrapped.count("\n") > text.count("\n") + 3
    assert parse_lscpu(wrapped) == parse_lscpu(text)


def test_lscpu_wrapped_cpu_list_joins_without_blank() -> None:
    """della's ``NUMA node0 CPU(s):`` list wrapped after a comma: the ids read as in the one-line list."""
    text = read(HOST / "lscpu_01_princeton-della-k18g3_8x-h100-node_xeon8468_interleaved-numa.txt")
    line = next(ln for ln in text.splitlines() if ln.startswith("NUMA node0 CPU(s):"))
    cut = line.index(",48,") + 1
    wrapped = text.replace(line, line[:cut] + "\n" + " " * 21 + line[cut:])
    assert wrapped != text
    assert parse_lscpu(wrapped).numa_cpus == parse_lscpu(text).numa_cpus


def test_lscpu_wrapped_vulnerability_value_with_colons() -> None:
    """h100 VM's ``Vulnerability Spectre v2:`` value wrapped where it reads ``... IBPB conditional; ...``
    with a colon-bearing continuation (``PBRSB-eIBRS: SW sequence``): still a continuation, not a field."""
    text = read(IDLE / "lscpu.txt")
    line = next(ln for ln in text.splitlines() if ln.startswith("Vulnerability Spectre v2:"))
    wrapped = line.replace("; PBRSB-eIBRS SW sequence", ";\n" + " " * 41 + "PBRSB-eIBRS: SW sequence")
    changed = text.replace(line, wrapped)
    assert changed != text
    assert parse_lscpu(changed) == parse_lscpu(text)
    fields, _ = _lscpu_fields(changed)
    assert "PBRSB-eIBRS" not in fields
    assert fields["Vulnerability Spectre v2"] == _lscpu_fields(text)[0]["Vulnerability Spectre v2"].replace(
        "; PBRSB-eIBRS SW sequence", "; PBRSB-eIBRS: SW sequence"
    )


def test_lscpu_unindented_line_without_colon_is_still_an_error() -> None:
    text = read(IDLE / "lscpu.txt").replace("Flags:", "Flags:\nnot a field\n", 1)
    with pytest.raises(ParseError) as e:
        parse_lscpu(text)
    assert e.value.expected == "'Field: value'"


def test_lscpu_continuation_before_any_field_is_an_error() -> None:
    with pytest.raises(ParseError) as e:
        parse_lscpu("    fpu vme de pse\n" + read(IDLE / "lscpu.txt"))
    assert e.value.line == 1


def test_ibstat_truncated_after_number_of_ports() -> None:
    """The real ibstat cut right before mlx5_0's ``Port 1:`` block: it says ``Number of ports: 1`` and
    lists no port. Reading ``ports: []`` would say the HCA has no port; the output is cut."""
    text = read(IBSTAT)
    cut = text[: text.index("\tPort 1:")]
    with pytest.raises(ParseError) as e:
        parse_ibstat(cut)
    assert e.value.fmt == "ibstat" and e.value.line == 1
    assert "Port 1:" in e.value.expected and "mlx5_0" in e.value.expected
    assert "Number of ports: 1" in e.value.expected


def test_ibstat_fewer_port_blocks_than_announced() -> None:
    """mlx5_4's block of the real ibstat changed to announce 2 ports: one block is missing."""
    text = read(IBSTAT)
    start = text.index("CA 'mlx5_4'")
    changed = text[:start] + text[start:].replace("Number of ports: 1", "Number of ports: 2", 1)
    with pytest.raises(ParseError) as e:
        parse_ibstat(changed)
    assert "2 port block(s)" in e.value.expected and "mlx5_4" in e.value.expected
    assert e.value.line == text[:start].count("\n") + 1


def test_ibstat_ca_cut_before_its_number_of_ports() -> None:
    text = read(IBSTAT)
    cut = text[: text.index("\tNumber of ports: 1")]
    with pytest.raises(ParseError) as e:
        parse_ibstat(cut)
    assert "'Port N:' block" in e.value.expected


def test_ibstat_bad_number_of_ports() -> None:
    with pytest.raises(ParseError) as e:
        parse_ibstat(read(IBSTAT).replace("Number of ports: 1", "Number of ports: one", 1))
    assert "Number of ports" in e.value.expected
