"""Screening schedules: round-robin (circle method), quick screen, localisation steps."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetdx.orchestrator.preflight.schedules import localisation_round_bound, quick_screen, round_robin, split_round


def hosts(n: int) -> list[str]:
    return [f"node{i:03d}" for i in range(n)]


@given(st.integers(min_value=2, max_value=40))
def test_round_robin_meets_every_pair_exactly_once_in_disjoint_rounds(n: int) -> None:
    rounds = round_robin(hosts(n))
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [frozenset(p) for rnd in rounds for p in rnd]
    assert len(seen) == len(set(seen)) == n * (n - 1) // 2
    assert set(seen) == {frozenset(p) for p in itertools.combinations(hosts(n), 2)}
    for rnd in rounds:
        members = [h for p in rnd for h in p]
        assert len(members) == len(set(members))  # disjoint: the pairs of a round can run at once
        assert len(rnd) == n // 2


def test_round_robin_four_nodes_is_the_textbook_schedule() -> None:
    assert round_robin(["a", "b", "c", "d"]) == [
        [("a", "d"), ("b", "c")],
        [("a", "c"), ("d", "b")],
        [("a", "b"), ("c", "d")],
    ]


def test_round_robin_rejects_duplicates_and_handles_tiny() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        round_robin(["a", "b", "a"])
    assert round_robin(["a"]) == []


@given(st.integers(min_value=2, max_value=101))
def test_quick_screen_measures_every_node_once(n: int) -> None:
    groups = quick_screen(hosts(n))
    members = [h for g in groups for h in g]
    assert sorted(members) == hosts(n)
    assert len(groups) == n // 2
    assert all(len(g) == 2 for g in groups[:-1])
    assert len(groups[-1]) == (3 if n % 2 else 2)


def test_split_round_halves_sets_and_pads_singles_with_distinct_good_nodes() -> None:
    rounds = split_round([["a", "b"], ["c", "d", "e"]], good=["g1", "g2", "g3", "g4"])
    assert rounds == [[("c", "d"), ("a", "g1"), ("b", "g2"), ("e", "g3")]]


def test_split_round_uses_extra_rounds_when_good_nodes_run_out() -> None:
    rounds = split_round([["a", "b"], ["c", "d"]], good=["g1"])
    assert [len(r) for r in rounds] == [1, 1, 1, 1]
    for rnd in rounds:
        members = [h for g in rnd for h in g]
        assert len(members) == len(set(members))


def test_split_round_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ValueError, match="good"):
        split_round([["a", "b"]], good=[])
    with pytest.raises(ValueError, match="overlap"):
        split_round([["a", "b"], ["b", "c"]], good=["g"])


def test_localisation_bound() -> None:
    assert localisation_round_bound(1024) == 12
    assert localisation_round_bound(4) == 4
    assert localisation_round_bound(5) == math.ceil(math.log2(5)) + 2
