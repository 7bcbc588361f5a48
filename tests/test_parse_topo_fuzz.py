"""Property-based tests of the ``topo -m`` and ``topo -p2p`` parsers on mutated real fixtures.

Properties:
1. Whatever the input (cut lines, truncation, dropped columns, binary garbage, random text), the parsers
   either return a model or raise ``ParseError``; no other exception escapes.
2. Re-spacing a real fixture (every run of blanks inside a line replaced by another run of spaces and tabs)
   does not change what is parsed: the whitespace variants seen in the wild are all read the same.

Hypothesis runs derandomized (fixed seed per test) so the suite is deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.p2p import parse_p2p
from fleetdx.probes.parsers.topo import parse_topo
from tests.test_parse_p2p import GOLDEN as P2P_GOLDEN
from tests.test_parse_topo import GOLDEN as TOPO_GOLDEN

FIX = Path(__file__).parent / "fixtures" / "topo"
TOPO_TEXTS = [(FIX / n).read_text(encoding="utf-8") for n in sorted(TOPO_GOLDEN)]
P2P_TEXTS = [(FIX / n).read_text(encoding="utf-8") for n in sorted(P2P_GOLDEN)]

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PARSERS: list[Callable[[str], object]] = [parse_topo, parse_p2p]
BLANKS = st.text(alphabet=" \t", min_size=1, max_size=9)
GARBAGE = st.one_of(
    st.binary(max_size=64).map(lambda b: b.decode("latin-1")),
    st.text(max_size=32),
    st.sampled_from(
        ["\x1b[4m", "[0m", "X", " X ", "SOC", "NV", "N/A", "\t\t", "GPU0", "NIC0: ", "0-", ",", "\x00"]
    ),
)


def survives(parse: Callable[[str], object], text: str) -> None:
    """Property 1: a model or a ParseError, nothing else."""
    try:
        parse(text)
    except ParseError as e:
        assert e.fmt in ("topo", "p2p")
        assert e.line is None or e.line >= 1


@st.composite
def cut_lines(draw: st.DrawFn, texts: list[str]) -> str:
    lines = draw(st.sampled_from(texts)).split("\n")
    keep = draw(st.lists(st.booleans(), min_size=len(lines), max_size=len(lines)))
    return "\n".join(ln for ln, k in zip(lines, keep, strict=True) if k)


@st.composite
def truncated(draw: st.DrawFn, texts: list[str]) -> str:
    text = draw(st.sampled_from(texts))
    return text[: draw(st.integers(0, len(text)))]


@st.composite
def dropped_column(draw: st.DrawFn, texts: list[str]) -> str:
    """Remove the k-th whitespace-separated token of every line (or of one line)."""
    lines = draw(st.sampled_from(texts)).split("\n")
    k = draw(st.integers(0, 20))
    only = draw(st.one_of(st.none(), st.integers(0, len(lines) - 1)))
    out = []
    for i, ln in enumerate(lines):
        toks = list(re.finditer(r"\S+", ln))
        if k < len(toks) and (only is None or only == i):
            m = toks[k]
            ln = ln[: m.start()] + ln[m.end() :]
        out.append(ln)
    return "\n".join(out)


@st.composite
def with_garbage(draw: st.DrawFn, texts: list[str]) -> str:
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:pos] + draw(GARBAGE) + text[pos:]
        else:
            text = text[:pos] + text[pos + draw(st.integers(1, 8)) :]
    return text


@st.composite
def respaced(draw: st.DrawFn, texts: list[str]) -> tuple[str, str]:
    """(original, copy with every in-line blank run replaced by a random non-empty run of spaces/tabs)."""
    text = draw(st.sampled_from(texts))
    parts = re.split(r"([ \t]+)", text)
    out = [draw(BLANKS) if i % 2 else p for i, p in enumerate(parts)]
    return text, "".join(out)


@pytest.mark.parametrize("parse", PARSERS, ids=["topo", "p2p"])
@FUZZ
@given(data=st.data())
def test_mutated_fixtures_raise_only_parse_error(parse: Callable[[str], object], data: st.DataObject) -> None:
    texts = TOPO_TEXTS + P2P_TEXTS
    strategy = st.one_of(cut_lines(texts), truncated(texts), dropped_column(texts), with_garbage(texts))
    survives(parse, data.draw(strategy))


@pytest.mark.parametrize("parse", PARSERS, ids=["topo", "p2p"])
@FUZZ
@given(text=st.one_of(st.text(max_size=400), st.binary(max_size=400).map(lambda b: b.decode("latin-1"))))
def test_arbitrary_text_raises_only_parse_error(parse: Callable[[str], object], text: str) -> None:
    survives(parse, text)


@FUZZ
@given(pair=respaced(TOPO_TEXTS))
def test_topo_respacing_does_not_change_the_parse(pair: tuple[str, str]) -> None:
    original, spaced = pair
    assert parse_topo(spaced) == parse_topo(original)


@FUZZ
@given(pair=respaced(P2P_TEXTS))
def test_p2p_respacing_does_not_change_the_parse(pair: tuple[str, str]) -> None:
    original, spaced = pair
    assert parse_p2p(spaced) == parse_p2p(original)


def test_some_mutations_do_fail() -> None:
    """The fuzz properties would pass for a parser accepting everything; these mutations must be refused."""
    text = TOPO_TEXTS[0]
    lines = text.split("\n")
    for bad in (
        "\n".join(lines[:1] + lines[2:]),
        text.replace("NV1", "NVx", 1),
        text[: text.index("GPU3    NV2") + 20],
    ):
        with pytest.raises(ParseError):
            parse_topo(bad)
