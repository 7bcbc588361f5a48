"""Property tests of the numactl, lscpu and ibstat parsers on mangled real outputs.

Whatever the damage (lines cut, whitespace changed, tokens dropped, binary garbage) a parser returns a model
or raises ParseError, nothing else; damage that keeps the meaning (whitespace, indentation) gives the same
facts.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.ibstat import parse_ibstat
from fleetdx.probes.parsers.lscpu import parse_lscpu
from fleetdx.probes.parsers.numactl import parse_numactl

FIX = Path(__file__).parent / "fixtures"
HOST = FIX / "host"
IDLE = FIX / "hosts" / "h100-vm-idle"

CASES: list[tuple[str, Callable[[str], BaseModel], Path]] = [
    ("numactl", parse_numactl, HOST / "numactl-H_01_princeton-della-i16g1_2node_distance32.txt"),
    ("numactl", parse_numactl, HOST / "numactl-H_02_princeton-adroit-h11g2_2node_interleaved-cpus.txt"),
    ("numactl", parse_numactl, HOST / "numactl-hardware_03_asus-esc8000a-e12_genoa_2node.txt"),
    ("numactl", parse_numactl, IDLE / "numactl_-H.txt"),
    (
        "lscpu",
        parse_lscpu,
        HOST / "lscpu_01_princeton-della-k18g3_8x-h100-node_xeon8468_interleaved-numa.txt",
    ),
    ("lscpu", parse_lscpu, IDLE / "lscpu.txt"),
    ("lscpu", parse_lscpu, IDLE / "lscpu_-J.json"),
    (
        "ibstat",
        parse_ibstat,
        HOST / "ibstat_01_h100-node_8x-cx7-ib-400_4x-cx6dx-eth_some-down_gpud-testdata.txt",
    ),
]
IDS = [f"{k}-{p.name[:30]}" for k, _, p in CASES]
FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _model_or_parse_error(parser: Callable[[str], BaseModel], fmt: str, text: str) -> BaseModel | None:
    try:
        return parser(text)
    except ParseError as e:
        assert e.fmt == fmt
        return None


@pytest.mark.parametrize("fmt, parser, path", CASES, ids=IDS)
@FUZZ
@given(data=st.data())
def test_cut_lines(fmt: str, parser: Callable[[str], BaseModel], path: Path, data: st.DataObject) -> None:
    lines = path.read_text().splitlines(keepends=True)
    drop = data.draw(st.sets(st.integers(0, len(lines) - 1), min_size=1, max_size=4))
    _model_or_parse_error(parser, fmt, "".join(ln for i, ln in enumerate(lines) if i not in drop))


@pytest.mark.parametrize("fmt, parser, path", CASES, ids=IDS)
@FUZZ
@given(data=st.data())
def test_truncated_anywhere(
    fmt: str, parser: Callable[[str], BaseModel], path: Path, data: st.DataObject
) -> None:
    text = path.read_text()
    _model_or_parse_error(parser, fmt, text[: data.draw(st.integers(0, len(text)))])


@pytest.mark.parametrize("fmt, parser, path", CASES, ids=IDS)
@FUZZ
@given(data=st.data())
def test_dropped_token(fmt: str, parser: Callable[[str], BaseModel], path: Path, data: st.DataObject) -> None:
    lines = path.read_text().splitlines()
    i = data.draw(st.integers(0, len(lines) - 1))
    toks = lines[i].split()
    if toks:
        del toks[data.draw(st.integers(0, len(toks) - 1))]
        lines[i] = " ".join(toks)
    _model_or_parse_error(parser, fmt, "\n".join(lines))


@pytest.mark.parametrize(
    "fmt, parser", [("numactl", parse_numactl), ("lscpu", parse_lscpu), ("ibstat", parse_ibstat)]
)
@FUZZ
@given(blob=st.binary(max_size=400))
def test_binary_garbage(fmt: str, parser: Callable[[str], BaseModel], blob: bytes) -> None:
    _model_or_parse_error(parser, fmt, blob.decode("utf-8", errors="replace"))


@pytest.mark.parametrize(
    "fmt, parser", [("numactl", parse_numactl), ("lscpu", parse_lscpu), ("ibstat", parse_ibstat)]
)
@FUZZ
@given(text=st.text(alphabet=st.sampled_from(list("0123456789 :\t\n-,()'/abcdeNnodeCAPort")), max_size=300))
def test_format_shaped_noise(fmt: str, parser: Callable[[str], BaseModel], text: str) -> None:
    _model_or_parse_error(parser, fmt, text)


_WS = st.text(alphabet=st.sampled_from([" ", "\t"]), min_size=1, max_size=4)


def _respace(text: str, pattern: str, data: st.DataObject) -> str:
    """Replace each whitespace run matched by ``pattern`` with drawn blanks (tabs/spaces, at least one),
    cycling through a few drawn runs (one draw per match would make the examples needlessly slow)."""
    runs = itertools.cycle(data.draw(st.lists(_WS, min_size=1, max_size=7)))
    return re.sub(pattern, lambda _m: next(runs), text)


@pytest.mark.parametrize("path", [p for k, _, p in CASES if k == "numactl"], ids=lambda p: p.name[:30])
@FUZZ
@given(data=st.data())
def test_numactl_whitespace_between_tokens_does_not_matter(path: Path, data: st.DataObject) -> None:
    text = path.read_text()
    mangled = _respace(text, r"[ \t]+", data)
    assert parse_numactl(mangled) == parse_numactl(text)


@FUZZ
@given(data=st.data())
def test_ibstat_indentation_does_not_matter(data: st.DataObject) -> None:
    text = CASES[-1][2].read_text()
    mangled = _respace(text, r"(?m)^\t+", data)
    assert parse_ibstat(mangled) == parse_ibstat(text)


@pytest.mark.parametrize(
    "path", [p for k, _, p in CASES if k == "lscpu" and p.suffix == ".txt"], ids=lambda p: p.name[:30]
)
@FUZZ
@given(data=st.data())
def test_lscpu_spacing_after_colon_does_not_matter(path: Path, data: st.DataObject) -> None:
    text = path.read_text()
    mangled = _respace(text, r"(?m)(?<=:)[ \t]+", data)
    assert parse_lscpu(mangled) == parse_lscpu(text)


@FUZZ
@given(data=st.data())
def test_ibstat_cut_at_a_ca_boundary_keeps_a_prefix_of_the_cas(data: st.DataObject) -> None:
    text = CASES[-1][2].read_text()
    starts = [m.start() for m in re.finditer(r"(?m)^CA '", text)]
    cut = data.draw(st.sampled_from(starts[1:]))
    full, part = parse_ibstat(text), parse_ibstat(text[:cut])
    assert [c.name for c in part.cas] == [c.name for c in full.cas][: len(part.cas)]
    assert part.cas == full.cas[: len(part.cas)]
