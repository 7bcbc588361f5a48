"""Slurm node parsers on real captures (tests/fixtures/placement/README.md says how they were made), and
fuzzing: any input gives nodes or a ParseError, never another exception."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.slurm_nodes import SCONTROL_FMT, SINFO_FMT, parse_scontrol_nodes, parse_sinfo_nodes
from fleetdx.topology.cluster import parse_topology_conf

PLACE = Path(__file__).parent / "fixtures" / "placement"
SCONTROL = (PLACE / "scontrol_show_node.txt").read_text(encoding="utf-8")
SCONTROL_O = (PLACE / "scontrol_show_node_-o.txt").read_text(encoding="utf-8")
SINFO = (PLACE / "sinfo_-N_-h_-o_fleetdx.txt").read_text(encoding="utf-8")
DETAILS = (PLACE / "scontrol_show_node_-d.txt").read_text(encoding="utf-8")
DETAILS_O = (PLACE / "scontrol_show_node_-d_-o.txt").read_text(encoding="utf-8")

#: read off the captures by eye
EXPECTED = {
    "gpu01": ("IDLE", [], ["gpu"], 8, None, True),
    "gpu02": ("IDLE", ["DRAIN"], ["gpu"], 8, "GPU_ECC_UNCORRECTABLE on GPU3 (fleetdx)", False),
    "gpu03": ("MIXED", ["DRAIN"], ["gpu"], 8, "maintenance window", False),
    "gpu04": ("MIXED", [], ["gpu"], 8, None, True),
    "gpu05": ("ALLOCATED", [], ["gpu", "debug"], 8, None, False),
    "gpu06": ("DOWN", [], ["gpu", "debug"], 8, "NODE_UNREACHABLE", False),
}


@pytest.mark.parametrize(
    "text, parse",
    [
        (SCONTROL, parse_scontrol_nodes),
        (SCONTROL_O, parse_scontrol_nodes),
        (DETAILS, parse_scontrol_nodes),
        (DETAILS_O, parse_scontrol_nodes),
        (SINFO, parse_sinfo_nodes),
    ],
    ids=["scontrol", "scontrol-o", "scontrol-d", "scontrol-d-o", "sinfo"],
)
def test_captured_states(text: str, parse) -> None:  # type: ignore[no-untyped-def]
    nodes = parse(text)
    got = {n.name: (n.state, n.flags, n.partitions, n.gpus, n.reason, n.usable) for n in nodes}
    assert got == EXPECTED


@pytest.mark.parametrize("text", [DETAILS, DETAILS_O], ids=["-d", "-d-o"])
def test_gres_used_from_details(text: str) -> None:
    n = {x.name: x for x in parse_scontrol_nodes(text)}
    assert (n["gpu04"].gpus_used, n["gpu04"].gpus_free) == (2, 6)  # its job asked --gpus-per-node=2
    assert (n["gpu01"].gpus_used, n["gpu01"].gpus_free) == (0, 8)
    assert {x.gpus_used for x in parse_scontrol_nodes(SCONTROL)} == {None}  # without -d: unknown, not 0


def test_scontrol_reason_drops_user_and_time_and_keeps_raw_state() -> None:
    n = {x.name: x for x in parse_scontrol_nodes(SCONTROL)}
    assert n["gpu02"].raw_state == "IDLE+DRAIN"
    assert n["gpu02"].why_unusable() == "Slurm state IDLE+DRAIN (reason: GPU_ECC_UNCORRECTABLE on GPU3 (fleetdx))"
    assert n["gpu01"].why_unusable() is None


@pytest.mark.parametrize(
    "state, usable",
    [("idle", True), ("mixed", True), ("idle~", False), ("down*", False), ("idle*", False), ("mixed-", False),
     ("drained", False), ("draining", False), ("completing", True), ("idle+cloud", True), ("reserved", False),
     ("allocated", False), ("fail", False), ("planned", False), ("idle$", False)],
)
def test_sinfo_state_codes(state: str, usable: bool) -> None:
    (n,) = parse_sinfo_nodes(f"gpu01|gpu*|{state}|gpu:h100:8(S:0-1)|none\n")
    assert n.usable is usable and n.gpus == 8


def test_scontrol_not_responding_star() -> None:
    (n,) = parse_scontrol_nodes("NodeName=a State=IDLE* Partitions=p Gres=gpu:4\n")
    assert n.state == "IDLE" and n.flags == ["NOT_RESPONDING"] and not n.usable and n.gpus == 4


@pytest.mark.parametrize(
    "text",
    ["", "No nodes in the system\n", "   CPUAlloc=0\n", "NodeName=a Arch=x\n", "NodeName=a State=??\n",
     "NodeName=a State=IDLE\nNodeName=a State=IDLE\n"],
)
def test_scontrol_bad_input(text: str) -> None:
    with pytest.raises(ParseError) as e:
        parse_scontrol_nodes(text)
    assert e.value.fmt == SCONTROL_FMT


@pytest.mark.parametrize(
    "text", ["", "gpu01 idle\n", "gpu01|p|idle|gpu:8|none\ngpu01|q|down|gpu:8|x\n", "a|p|!!|x|y\n"]
)
def test_sinfo_bad_input(text: str) -> None:
    with pytest.raises(ParseError) as e:
        parse_sinfo_nodes(text)
    assert e.value.fmt == SINFO_FMT


def test_scontrol_show_topology_is_read_as_its_leaves() -> None:
    t = parse_topology_conf((PLACE / "scontrol_show_topology.txt").read_text(encoding="utf-8"))
    assert {s.name: s.nodes for s in t.switches} == {
        "leaf1": ["gpu01", "gpu02", "gpu03"], "leaf2": ["gpu04", "gpu05", "gpu06"], "spine": []
    }
    assert [s.switches for s in t.switches if s.name == "spine"] == [["leaf1", "leaf2"]]


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _only_parse_error(parse, fmt: str, text: str) -> None:  # type: ignore[no-untyped-def]
    try:
        parse(text)
    except ParseError as e:
        assert e.fmt == fmt


@FUZZ
@given(st.data())
def test_fuzz_mutated_captures(data: st.DataObject) -> None:
    for text, parse, fmt in ((SCONTROL, parse_scontrol_nodes, SCONTROL_FMT), (SINFO, parse_sinfo_nodes, SINFO_FMT)):
        lines = text.splitlines()
        i = data.draw(st.integers(0, len(lines) - 1))
        junk = data.draw(st.text(max_size=40))
        cut = data.draw(st.integers(0, len(lines[i])))
        lines[i] = lines[i][:cut] + junk
        _only_parse_error(parse, fmt, "\n".join(lines))


@FUZZ
@given(st.text(max_size=300))
def test_fuzz_any_text(text: str) -> None:
    _only_parse_error(parse_scontrol_nodes, SCONTROL_FMT, text)
    _only_parse_error(parse_sinfo_nodes, SINFO_FMT, text)
