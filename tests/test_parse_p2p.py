"""``nvidia-smi topo -p2p r`` parser on real captured outputs (tests/fixtures/topo/8x, 91; see
/work/shared/fixtures/SOURCES-topo.md and hosts/README.md). Expected values were read from the files by eye;
synthetic inputs are real fixtures put through the transformation their test names."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.p2p import P2PMatrix, P2PStatus, parse_p2p

FIX = Path(__file__).parent / "fixtures" / "topo"

LEGEND_7 = {
    "X": "Self",
    "OK": "Status Ok",
    "CNS": "Chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "Topology not supported",
    "NS": "Not supported",
    "U": "Unknown",
}


@dataclass(frozen=True)
class Golden:
    gpus: int
    cells: dict[tuple[str, str], str]
    n_not_ok: int  # ordered pairs whose status is not OK
    legend: dict[str, str]


GOLDEN: dict[str, Golden] = {
    "80_p2p-r_h100-8gpu_all-OK.txt": Golden(8, {("GPU0", "GPU1"): "OK", ("GPU7", "GPU6"): "OK"}, 0, LEGEND_7),
    "81_p2p-r_2x-l4_CNS_no-legend.txt": Golden(2, {("GPU0", "GPU1"): "CNS", ("GPU1", "GPU0"): "CNS"}, 2, {}),
    "91_h100-vm-1gpu_p2p-r_real-esc-ansi.txt": Golden(1, {}, 0, LEGEND_7),
}


def read(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_real_fixture_matches_golden(name: str) -> None:
    g = GOLDEN[name]
    m = parse_p2p(read(name))
    assert m.gpus == [f"GPU{i}" for i in range(g.gpus)]
    assert set(m.status) == set(m.gpus)
    assert all(set(row) == set(m.gpus) - {a} for a, row in m.status.items())
    for (a, b), code in g.cells.items():
        assert m.status[a][b] == code
    assert len(m.unsupported_pairs) == g.n_not_ok
    assert m.legend == g.legend
    assert m.warnings == []


def test_supported_and_json_shape() -> None:
    m = parse_p2p(read("81_p2p-r_2x-l4_CNS_no-legend.txt"))
    assert not m.supported("GPU0", "GPU1")
    assert m.unsupported_pairs == [("GPU0", "GPU1", "CNS"), ("GPU1", "GPU0", "CNS")]
    assert parse_p2p(read("80_p2p-r_h100-8gpu_all-OK.txt")).supported("GPU3", "GPU5")
    assert P2PMatrix.model_validate_json(m.model_dump_json()) == m
    assert m.model_dump(mode="json")["status"] == {"GPU0": {"GPU1": "CNS"}, "GPU1": {"GPU0": "CNS"}}


@pytest.mark.parametrize("code", [s.value for s in P2PStatus])
def test_synthetic_every_legend_code(code: str) -> None:
    # 81 with the CNS cells replaced by each code of the legend printed in 80
    m = parse_p2p(read("81_p2p-r_2x-l4_CNS_no-legend.txt").replace("CNS", code))
    assert m.status["GPU0"]["GPU1"] == code


def test_synthetic_code_defined_only_by_the_legend_is_accepted() -> None:
    text = (
        read("80_p2p-r_h100-8gpu_all-OK.txt").replace("OK      X", "DR      X", 1)
        + "  DR   = Disabled by regkey\n"
    )
    m = parse_p2p(text)
    assert m.status["GPU1"]["GPU0"] == "DR" and m.legend["DR"] == "Disabled by regkey"
    assert m.warnings == ["asymmetric: GPU0->GPU1 OK but GPU1->GPU0 DR"]


def test_synthetic_legend_cut_and_tabs_expanded() -> None:
    text = read("80_p2p-r_h100-8gpu_all-OK.txt")
    cut = text.split("  CNS")[0]  # legend cut after "OK = Status Ok"
    assert parse_p2p(cut).legend == {"X": "Self", "OK": "Status Ok"}
    real = read("91_h100-vm-1gpu_p2p-r_real-esc-ansi.txt")
    assert parse_p2p(real.expandtabs(8).replace("\x1b", "")) == parse_p2p(real)


def _err(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_p2p(text)
    assert info.value.fmt == "p2p"
    return info.value


def test_undefined_code_is_an_error() -> None:
    e = _err(read("81_p2p-r_2x-l4_CNS_no-legend.txt").replace("CNS", "ZZ", 1))
    assert e.line == 2 and e.detail == "ZZ"


def test_bad_inputs() -> None:
    assert _err("").line is None
    lines = read("80_p2p-r_h100-8gpu_all-OK.txt").split("\n")
    assert _err("\n".join(lines[:1] + lines[2:])).line == 1  # GPU0 row cut: header names 8, rows 7
    short = list(lines)
    short[3] = short[3].rsplit("OK", 1)[0]
    assert _err("\n".join(short)).line == 4
    swapped = list(lines)
    swapped[2] = swapped[2].replace("X       OK", "OK      X ", 1)
    assert _err("\n".join(swapped)).line == 3
