"""Link classes, ranking and the nominal bandwidth table."""

from __future__ import annotations

import pytest

from fleetdx.topology.links import (
    GpuGeneration,
    Link,
    LinkKind,
    generation_of,
    link_from_rank,
    link_rank,
    nominal_gbps,
    nominal_table,
    parse_link,
)


def test_parse_link_reads_nvlink_count_and_soc_as_sys() -> None:
    assert parse_link("NV18") == Link(LinkKind.NV, 18)
    assert parse_link("SOC") == Link(LinkKind.SYS)
    assert str(parse_link("PXB")) == "PXB"
    with pytest.raises(ValueError):
        parse_link("X")


def test_rank_follows_the_legend_order_best_to_worst() -> None:
    order = ["NV18", "NV12", "NV2", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS"]
    ranks = [link_rank(parse_link(c)) for c in order]
    assert ranks == sorted(ranks, reverse=True)
    assert len(set(ranks)) == len(ranks)
    for c in order:
        assert str(link_from_rank(link_rank(parse_link(c)))) == c


def test_remote_is_node_and_sys_only() -> None:
    assert [c for c in ["NV1", "PIX", "PXB", "PHB", "NODE", "SYS"] if parse_link(c).remote] == ["NODE", "SYS"]


def test_generation_of_product_names() -> None:
    assert generation_of("NVIDIA H100 80GB HBM3") is GpuGeneration.HOPPER
    assert generation_of("NVIDIA A100-SXM4-80GB") is GpuGeneration.AMPERE_GA100
    assert generation_of("NVIDIA RTX A6000") is GpuGeneration.AMPERE_GA102
    assert generation_of("Tesla V100-SXM2-32GB") is GpuGeneration.VOLTA
    assert generation_of("Tesla P40") is GpuGeneration.PASCAL_PCIE
    assert generation_of("NVIDIA B200") is GpuGeneration.BLACKWELL
    assert generation_of("NVIDIA L40S") is GpuGeneration.ADA
    assert generation_of("Some Future GPU") is None
    assert generation_of(None) is None


def test_nominal_bandwidth_from_the_whitepapers() -> None:
    # H100: 18 links, 900 GB/s bidirectional -> 450 GB/s per direction
    assert nominal_gbps(parse_link("NV18"), GpuGeneration.HOPPER) == 450.0
    # A100: 12 links, 600 GB/s bidirectional -> 300 per direction
    assert nominal_gbps(parse_link("NV12"), GpuGeneration.AMPERE_GA100) == 300.0
    # RTX A6000 bridge: 112.5 GB/s bidirectional over NV4 -> 56.25 per direction
    assert nominal_gbps(parse_link("NV4"), GpuGeneration.AMPERE_GA102) == 56.25
    # PCIe Gen5 x16 and Gen3 x16 per direction
    assert nominal_gbps(parse_link("PXB"), GpuGeneration.HOPPER) == 63.0
    assert nominal_gbps(parse_link("SYS"), GpuGeneration.VOLTA) == 15.75
    # SYS bounded by the SMP link when known
    assert nominal_gbps(parse_link("SYS"), GpuGeneration.HOPPER, smp_gbps=32.0) == 32.0


def test_nominal_bandwidth_is_none_rather_than_a_guess() -> None:
    assert nominal_gbps(parse_link("NV18"), None) is None
    assert nominal_gbps(parse_link("NV2"), GpuGeneration.PASCAL_PCIE) is None  # P40 has no NVLink


def test_nominal_table_per_class_of_one_node() -> None:
    cells = ["NV12", "PXB", "SOC", "NV12", "NODE"]
    assert nominal_table(cells, GpuGeneration.AMPERE_GA100) == {
        "NV12": 300.0,
        "PXB": 31.5,
        "NODE": 31.5,
        "SYS": 31.5,
    }
    assert nominal_table(cells, None) == {}
