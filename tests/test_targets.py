"""fleetdx.orchestrator.scheduler.targets: hostlists and expected GPU counts from the CLI and the Slurm environment."""

from __future__ import annotations

import pytest

from fleetdx.orchestrator.scheduler.targets import TargetSource, expand_hostlist, expected_gpus, resolve_targets
from fleetdx.probes.errors import ConfigError


def test_expand_slurm_hostlist_keeps_order_and_zero_padding() -> None:
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]


def test_expand_drops_duplicates() -> None:
    assert expand_hostlist("n[1-2],n1") == ["n1", "n2"]


@pytest.mark.parametrize("bad", ["gpu[01-", "", "  "])
def test_bad_hostlist_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError):
        expand_hostlist(bad)


def test_cli_nodes_win_over_slurm() -> None:
    t = resolve_targets("a[1-2]", None, {"SLURM_JOB_NODELIST": "b[1-4]"})
    assert (t.hosts, t.source) == (["a1", "a2"], TargetSource.CLI)


def test_slurm_nodelist_when_no_cli_nodes() -> None:
    t = resolve_targets(None, None, {"SLURM_JOB_NODELIST": "b[1-3]"})
    assert (t.hosts, t.source) == (["b1", "b2", "b3"], TargetSource.SLURM)


def test_ray_cluster_when_nothing_names_nodes() -> None:
    t = resolve_targets(None, None, {})
    assert t.hosts is None and t.source is TargetSource.RAY


def test_expected_gpus_order_cli_then_on_node_then_per_node() -> None:
    env = {"SLURM_GPUS_ON_NODE": "4", "SLURM_GPUS_PER_NODE": "h100:8"}
    assert expected_gpus(2, env) == (2, "--gpus-per-node")
    assert expected_gpus(None, env) == (4, "SLURM_GPUS_ON_NODE")
    assert expected_gpus(None, {"SLURM_GPUS_PER_NODE": "h100:8"}) == (8, "SLURM_GPUS_PER_NODE")
    assert expected_gpus(None, {}) == (None, None)


@pytest.mark.parametrize("value", ["h100:", "eight", "4(x2)"])
def test_malformed_slurm_gpu_count_is_an_error(value: str) -> None:
    with pytest.raises(ConfigError):
        expected_gpus(None, {"SLURM_GPUS_PER_NODE": value})


def test_negative_gpus_per_node_rejected() -> None:
    with pytest.raises(ConfigError):
        expected_gpus(-1, {})
