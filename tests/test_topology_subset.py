"""The best k-GPU subset is exact: checked against brute force over itertools.combinations."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetdx.topology.subset import SubsetError, best_subset
from tests.topology_util import check_against_brute_force as check
from tests.topology_util import make_topo, random_topo, uniform


@pytest.mark.parametrize("seed", range(40))
def test_matches_brute_force_on_random_matrices_up_to_10_gpus(seed: int) -> None:
    rng = random.Random(seed)
    check(random_topo(rng, rng.randint(1, 10), rng.randint(0, 4)))


@pytest.mark.parametrize("seed", range(2))
def test_matches_brute_force_on_random_16_gpu_matrices(seed: int) -> None:
    rng = random.Random(1000 + seed)
    check(random_topo(rng, 16, rng.randint(0, 8)))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 8), nics=st.integers(0, 3))
def test_matches_brute_force_hypothesis(seed: int, n: int, nics: int) -> None:
    check(random_topo(random.Random(seed), n, nics))


def test_nvlinked_pair_wins_on_a_bridged_workstation() -> None:
    choice = best_subset(make_topo(["X NODE NV4", "NODE X NODE", "NV4 NODE X"]), 2)
    assert choice.gpus == ["GPU0", "GPU2"] and choice.min_link == "NV4" and choice.ties == 0


def test_all_to_all_nvswitch_any_four_are_equally_good() -> None:
    choice = best_subset(make_topo(uniform(8, "NV18")), 4)
    assert choice.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert choice.min_link == "NV18"
    assert choice.ties == 70 - 1  # C(8,4) subsets, all equal


def test_nic_locality_breaks_link_ties() -> None:
    cols = ["SYS", "SYS", "PIX", "PIX"]
    choice = best_subset(make_topo(uniform(4, "NV4"), nic_cols=cols, nic_names=["mlx5_0"]), 2)
    assert choice.gpus == ["GPU2", "GPU3"] and choice.nic_links == ["PIX", "PIX"]


def test_k_out_of_range() -> None:
    with pytest.raises(SubsetError):
        best_subset(make_topo(uniform(2, "NV4")), 3)
    with pytest.raises(SubsetError):
        best_subset(make_topo(uniform(2, "NV4")), 0)
