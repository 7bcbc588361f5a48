"""Real GPU captures: ``tests/fixtures/traces/train_ddp.py --device cuda`` run on a lent single-H100 machine
(torch 2.11+cu130, NCCL 2.28.9), one fault at a time, profiled with CUDA activity and timed by the StepTimer with
CUDA events. fleetdx names the injected stage (and rank) from the trace and from the StepTimer log alike. The
expected figures were read from the files (``fleetdx steps DIR/... --json``) and agree with what each fault
injects: a 60 ms sleep in one rank's data loader, a 16384 x 4096 fp32 batch (256 MiB) copied from pageable
memory, 100 Linear(2, 2) layers on a batch of 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.steps.analyze import diagnose
from fleetdx.orchestrator.steps.run import load_ranks
from fleetdx.probes.contracts import FindingCode

FIX = Path(__file__).parent / "fixtures" / "traces"
BOTH = ("rank-*.json.gz", "steps-rank-*.jsonl")


def _load(run: str, pattern: str):  # type: ignore[no-untyped-def]
    loaded = load_ranks(sorted((FIX / run).glob(pattern)))
    assert loaded.errors == []
    return loaded.ranks


@pytest.mark.parametrize("pattern", BOTH)
def test_one_rank_nccl_slow_data_loader_is_data_bound(pattern: str) -> None:
    (rank,) = ranks = _load("h100-nccl1-slow-data", pattern)
    codes = {f.code for f in diagnose(ranks)}
    assert FindingCode.STEP_DATA_BOUND in codes and FindingCode.STEP_STRAGGLER_RANK not in codes
    data = sorted(s.stages_ms["data"] for s in rank.steps)[len(rank.steps) // 2]
    assert 59.0 <= data <= 70.0  # the 60 ms sleep


@pytest.mark.parametrize("pattern", BOTH)
def test_one_rank_nccl_pageable_copy_is_h2d_bound(pattern: str) -> None:
    findings = diagnose(_load("h100-nccl1-h2d", pattern))
    (h2d,) = [f for f in findings if f.code is FindingCode.STEP_H2D_BOUND]
    assert [f.code for f in findings] == [FindingCode.STEP_H2D_BOUND]
    assert "90." in h2d.message or "91." in h2d.message  # 33.2 of 36.5 ms (trace), 33.6 of 36.8 (StepTimer)


def test_tiny_kernels_on_an_h100_are_launch_bound_from_the_trace() -> None:
    (rank,) = ranks = _load("h100-nccl1-tiny-ops", "rank-*.json.gz")
    assert [f.code for f in diagnose(ranks)] == [FindingCode.STEP_LAUNCH_BOUND]
    assert rank.temporal is not None and rank.kernels is not None
    assert rank.temporal.idle_us / rank.temporal.kernel_us > 0.9  # the GPU idles 96% of the time
    assert rank.kernels.tiny_pct == 100.0


def test_the_step_timer_alone_cannot_see_launch_overhead() -> None:
    """No kernel statistics in a StepTimer log: tiny ops are not called launch-bound from it (nor anything else)."""
    assert diagnose(_load("h100-nccl1-tiny-ops", "steps-rank-*.jsonl")) == []


@pytest.mark.parametrize("pattern", BOTH)
def test_four_ranks_sharing_the_gpu_name_the_slow_data_loader_rank(pattern: str) -> None:
    ranks = _load("h100-gloo4-slow-data-rank2", pattern)
    assert [r.rank for r in ranks] == [0, 1, 2, 3]
    stragglers = [f for f in diagnose(ranks) if f.code is FindingCode.STEP_STRAGGLER_RANK]
    assert [(f.subject, f.evidence["stage"]) for f in stragglers] == [("rank 2", "data")]
    # where the peers wait for it: the gloo all-reduce in the trace; under DDP the StepTimer sees that wait at
    # the end of backward (164 ms on the peers against 97 ms on rank 2)
    wait = "grad_sync" if pattern.endswith(".gz") else "backward"
    assert stragglers[0].evidence["peers_wait_stage"] == wait
    assert f"the other ranks wait for it in {wait}" in stragglers[0].message
