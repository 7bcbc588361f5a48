"""Fuzz the GPU parsers on mutations of the real fixtures: each call returns a model or raises ParseError,
never anything else (no IndexError, ValueError, KeyError, RecursionError, ...)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.microbench import parse_microbench
from fleetdx.probes.parsers.smi_csv import parse_smi_csv
from fleetdx.probes.parsers.smi_xml import parse_smi_xml
from fleetdx.probes.parsers.xid import parse_xid

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
XML = [(HOSTS / b / "nvidia-smi_-q_-x.xml").read_text() for b in ("h100-vm-idle", "h100-vm-busy")]
CSV = [p.read_text() for p in sorted(HOSTS.glob("*/*.csv"))]
JSON = [p.read_text() for p in sorted(HOSTS.glob("*/torch_microbench.json"))]
XID = [
    (HOSTS / "h100-vm-idle" / "dmesg_nvrm.txt").read_text(),
    "[ 1843.308145] NVRM: Xid (PCI:0000:44:00): 79, pid=2961, name=python3, GPU has fallen off the bus.\n",
]

FUZZ = settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def mutated(draw: st.DrawFn, texts: list[str]) -> str:
    text = draw(st.sampled_from(texts))
    kind = draw(st.sampled_from(["cut-lines", "truncate", "whitespace", "drop-column", "garbage", "swap"]))
    lines = text.splitlines(keepends=True)
    if kind == "cut-lines" and lines:
        drop = draw(st.sets(st.integers(0, len(lines) - 1), max_size=max(1, len(lines) // 3)))
        return "".join(ln for i, ln in enumerate(lines) if i not in drop)
    if kind == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if kind == "whitespace":
        ws = draw(st.sampled_from([" ", "  ", "\t", "", "\r\n", " \n "]))
        return text.replace(" ", ws) if draw(st.booleans()) else text.replace("\n", ws)
    if kind == "drop-column":
        k = draw(st.integers(0, 20))
        header_only = draw(st.booleans())
        out = []
        for i, ln in enumerate(lines):
            cells = ln.rstrip("\n").split(", ")
            if (i == 0 or not header_only) and k < len(cells):
                del cells[k]
            out.append(", ".join(cells) + "\n")
        return "".join(out)
    if kind == "garbage":
        blob = draw(st.binary(min_size=1, max_size=64)).decode("latin-1")
        at = draw(st.integers(0, len(text)))
        return text[:at] + blob + text[at:]
    # swap two characters' worth of structure: replace one printable char by another anywhere
    if not text:
        return text
    at = draw(st.integers(0, len(text) - 1))
    return text[:at] + draw(st.sampled_from(list('<>/,:[]x0 -"{}'))) + text[at + 1 :]


def _only_parse_error(parser: Callable[[str], object], text: str) -> None:
    try:
        parser(text)
    except ParseError:
        pass


@FUZZ
@given(mutated(XML))
def test_fuzz_smi_xml(text: str) -> None:
    _only_parse_error(parse_smi_xml, text)


@FUZZ
@given(mutated(CSV))
def test_fuzz_smi_csv(text: str) -> None:
    _only_parse_error(parse_smi_csv, text)


@FUZZ
@given(mutated(JSON))
def test_fuzz_microbench(text: str) -> None:
    _only_parse_error(parse_microbench, text)


@FUZZ
@given(mutated(XID))
def test_fuzz_xid(text: str) -> None:
    _only_parse_error(parse_xid, text)


@pytest.mark.parametrize(
    "payload",
    [
        '<?xml version="1.0"?><!DOCTYPE x SYSTEM "file:///etc/passwd"><nvidia_smi_log/>',
        '<!DOCTYPE nvidia_smi_log [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><nvidia_smi_log>&xxe;</nvidia_smi_log>',
        "<nvidia_smi_log>" * 5000,
    ],
)
def test_hostile_xml(payload: str) -> None:
    """An external DTD is never fetched (expat does not load it), entity declarations are refused, and deep
    nesting ends as a ParseError or an empty report, never a crash."""
    _only_parse_error(parse_smi_xml, payload)


def test_truncated_xml_is_parse_error_not_partial_report() -> None:
    """A cut-off document must never read as a smaller healthy node."""
    text = XML[1]
    cut = text.index("</processes>")
    with pytest.raises(ParseError):
        parse_smi_xml(text[:cut])
