"""Real GPU captures: ``tests/fixtures/traces/train_ddp.py --device cuda`` run on a lent single-H100 machine
(torch 2.11+cu130, NCCL 2.28.9), one fault at a time, profiled with CUDA activity and timed by the StepTimer with
CUDA events. fleetdx names the injected stage (and rank) from the trace and from the StepTimer log alike. The
expected figures were read from the files (``fleetdx steps DIR/... --json``) and agree with what each fault
injects: a 60 ms sleep in one rank's data loader, a 16384 x 4096 fp32 batch (256 MiB) copied from pageable
memory, 100 Linear(2, 2) layers on a batch of 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.steps.analyze import diagnose
from fleetdx.orchestrator.steps.run import load_ranks

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
    assert [(f.subject, f.details["stage"]) for f in stragglers] == [("rank 2", "data")]
    if pattern.endswith(".jsonl"):
        # under DDP the StepTimer sees the peers' wait for the all-reduce at the end of backward (164 ms on the
        # peers against 97 ms on rank 2). Not asserted on the trace: four processes time-slice one GPU there, so
        # the peers' backward kernels (run side by side) last longer than rank 2's (run alone while they wait)
        assert stragglers[0].details["peers_wait_stage"] == "backward"
        assert "the other ranks wait for it in backward" in stragglers[0].message


def test_gpu_timeline_stages_of_the_trace_agree_with_the_step_timers_cuda_events() -> None:
    """The same H100 run seen twice: the trace's GPU-timeline partition (forward/backward kernels by the stage
    that launched them, the GPU's idle time by what the host did) and the StepTimer's CUDA events give the same
    stages within 1.5 ms (medians: data 60.2/60.5, h2d 15.7/16.0, forward 11.6/11.7, backward 16.4/16.6). The
    host view, kept beside, is what the training thread saw: launches only (forward 0.8 ms)."""
    from fleetdx.orchestrator.steps.analyze import stage_medians

    (trace,) = _load("h100-nccl1-slow-data", "rank-*.json.gz")
    (timer,) = _load("h100-nccl1-slow-data", "steps-rank-*.jsonl")
    t, s = stage_medians(trace), stage_medians(timer)
    for stage in ("data", "h2d", "forward", "backward", "optimizer"):
        assert abs(t[stage] - s[stage]) < 1.5, (stage, t[stage], s[stage])
    assert t["other"] < 3.0
    host = sorted(st.host_stages_ms["forward"] for st in trace.steps if st.host_stages_ms)[len(trace.steps) // 2]
    assert host < 2.0
    for st in trace.steps:
        assert abs(sum(st.stages_ms.values()) - st.step_ms) < 0.01
