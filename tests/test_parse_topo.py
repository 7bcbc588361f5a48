"""``nvidia-smi topo -m`` parser on real captured outputs (tests/fixtures/topo/, described in
/work/shared/fixtures/SOURCES-topo.md) and on synthetic variants derived from them.

Every expected value in ``GOLDEN`` was read from the fixture file by eye. Synthetic inputs are built from a
real fixture by the transformation their test names (the transformations reproduce variants seen in the wild).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.topo import AffinityColumn, TopoLegend, TopoMatrix, parse_topo
from tests.test_parse_p2p import GOLDEN as P2P_GOLDEN

FIX = Path(__file__).parent / "fixtures" / "topo"

CPU, NUMA, NID = AffinityColumn.CPU, AffinityColumn.NUMA, AffinityColumn.GPU_NUMA_ID


def span(*ranges: tuple[int, int]) -> list[int]:
    """CPU ids of the inclusive ranges, e.g. span((0, 19), (40, 59)) for the cell ``0-19,40-59``."""
    return [c for lo, hi in ranges for c in range(lo, hi + 1)]


@dataclass(frozen=True)
class Golden:
    """Facts read by eye from one fixture. ``gpu`` maps a GPU to (cpu_affinity_raw, numa_affinity,
    gpu_numa_id); ``cells`` maps (row, column) to the link class printed there (after SOC -> SYS)."""

    n_gpus: int
    nics: Sequence[tuple[str, str | None]]
    cells: dict[tuple[str, str], str]
    gpu: dict[str, tuple[str | None, list[int] | None, int | None]]
    legend: TopoLegend | None
    columns: list[AffinityColumn]
    cpus: dict[str, list[int]] = field(default_factory=dict)  # expanded CPU lists checked in full


GOLDEN: dict[str, Golden] = {
    "01_dgx1-v100_8gpu-4nic_mlx5-cols_legacy-legend.txt": Golden(
        8,
        [("mlx5_2", None), ("mlx5_0", None), ("mlx5_3", None), ("mlx5_1", None)],
        {
            ("GPU0", "GPU1"): "NV1",
            ("GPU0", "GPU3"): "NV2",
            ("GPU0", "GPU5"): "SYS",
            ("GPU0", "mlx5_0"): "PIX",
            ("GPU0", "mlx5_1"): "PHB",
            ("GPU0", "mlx5_2"): "SYS",
            ("GPU4", "mlx5_2"): "PIX",
            ("GPU6", "mlx5_3"): "PIX",
            ("mlx5_2", "mlx5_3"): "PHB",
            ("mlx5_1", "mlx5_0"): "PHB",
            ("mlx5_0", "GPU1"): "PIX",
        },
        {"GPU0": ("0-19,40-59", None, None), "GPU7": ("0-19,40-59", None, None)},
        TopoLegend.MIDDLE,
        [CPU],
        {"GPU0": span((0, 19), (40, 59))},
    ),
    "02_azure-ndv2-v100_8gpu-0nic_X-left-aligned.txt": Golden(
        8,
        [],
        {
            ("GPU0", "GPU1"): "NV2",
            ("GPU0", "GPU2"): "NV1",
            ("GPU0", "GPU4"): "NODE",
            ("GPU0", "GPU6"): "NV1",
            ("GPU7", "GPU1"): "NV1",
            ("GPU5", "GPU3"): "NV2",
        },
        {"GPU0": ("0-19", [0], None), "GPU7": ("0-19", [0], None)},
        TopoLegend.MODERN,
        [CPU, NUMA],
        {"GPU3": span((0, 19))},
    ),
    "03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt": Golden(
        8,
        [("mlx5_0", "NIC0"), ("mlx5_3", "NIC1"), ("mlx5_bond_0", "NIC2")],
        {
            ("GPU0", "mlx5_0"): "PXB",
            ("GPU2", "mlx5_0"): "NODE",
            ("GPU4", "mlx5_3"): "PXB",
            ("GPU6", "mlx5_bond_0"): "NODE",
            ("GPU0", "mlx5_bond_0"): "SYS",
            ("GPU0", "GPU7"): "NV12",
            ("mlx5_3", "mlx5_bond_0"): "NODE",
            ("mlx5_bond_0", "mlx5_0"): "SYS",
        },
        {"GPU0": ("0-31,64-95", [0], None), "GPU4": ("32-63,96-127", [1], None)},
        TopoLegend.MODERN,
        [CPU, NUMA, NID],
        {"GPU4": span((32, 63), (96, 127))},
    ),
    "05_aws-p4d-a100_8gpu-0nic_nv12.txt": Golden(
        8,
        [],
        {("GPU0", "GPU1"): "NV12", ("GPU7", "GPU0"): "NV12", ("GPU3", "GPU4"): "NV12"},
        {"GPU0": ("0-23,48-71", [0], None), "GPU4": ("24-47,72-95", [1], None)},
        TopoLegend.MODERN,
        [CPU, NUMA, NID],
        {"GPU5": span((24, 47), (72, 95))},
    ),
    "06_aws-p5-h100_8gpu-0nic_nv18.txt": Golden(
        8,
        [],
        {("GPU0", "GPU1"): "NV18", ("GPU6", "GPU2"): "NV18"},
        {"GPU0": ("0-47,96-143", [0], None), "GPU7": ("48-95,144-191", [1], None)},
        TopoLegend.MODERN,
        [CPU, NUMA, NID],
    ),
    "07_aws-g6e-l40s_4gpu-0nic_node.txt": Golden(
        4,
        [],
        {("GPU0", "GPU1"): "NODE", ("GPU3", "GPU2"): "NODE"},
        {"GPU0": ("0-47", [0], None), "GPU3": ("0-47", [0], None)},
        TopoLegend.MODERN,
        [CPU, NUMA, NID],
        {"GPU1": span((0, 47))},
    ),
    "10_h100-sxm_8gpu-0nic_no-gpu-numa-id_no-legend.txt": Golden(
        8,
        [],
        {("GPU0", "GPU7"): "NV18", ("GPU5", "GPU4"): "NV18"},
        {"GPU3": ("0-51,104-155", [0], None), "GPU4": ("52-103,156-207", [1], None)},
        None,
        [CPU, NUMA],
        {"GPU4": span((52, 103), (156, 207))},
    ),
    "11_tesla-p40_8gpu-1nic_soc-legacy_tabs.txt": Golden(
        8,
        [("mlx5_0", None)],
        {
            **{(f"GPU{i}", "mlx5_0"): "SYS" for i in range(8)},  # printed SOC
            ("GPU0", "GPU1"): "PIX",
            ("GPU0", "GPU4"): "PXB",
            ("GPU7", "GPU4"): "PIX",
            ("GPU3", "GPU5"): "PXB",
            ("mlx5_0", "GPU2"): "SYS",
        },
        {"GPU0": ("0-13", None, None), "GPU7": ("0-13", None, None)},
        TopoLegend.LEGACY,
        [CPU],
        {"GPU7": span((0, 13))},
    ),
    "13_princeton-della-a100-sxm4_4gpu-1nic_nv4_tabs.txt": Golden(
        4,
        [("mlx5_0", None)],
        {
            ("GPU0", "GPU3"): "NV4",
            ("GPU0", "mlx5_0"): "NODE",
            ("GPU2", "mlx5_0"): "SYS",
            ("mlx5_0", "GPU1"): "NODE",
        },
        {"GPU0": ("0-23", [0], None), "GPU2": ("24-47", [1], None)},
        TopoLegend.MODERN,
        [CPU, NUMA],
    ),
    "15_princeton-traverse-ac922-v100_1gpu-4nic_numa-list.txt": Golden(
        1,
        [("mlx5_0", None), ("mlx5_1", None), ("mlx5_2", None), ("mlx5_3", None)],
        {
            ("GPU0", "mlx5_0"): "SYS",
            ("GPU0", "mlx5_3"): "SYS",
            ("mlx5_0", "mlx5_1"): "PIX",
            ("mlx5_2", "mlx5_3"): "PIX",
            ("mlx5_0", "mlx5_2"): "SYS",
            ("mlx5_3", "mlx5_1"): "SYS",
        },
        {"GPU0": ("0-3", [0, 8, 252, 253, 254, 255], None)},
        TopoLegend.MODERN,
        [CPU, NUMA],
        {"GPU0": [0, 1, 2, 3]},
    ),
    "16_princeton-traverse-ac922-v100_4gpu-4nic_nv3_power9_hdr-5sp.txt": Golden(
        4,
        [("mlx5_0", None), ("mlx5_1", None), ("mlx5_2", None), ("mlx5_3", None)],
        {
            ("GPU0", "GPU1"): "NV3",
            ("GPU2", "GPU3"): "NV3",
            ("GPU0", "GPU2"): "SYS",
            ("GPU0", "mlx5_0"): "NODE",
            ("GPU0", "mlx5_2"): "SYS",
            ("GPU3", "mlx5_3"): "NODE",
            ("mlx5_0", "mlx5_1"): "PIX",
            ("mlx5_1", "mlx5_2"): "SYS",
        },
        {"GPU0": ("0-63", [0], None), "GPU2": ("64-127", [8], None)},
        TopoLegend.MODERN,
        [CPU, NUMA],
        {"GPU3": span((64, 127))},
    ),
    "19_consumer-2x-rtx3090-nvlink_2gpu-0nic_ryzen5900x.txt": Golden(
        2,
        [],
        {("GPU0", "GPU1"): "NV4", ("GPU1", "GPU0"): "NV4"},
        {"GPU0": ("0-23", [0], None), "GPU1": ("0-23", [0], None)},
        TopoLegend.MODERN,
        [CPU, NUMA, NID],
    ),
    "20_workstation-3x-rtx-a6000_3gpu-0nic_nvlink-pair-plus-node.txt": Golden(
        3,
        [],
        {("GPU0", "GPU1"): "NV4", ("GPU0", "GPU2"): "NODE", ("GPU2", "GPU1"): "NODE"},
        {"GPU2": ("0-31,64-95", [0], None)},
        TopoLegend.MODERN,
        [CPU, NUMA],
    ),
    "21_h100-sxm_8gpu-9nic_sglang-env_ansi-remnants_bond.txt": Golden(
        8,
        [(f"mlx5_{10 + i}", f"NIC{i}") for i in range(8)] + [("mlx5_bond_0", "NIC8")],
        {
            ("GPU0", "mlx5_10"): "PXB",
            ("GPU0", "mlx5_11"): "NODE",
            ("GPU0", "mlx5_14"): "SYS",
            ("GPU4", "mlx5_14"): "PXB",
            ("GPU7", "mlx5_17"): "PXB",
            ("GPU0", "mlx5_bond_0"): "SYS",
            ("GPU4", "mlx5_bond_0"): "NODE",
            ("mlx5_10", "mlx5_11"): "NODE",
            ("GPU3", "GPU5"): "NV18",
        },
        {"GPU0": ("0-63,128-191", [0], None), "GPU4": ("64-127,192-255", [1], None)},
        TopoLegend.MODERN,
        [CPU, NUMA, NID],
        {"GPU7": span((64, 127), (192, 255))},
    ),
    "23_gb200-tray_4gpu-8nic_numa-list_openshift.txt": Golden(
        4,
        [(f"mlx5_{i}", f"NIC{i}") for i in range(8)],
        {
            ("GPU0", "GPU3"): "NV18",
            ("GPU0", "mlx5_0"): "SYS",
            ("GPU3", "mlx5_7"): "SYS",
            ("mlx5_2", "mlx5_3"): "PIX",
            ("mlx5_6", "mlx5_7"): "PIX",
            ("mlx5_0", "mlx5_1"): "SYS",
        },
        {"GPU0": ("0-71", [0, *range(2, 18)], None), "GPU2": ("72-143", [1, *range(18, 34)], None)},
        TopoLegend.MODERN,
        [CPU, NUMA, NID],
    ),
    "24_aws-eks-single-gpu_1gpu-0nic_no-legend_tabs.txt": Golden(
        1, [], {}, {"GPU0": ("0-31", [0], None)}, None, [CPU, NUMA, NID], {"GPU0": span((0, 31))}
    ),
    "25_pcie-4gpu_phb_0nic_litgpt-test_no-final-newline.txt": Golden(
        4,
        [],
        {("GPU0", "GPU1"): "PHB", ("GPU3", "GPU0"): "PHB", ("GPU1", "GPU2"): "PHB"},
        {"GPU0": ("0-47", [0], None)},
        TopoLegend.MODERN,
        [CPU, NUMA, NID],
    ),
    "27_tesla-k80_4gpu-mlx4_soc-legacy_cgroup-affinity_legend-deindented.txt": Golden(
        4,
        [("mlx4_0", None)],
        {
            ("GPU0", "GPU1"): "PIX",
            ("GPU0", "GPU2"): "SYS",
            ("GPU2", "GPU3"): "PIX",
            ("GPU2", "mlx4_0"): "PHB",
            ("GPU0", "mlx4_0"): "SYS",
            ("mlx4_0", "GPU1"): "SYS",
        },
        {"GPU0": ("0-3", None, None), "GPU3": ("0-3", None, None)},
        TopoLegend.LEGACY,
        [CPU],
        {"GPU2": [0, 1, 2, 3]},
    ),
    "90_h100-vm-1gpu_topo-m_real-esc-ansi.txt": Golden(
        1, [], {}, {"GPU0": ("0-15", [0], None)}, TopoLegend.MODERN, [CPU, NUMA, NID], {"GPU0": span((0, 15))}
    ),
}


def read(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def load(name: str) -> TopoMatrix:
    return parse_topo(read(name))


# ----------------------------------------------------------------------------------------------------
# real fixtures


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_real_fixture_matches_golden(name: str) -> None:
    g = GOLDEN[name]
    topo = load(name)
    assert topo.gpu_names == [f"GPU{i}" for i in range(g.n_gpus)]
    assert [(n.name, n.label) for n in topo.nics] == list(g.nics)
    for (a, b), cell in g.cells.items():
        assert topo.link(a, b) == cell, (a, b)
    gpus = {x.name: x for x in topo.gpus}
    for name_, (cpu_raw, numa, nid) in g.gpu.items():
        got = gpus[name_]
        assert (got.cpu_affinity_raw, got.numa_affinity, got.gpu_numa_id) == (cpu_raw, numa, nid), name_
    for name_, cpus in g.cpus.items():
        assert gpus[name_].cpu_affinity == cpus
    assert topo.legend == g.legend
    assert topo.columns == g.columns
    assert topo.warnings == []


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_matrix_is_square_and_self_cells_omitted(name: str) -> None:
    topo = load(name)
    devices = topo.gpu_names + topo.nic_names
    assert set(topo.links) == set(devices)
    for a in devices:
        assert set(topo.links[a]) == set(devices) - {a}
        assert topo.link(a, a) == "X"


def test_soc_is_normalised_to_sys_and_sys_count_matches_file() -> None:
    # 11: the file prints SOC in the 8 GPU->mlx5_0 cells and the 8 mlx5_0->GPU cells, nowhere else
    name = "11_tesla-p40_8gpu-1nic_soc-legacy_tabs.txt"
    assert read(name).count("SOC\t") + read(name).count("\tSOC\n") >= 16
    topo = load(name)
    cells = [c for row in topo.links.values() for c in row.values()]
    assert cells.count("SYS") == 16
    assert "SOC" not in json.dumps(topo.model_dump(mode="json")["links"])


def test_json_contract_of_parse_topo() -> None:
    dump = json.loads(load("03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt").model_dump_json())
    gpu4 = dump["gpus"][4]
    assert (gpu4["name"], gpu4["numa_affinity"], gpu4["gpu_numa_id"]) == ("GPU4", [1], None)
    assert gpu4["cpu_affinity"] == span((32, 63), (96, 127))
    assert dump["nics"] == [
        {"name": "mlx5_0", "label": "NIC0"},
        {"name": "mlx5_3", "label": "NIC1"},
        {"name": "mlx5_bond_0", "label": "NIC2"},
    ]
    assert dump["links"]["GPU0"]["GPU1"] == "NV12"
    assert dump["links"]["GPU0"]["mlx5_0"] == "PXB"
    assert dump["links"]["mlx5_bond_0"]["GPU6"] == "NODE"
    assert dump["legend"] == "modern"
    assert TopoMatrix.model_validate_json(json.dumps(dump)) == load(
        "03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt"
    )


def test_golden_coverage_every_fixture_has_an_expectation() -> None:
    """Every file in tests/fixtures/topo/ has a golden (here or in test_parse_p2p), every golden a file."""
    on_disk = {p.name for p in FIX.iterdir() if p.is_file() and p.name != "README.md"}
    expected = set(GOLDEN) | set(P2P_GOLDEN)
    assert on_disk - expected == set(), "fixtures without a golden expectation"
    assert expected - on_disk == set(), "goldens without a fixture file"


# ----------------------------------------------------------------------------------------------------
# synthetic variants: each is a real fixture put through the transformation the test names


TAB_FIXTURES = [n for n in sorted(GOLDEN) if "\t" in read(n)]


@pytest.mark.parametrize("name", TAB_FIXTURES)
def test_synthetic_tabs_expanded_to_spaces_parse_the_same(name: str) -> None:
    # what a copy through a terminal or a markdown editor does:
    # a 7-character cell then sits one space from the next
    assert parse_topo(read(name).expandtabs(8)) == load(name)


def test_synthetic_header_separators_lost() -> None:
    name = "21_h100-sxm_8gpu-9nic_sglang-env_ansi-remnants_bond.txt"
    lines = read(name).split("\n")
    lines[0] = lines[0].replace("\t", "")  # "[4mGPU0GPU1...NIC8CPU AffinityNUMA AffinityGPU NUMA ID[0m"
    assert lines[0].startswith("[4mGPU0GPU1GPU2")
    assert parse_topo("\n".join(lines)) == load(name)


def test_synthetic_header_mixed_single_spaces() -> None:
    name = "01_dgx1-v100_8gpu-4nic_mlx5-cols_legacy-legend.txt"
    lines = read(name).split("\n")
    lines[0] = " ".join(lines[0].split())  # "GPU0 GPU1 ... mlx5_1 CPU Affinity"
    assert parse_topo("\n".join(lines)) == load(name)


@pytest.mark.parametrize("lead", ["", " " * 5, " " * 8, "\t"])
def test_synthetic_header_leading_whitespace_variants(lead: str) -> None:
    name = "13_princeton-della-a100-sxm4_4gpu-1nic_nv4_tabs.txt"
    lines = read(name).split("\n")
    lines[0] = lead + lines[0].lstrip()
    assert parse_topo("\n".join(lines)) == load(name)


def test_synthetic_ansi_with_and_without_esc() -> None:
    real_esc = "90_h100-vm-1gpu_topo-m_real-esc-ansi.txt"
    assert "\x1b[4m" in read(real_esc)
    assert parse_topo(read(real_esc).replace("\x1b", "")) == load(real_esc)
    remnant = "21_h100-sxm_8gpu-9nic_sglang-env_ansi-remnants_bond.txt"
    assert "\x1b" not in read(remnant)
    assert parse_topo(read(remnant).replace("[4m", "\x1b[4m").replace("[0m", "\x1b[0m")) == load(remnant)


@pytest.mark.parametrize("self_cell", ["X", "X ", " X", " X "])
def test_synthetic_self_cell_variants(self_cell: str) -> None:
    name = "13_princeton-della-a100-sxm4_4gpu-1nic_nv4_tabs.txt"
    assert parse_topo(read(name).replace("\t X ", "\t" + self_cell)) == load(name)


def test_synthetic_crlf_and_no_final_newline() -> None:
    name = "13_princeton-della-a100-sxm4_4gpu-1nic_nv4_tabs.txt"
    assert parse_topo(read(name).replace("\n", "\r\n")) == load(name)
    # cut before the legend: the text then ends with the NIC row "mlx5_0 ... X \t\t" and no newline
    cut = read(name).split("\nLegend:")[0].rstrip("\n")
    assert cut.endswith("\t X \t\t")
    topo = parse_topo(cut)
    assert topo.links == load(name).links and topo.legend is None


def test_synthetic_bare_single_gpu_no_legend_tabs() -> None:
    # SOURCES-topo 24: single GPU, raw tabs, legend cut: the whole output is two lines
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-31\t0\t\tN/A\n"
    topo = parse_topo(text)
    assert topo.gpu_names == ["GPU0"] and topo.links == {"GPU0": {}}
    assert (topo.gpus[0].cpu_affinity, topo.gpus[0].numa_affinity, topo.gpus[0].gpu_numa_id) == (
        span((0, 31)),
        [0],
        None,
    )


def test_synthetic_mlx5_ib_renamed_devices() -> None:
    name = "15_princeton-traverse-ac922-v100_1gpu-4nic_numa-list.txt"
    topo = parse_topo(read(name).replace("mlx5_3", "mlx5_ib3"))
    assert topo.nic_names == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_ib3"]
    assert topo.link("mlx5_2", "mlx5_ib3") == "PIX" and topo.link("GPU0", "mlx5_ib3") == "SYS"


def _synthetic_18_nics(shuffle_seed: int) -> tuple[str, list[str]]:
    """2 GPUs (NV4 pair, as in fixture 19) and 18 NICs NIC0..NIC17 in raw-tab layout; GPU0's NIC cells PIX for
    NIC0, SYS for the others; the NIC Legend names them mlx5_0..mlx5_15, mlx5_ib3, mlx5_bond_0, in shuffled
    order."""
    nics = [f"NIC{i}" for i in range(18)]
    devs = [f"mlx5_{i}" for i in range(16)] + ["mlx5_ib3", "mlx5_bond_0"]
    labels = ["GPU0", "GPU1", *nics]

    def cell(a: str, b: str) -> str:
        if a == b:
            return " X "
        if {a, b} == {"GPU0", "GPU1"}:
            return "NV4"
        if {a, b} == {"GPU0", "NIC0"}:
            return "PIX"
        return "SYS"

    lines = ["\t" + "\t".join(labels) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for a in labels:
        tail = "\t0-23\t0\t\tN/A" if a.startswith("GPU") else "\t\t\t\t"
        lines.append(a + "\t" + "\t".join(cell(a, b) for b in labels) + tail)
    legend = [f"  {n}: {d}" for n, d in zip(nics, devs, strict=True)]
    random.Random(shuffle_seed).shuffle(legend)
    return "\n".join([*lines, "", "Legend:", "", "  X    = Self", "", "NIC Legend:", "", *legend, ""]), devs


def test_synthetic_18_nics_with_shuffled_legend() -> None:
    text, devs = _synthetic_18_nics(7)
    order = [ln.split(":")[0].strip() for ln in text.split("NIC Legend:")[1].split("\n") if ln.strip()]
    assert sorted(order) == sorted(f"NIC{i}" for i in range(18)) and order != sorted(order)
    topo = parse_topo(text)
    assert [(n.name, n.label) for n in topo.nics] == [(d, f"NIC{i}") for i, d in enumerate(devs)]
    assert topo.link("GPU0", "mlx5_0") == "PIX" and topo.link("GPU1", "mlx5_bond_0") == "SYS"
    assert topo.link("mlx5_ib3", "mlx5_bond_0") == "SYS"
    assert topo.legend is None  # only the "X = Self" line survives: too little to tell the generation


def test_synthetic_16_gpus_two_digit_labels() -> None:
    # a DGX-2-shaped matrix (16 GPUs, NV6 all-to-all through NVSwitch) in the layout of 05, tabs expanded;
    # GPU10..GPU15 are 5-character labels, so the expanded cells sit 3 spaces from the next
    names = [f"GPU{i}" for i in range(16)]
    head = "\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    rows = [
        a
        + "\t"
        + "\t".join(" X " if a == b else "NV6" for b in names)
        + ("\t0-23\t0\t\tN/A" if i < 8 else "\t24-47\t1\t\tN/A")
        for i, a in enumerate(names)
    ]
    topo = parse_topo("\n".join([head, *rows]).expandtabs(8))
    assert topo.gpu_names == names
    assert topo.link("GPU15", "GPU10") == "NV6" and topo.link("GPU1", "GPU11") == "NV6"
    assert [g.numa_affinity for g in topo.gpus] == [[0]] * 8 + [[1]] * 8
    assert topo.gpus[12].cpu_affinity == span((24, 47))


def test_synthetic_empty_cpu_affinity_cgroup_spaces() -> None:
    # 05 with the CPU Affinity cells blanked (same width): a job whose cgroup hides the affinity
    name = "05_aws-p4d-a100_8gpu-0nic_nv12.txt"
    text = re.sub(r"(0-23,48-71|24-47,72-95)", lambda m: " " * len(m.group(1)), read(name))
    topo = parse_topo(text)
    assert [g.cpu_affinity for g in topo.gpus] == [[]] * 8
    assert [g.cpu_affinity_raw for g in topo.gpus] == [None] * 8
    assert [g.numa_affinity for g in topo.gpus] == [[0]] * 4 + [[1]] * 4
    assert len(topo.warnings) == 8  # the right-alignment assumption is visible
    assert topo.warnings[0] == "GPU0: 2 affinity cells for 3 columns; assumed empty: CPU Affinity"


def test_synthetic_empty_cpu_affinity_cgroup_tabs() -> None:
    name = "19_consumer-2x-rtx3090-nvlink_2gpu-0nic_ryzen5900x.txt"
    topo = parse_topo(read(name).replace("\t0-23\t", "\t\t"))
    assert [(g.cpu_affinity, g.cpu_affinity_raw, g.numa_affinity) for g in topo.gpus] == [([], None, [0])] * 2
    assert topo.warnings == []  # tab positions say which cell is empty: nothing assumed


def test_synthetic_na_cpu_affinity() -> None:
    name = "07_aws-g6e-l40s_4gpu-0nic_node.txt"
    topo = parse_topo(read(name).replace("0-47", "N/A "))
    assert [(g.cpu_affinity, g.cpu_affinity_raw, g.numa_affinity) for g in topo.gpus] == [
        ([], "N/A", [0])
    ] * 4


def test_synthetic_numeric_gpu_numa_id() -> None:
    # 23 (GB200) with GPU NUMA IDs filled in, as on setups that expose GPU memory as NUMA nodes
    name = "23_gb200-tray_4gpu-8nic_numa-list_openshift.txt"
    ids = iter(["2  ", "10 ", "18 ", "26 "])
    text = re.sub(r"N/A", lambda _: next(ids), read(name))
    assert [g.gpu_numa_id for g in parse_topo(text).gpus] == [2, 10, 18, 26]


@pytest.mark.parametrize(
    ("cut_before", "legend"),
    [
        ("  SYS", None),
        ("  PHB", None),
        ("  PXB", None),
        ("  PIX", TopoLegend.MODERN),
        ("  NV#", TopoLegend.MODERN),
    ],
)
def test_synthetic_legend_cut_short(cut_before: str, legend: TopoLegend | None) -> None:
    # modern (03) cut after the X, SYS, NODE or PHB line: those lines are the same in the middle legend
    text = read("03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt").split("NIC Legend")[0]
    assert parse_topo(text.split("\n" + cut_before)[0]).legend == legend


def test_synthetic_middle_legend_cut_after_pxb() -> None:
    text = read("01_dgx1-v100_8gpu-4nic_mlx5-cols_legacy-legend.txt")
    assert parse_topo(text.split("\n  PIX")[0]).legend == TopoLegend.MIDDLE
    assert parse_topo(text.split("\n  PXB")[0]).legend is None


def test_synthetic_nic_labels_without_nic_legend_warn() -> None:
    name = "03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt"
    topo = parse_topo(read(name).split("NIC Legend:")[0])
    assert [(n.name, n.label) for n in topo.nics] == [("NIC0", "NIC0"), ("NIC1", "NIC1"), ("NIC2", "NIC2")]
    assert len(topo.warnings) == 3 and "NIC0" in topo.warnings[0]


def test_synthetic_asymmetric_matrix_is_a_warning() -> None:
    name = "05_aws-p4d-a100_8gpu-0nic_nv12.txt"
    lines = read(name).split("\n")
    lines[1] = lines[1].replace("NV12", "NV6 ", 1)  # GPU0 -> GPU1 only
    topo = parse_topo("\n".join(lines))
    assert topo.link("GPU0", "GPU1") == "NV6" and topo.link("GPU1", "GPU0") == "NV12"
    assert topo.warnings == ["asymmetric: GPU0->GPU1 NV6 but GPU1->GPU0 NV12"]


# ----------------------------------------------------------------------------------------------------
# bad input: one ParseError naming the format, the line and what was expected


def _err(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_topo(text)
    assert info.value.fmt == "topo"
    return info.value


def test_empty_and_legend_only_inputs() -> None:
    assert _err("").line is None
    legend = read("25_pcie-4gpu_phb_0nic_litgpt-test_no-final-newline.txt").split("\n\nLegend:")[1]
    assert _err("Legend:" + legend).line is None


def test_row_missing_a_cell() -> None:
    lines = read("05_aws-p4d-a100_8gpu-0nic_nv12.txt").split("\n")
    lines[4] = lines[4].replace("NV12    ", "", 1)  # GPU3 row loses one cell
    e = _err("\n".join(lines))
    assert e.line == 5 and "link" in e.expected


def test_unknown_link_class() -> None:
    text = read("07_aws-g6e-l40s_4gpu-0nic_node.txt").replace("NODE     X", "PCIE     X", 1)
    e = _err(text)
    assert e.line == 3 and "link class" in e.expected and e.detail == "PCIE"


def test_self_cell_off_the_diagonal() -> None:
    lines = read("07_aws-g6e-l40s_4gpu-0nic_node.txt").split("\n")
    lines[2] = lines[2].replace("NODE", "X   ", 1)  # GPU1 row: X in column 1 and 2
    assert _err("\n".join(lines)).line == 3


def test_header_not_naming_the_rows() -> None:
    lines = read("07_aws-g6e-l40s_4gpu-0nic_node.txt").split("\n")
    lines[0] = lines[0].replace("GPU3", "GPU9")
    e = _err("\n".join(lines))
    assert e.line == 1 and "header" in e.expected


def test_row_cut_out_of_the_matrix() -> None:
    lines = read("03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt").split("\n")
    del lines[4]  # GPU3
    e = _err("\n".join(lines))
    assert e.line == 2 and "10 link cells" in e.expected  # GPU0 now has 11 link cells for 10 rows


def test_truncated_row() -> None:
    lines = read("13_princeton-della-a100-sxm4_4gpu-1nic_nv4_tabs.txt").split("\n")
    e = _err("\n".join(lines[:5]) + "\n" + lines[5][:14])  # "mlx5_0\tNODE\tNO"
    assert e.line == 6 and "5 link cells" in e.expected
    e = _err("\n".join(lines[:3]) + "\n" + lines[3][:14])  # cut inside GPU2: 3 rows, GPU0 has 5 cells
    assert e.line == 2 and "3 link cells" in e.expected


@pytest.mark.parametrize("bad", ["0-x", "31-0", "0-99999999"])
def test_bad_cpu_list(bad: str) -> None:
    e = _err(read("07_aws-g6e-l40s_4gpu-0nic_node.txt").replace("0-47", bad, 1))
    assert e.line == 2 and e.detail == bad


def test_bad_gpu_numa_id() -> None:
    e = _err(read("07_aws-g6e-l40s_4gpu-0nic_node.txt").replace("N/A", "abc", 1))
    assert e.line == 2 and "GPU NUMA ID" in e.expected


def test_nic_row_with_affinity_cells() -> None:
    text = read("13_princeton-della-a100-sxm4_4gpu-1nic_nv4_tabs.txt").replace("\t X \t\t", "\t X \t0-23\t0")
    assert _err(text).line == 6


def test_gpu_row_after_nic_rows() -> None:
    text = (
        "\tGPU0\tmlx5_0\tGPU1\tCPU Affinity\n"
        "GPU0\t X \tSYS\tNV4\t0-3\n"
        "mlx5_0\tSYS\t X \tSYS\n"
        "GPU1\tNV4\tSYS\t X \t0-3\n"
    )
    e = _err(text)
    assert e.line == 3 and "GPU rows" in e.expected


def test_conflicting_nic_legend() -> None:
    text = read("03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt") + "  NIC0: mlx5_9\n"
    e = _err(text)
    assert e.line == text.count("\n") and "NIC0" in e.expected


def test_second_matrix_block_after_a_gap() -> None:
    lines = read("07_aws-g6e-l40s_4gpu-0nic_node.txt").split("\n")
    lines.insert(3, "")  # GPU0, GPU1 | blank | GPU2, GPU3
    e = _err("\n".join(lines))
    assert e.line == 5 and "contiguous" in e.expected
