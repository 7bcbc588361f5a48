"""Step decomposition and diagnosis on real traces: the CPU gloo DDP runs captured on the dev machine (one fault
at a time, see tests/fixtures/traces/README.md) must name the injected stage and rank, and nothing on the clean
run; the HTA A100 traces decompose; the StepTimer logs of the same runs feed the same analysis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.steps.analyze import diagnose, report
from fleetdx.orchestrator.steps.contracts import RankSteps, Stage, StepSample, StepsError
from fleetdx.orchestrator.steps.decompose import decompose_steplog, decompose_trace, rank_hint
from fleetdx.orchestrator.steps.load import load_steplog, load_trace
from fleetdx.probes.contracts import Severity
from fleetdx.probes.parsers.kineto import parse_kineto_bytes

FIX = Path(__file__).parent / "fixtures" / "traces"


def _traces(folder: str) -> list[RankSteps]:
    return [decompose_trace(load_trace(p)) for p in sorted((FIX / folder).glob("rank-*.json.gz"))]


def _logs(folder: str) -> list[RankSteps]:
    return [decompose_steplog(load_steplog(p)) for p in sorted((FIX / folder).glob("steps-rank-*.jsonl"))]


def _codes(findings: list[Finding]) -> list[FindingCode]:
    return [f.code for f in findings]


@pytest.mark.parametrize("load", [_traces, _logs], ids=["trace", "steptimer"])
def test_clean_run_has_no_finding(load: object) -> None:
    ranks = load("cpu-gloo-clean")  # type: ignore[operator]
    assert sorted(r.rank for r in ranks) == [0, 1, 2, 3]
    assert diagnose(ranks) == []


@pytest.mark.parametrize("load", [_traces, _logs], ids=["trace", "steptimer"])
def test_slow_data_loader_on_rank_2_is_named_with_its_stage_and_host(load: object) -> None:
    ranks = load("cpu-gloo-slow-data-rank2")  # type: ignore[operator]
    findings = diagnose(ranks)
    assert _codes(findings) == [FindingCode.STEP_STRAGGLER_RANK]
    (f,) = findings
    assert f.subject == "rank 2" and f.details["stage"] == "data" and f.nodes == ["vm"]
    assert 55 <= float(f.details["stage_ms"]) <= 70  # type: ignore[arg-type]  # the injected 60 ms sleep per batch
    assert f.severity is Severity.WARNING


def test_slow_rank_peers_wait_in_grad_sync_and_the_job_is_not_called_comm_bound() -> None:
    ranks = _traces("cpu-gloo-slow-data-rank2")
    (f,) = diagnose(ranks)
    assert float(f.details["peers_grad_sync_median_ms"]) > 2 * float(f.details["rank_grad_sync_median_ms"])  # type: ignore[arg-type]


def test_tiny_ops_run_is_launch_bound_on_every_rank_with_no_straggler() -> None:
    ranks = _traces("cpu-gloo-tiny-ops")
    findings = diagnose(ranks)
    codes = _codes(findings)
    assert FindingCode.STEP_LAUNCH_BOUND in codes
    assert FindingCode.STEP_STRAGGLER_RANK not in codes
    assert FindingCode.STEP_DATA_BOUND not in codes
    launch = next(f for f in findings if f.code is FindingCode.STEP_LAUNCH_BOUND)
    assert launch.subject == "job" and "forward and backward" in launch.message
    assert float(launch.details["cpu_ops_per_ms"]) > 25  # type: ignore[arg-type]
    # the clean run's dispatch rate, for contrast, is far below the threshold
    clean = _traces("cpu-gloo-clean")
    assert all(r.cpu_ops is not None and r.cpu_ops.per_step / min(s.step_ms for s in r.steps) < 10 for r in clean)


def test_stages_partition_each_step() -> None:
    for rs in _traces("cpu-gloo-clean") + _traces("hta-a100-2rank-nccl"):
        for s in rs.steps:
            assert abs(sum(s.stages_ms.values()) - s.step_ms) < 0.01
            assert all(v >= 0 for v in s.stages_ms.values())


def test_a100_trace_stages_and_gpu_view() -> None:
    (rs,) = _traces("hta-a100-2rank-nccl")
    assert [s.step for s in rs.steps] == [4, 5, 6]
    s = rs.steps[0]
    # DDP forward, autograd backward and SGD.step are all marked in this trace; no DataLoader (synthetic input)
    assert s.stages_ms["forward"] > 50 and s.stages_ms["backward"] > 50 and s.stages_ms["optimizer"] > 5
    assert s.stages_ms["data"] == 0
    assert s.gpu is not None and s.gpu.kernels == 900 and s.gpu.comm_ms > 0
    assert 0 <= s.gpu.comm_exposed_ms <= s.gpu.comm_ms
    assert rs.kernels is not None and rs.kernels.count == 2700


def test_a100_16rank_trace_is_launch_bound() -> None:
    """HTA's 16-rank A100 trace: 88% of its 6,080 kernels are under 10 us and the GPU idles 69% of the time."""
    findings = diagnose(_traces("hta-a100-16rank"))
    assert _codes(findings) == [FindingCode.STEP_LAUNCH_BOUND]


def test_two_ranks_are_too_few_to_name_a_straggler() -> None:
    ranks = _traces("hta-sampled-128rank")
    assert FindingCode.STEP_STRAGGLER_RANK not in _codes(diagnose(ranks))


def _synthetic(rank: int, step_ms: list[float], data_ms: float = 1.0, host: str | None = None) -> RankSteps:
    steps = [
        StepSample(
            step=i,
            step_ms=t,
            stages_ms={
                "data": data_ms,
                "forward": t / 3,
                "backward": t / 3,
                "grad_sync": 0.0,
                "other": t / 3 - data_ms,
            },
        )
        for i, t in enumerate(step_ms)
    ]
    return RankSteps(rank=rank, host=host, source="synthesised", input="steptimer", timing="wall", steps=steps)


def test_bursty_needs_repeated_robust_spikes() -> None:
    calm = [100.0] * 18 + [120.0, 95.0]
    spiky = [100.0] * 16 + [400.0, 100.0, 420.0, 100.0]
    assert diagnose([_synthetic(0, calm)]) == []
    (f,) = diagnose([_synthetic(0, spiky)])
    assert f.code is FindingCode.STEP_BURSTY and f.details["spike_steps"] == {"0": "16,18"}
    one_spike = [100.0] * 19 + [400.0]
    assert diagnose([_synthetic(0, one_spike)]) == []


def test_straggler_ties_to_host_findings_from_the_store() -> None:
    ranks = [_synthetic(r, [100.0] * 10, data_ms=40.0 if r == 3 else 1.0, host=f"gpu{r:02d}") for r in range(8)]
    throttled = Finding(
        code=FindingCode.GPU_CLOCKS_THROTTLED,
        severity=Severity.WARNING,
        nodes=["gpu03"],
        subject="GPU0",
        message="GPU0 is throttled (HW slowdown)",
    )
    (f,) = diagnose(ranks, host_findings={"gpu03": [throttled]})
    assert f.nodes == ["gpu03"] and f.details["stage"] == "data"
    assert f.details["host_findings"] == ["GPU_CLOCKS_THROTTLED: GPU0 is throttled (HW slowdown)"]
    # no store: the same finding without the node's history
    (g,) = diagnose(ranks)
    assert "host_findings" not in g.details


def test_a_stage_only_the_straggler_enters_is_found() -> None:
    # peers never wait for data (0 ms): the straggler's 40 ms data stage is still judged against them
    ranks = [_synthetic(r, [100.0] * 10, data_ms=40.0 if r == 5 else 0.0) for r in range(8)]
    (f,) = diagnose(ranks)
    assert f.subject == "rank 5" and f.details["stage"] == "data" and f.details["slow_steps"] == 10


def test_small_differences_are_not_stragglers() -> None:
    # a 2 ms data stage against 1 ms: 100% slower but 2% of the step: never the culprit
    ranks = [_synthetic(r, [100.0] * 10, data_ms=2.0 if r == 1 else 1.0) for r in range(6)]
    assert diagnose(ranks) == []


def test_report_shape_matches_issue_13() -> None:
    rep = report(_traces("cpu-gloo-slow-data-rank2")).model_dump(mode="json")
    envelope = {"schema_version", "kind", "verdict", "exit_code", "job", "findings", "missing_evidence"}
    assert set(rep) == envelope | {"ranks", "baseline", "mfu"} and rep["baseline"] is None and rep["kind"] == "steps"
    assert rep["verdict"] == "WARNING" and rep["exit_code"] == 1 and rep["missing_evidence"] == []
    r = rep["ranks"][2]
    assert set(r) == {
        "rank",
        "host",
        "steps",
        "step_time_ms",
        "stages_ms",
        "temporal_breakdown_pct",
        "comm_exposed_pct",
        "mfu",
        "kernel_classes",
    }
    assert set(r["step_time_ms"]) == {"median", "p95"}
    assert r["temporal_breakdown_pct"] is None  # CPU-only: no GPU shares
    assert list(r["stages_ms"])[:8] == [s.value for s in Stage]


def test_a_trace_without_steps_or_rank_cannot_be_decomposed() -> None:
    doc = b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "tid": 1}]}'
    with pytest.raises(StepsError, match="no rank"):
        decompose_trace(parse_kineto_bytes(doc, source="trace.json"))
    with pytest.raises(StepsError, match="no ProfilerStep"):
        decompose_trace(parse_kineto_bytes(doc, source="rank-3.json"))


def test_rank_hint_from_file_names() -> None:
    assert rank_hint("/x/rank-3.json.gz") == 3
    assert rank_hint("steps-rank-12.jsonl") == 12
    assert rank_hint("host_1234.pt.trace.json") is None


_names = st.sampled_from(
    [
        "ProfilerStep#1",
        "ProfilerStep#2",
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        "Optimizer.step#SGD.step",
        "autograd::engine::evaluate_function: AddmmBackward0",
        "DistributedDataParallel.forward",
        "nccl:all_reduce",
        "aten::mm",
        "ncclKernel_AllReduce",
        "Memcpy HtoD (Pinned -> Device)",
        "void gemm_kernel",
    ]
)
_cats = st.sampled_from(["cpu_op", "user_annotation", "kernel", "gpu_memcpy", "cuda_runtime"])
_times = st.floats(min_value=0, max_value=1e4, allow_nan=False) | st.integers(0, 10_000)
_ev = st.fixed_dictionaries(
    {
        "ph": st.just("X"),
        "cat": _cats,
        "name": _names,
        "ts": _times,
        "dur": _times,
        "tid": st.integers(0, 3),
        "args": st.fixed_dictionaries({"correlation": st.integers(-1, 5), "stream": st.integers(-1, 8)}),
    }
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(ranks=st.lists(st.lists(_ev, min_size=1, max_size=25), min_size=1, max_size=4))
def test_fuzz_decompose_and_diagnose_never_crash(ranks: list[list[dict[str, object]]]) -> None:
    """Any parsable trace decomposes or raises StepsError; any set of decomposed ranks can be diagnosed."""
    decomposed = []
    for r, events in enumerate(ranks):
        doc = json.dumps({"distributedInfo": {"rank": r, "world_size": len(ranks)}, "traceEvents": events})
        try:
            rs = decompose_trace(parse_kineto_bytes(doc.encode(), source=f"rank-{r}.json"))
        except StepsError:
            continue
        for s in rs.steps:
            assert abs(sum(s.stages_ms.values()) - s.step_ms) < 0.01 and min(s.stages_ms.values()) >= 0
        decomposed.append(rs)
    report(decomposed).model_dump(mode="json")


def test_baseline_change_and_noise_band() -> None:
    from fleetdx.orchestrator.steps.run import compare

    wobble = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5, 99.5, 100.0, 101.5, 98.5]
    base = [_synthetic(r, wobble) for r in range(4)]
    same = compare(base, base, "base")
    assert same.step.change_ms == 0 and not same.step.significant and same.goodput_change_pct == 0
    slower = [_synthetic(r, [t * 1.5 for t in wobble]) for r in range(4)]
    cmp = compare(slower, base, "base")
    assert cmp.step.significant and cmp.step.change_pct == 50.0
    assert cmp.goodput_change_pct == round(100 * (1 / 1.5 - 1), 2)
    assert cmp.step.noise_ms is not None and 0 < cmp.step.noise_ms < 5
    data = next(c for c in cmp.stages if c.stage == "data")
    assert data.change_ms == 0 and not data.significant  # 1 ms in both runs


def test_a_one_rank_change_shows_per_rank_where_job_medians_hide_it() -> None:
    """Issue 21, item 15: rank 2's data stage 1 -> 40 ms while ranks 0, 1 and 3 stay at 1 ms: the job median
    of the data stage does not move (within noise), rank 2's own median does (``rank_changes``)."""
    from fleetdx.orchestrator.steps.run import compare

    wobble = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5, 99.5, 100.0, 101.5, 98.5]
    base = [_synthetic(r, wobble) for r in range(4)]
    now = [_synthetic(r, wobble, data_ms=40.0 if r == 2 else 1.0) for r in range(4)]
    cmp = compare(now, base, "base")
    data = next(c for c in cmp.stages if c.stage == "data")
    assert data.change_ms == 0 and not data.significant  # the job's median: 3 of 4 ranks unchanged
    (rank2,) = [c for c in cmp.rank_changes if c.stage == "data"]
    assert (rank2.rank, rank2.baseline_ms, rank2.current_ms, rank2.significant) == (2, 1.0, 40.0, True)
    assert rank2.change_ms == 39.0 and rank2.noise_ms == 0.0
    # rank 2's "other" stage shrank by the same 39 ms (t/3 - data): listed too, smaller first only by order
    assert {(c.rank, c.stage) for c in cmp.rank_changes} == {(2, "data"), (2, "other")}
    assert cmp.rank_changes[0].stage == "data"  # +39.0 before -39.0: ties by rank, then stage name
    assert compare(base, base, "base").rank_changes == []
    # a change under 5% of the rank's step (1 -> 4 ms of ~100 ms) is not listed, however steady
    small = [_synthetic(r, wobble, data_ms=4.0 if r == 2 else 1.0) for r in range(4)]
    assert compare(small, base, "base").rank_changes == []
    # ranks matched by number: a rank only in one run is not compared
    assert compare([_synthetic(7, wobble, data_ms=40.0)], base, "base").rank_changes == []


def test_the_injected_straggler_is_the_largest_rank_change_against_the_clean_run() -> None:
    """The real traces: cpu-gloo-slow-data-rank2 (rank 2 sleeps 60 ms in its loader) against cpu-gloo-clean.
    The job's goodput went up and its data stage is within noise; rank 2's data stage is the top change."""
    from fleetdx.orchestrator.steps.run import analyse, load_ranks

    rep = analyse(load_ranks([FIX / "cpu-gloo-slow-data-rank2"]), load_ranks([FIX / "cpu-gloo-clean"]), "clean")
    b = rep.baseline
    assert b is not None and b.goodput_change_pct is not None and b.goodput_change_pct > 0
    assert not next(c for c in b.stages if c.stage == "data").significant
    top = b.rank_changes[0]
    assert (top.rank, top.stage) == (2, "data") and top.current_ms > 50 > 1 > top.baseline_ms


@pytest.mark.parametrize("load", [_traces, _logs], ids=["trace", "steptimer"])
def test_slow_link_on_rank_1_is_named_as_global_exposed_comm_never_as_a_rank(load: object) -> None:
    """cpu-gloo-slow-link-rank1 (its README): rank 1's link shaped to 25 Mbit/s; every rank waits 315-337 ms per
    step in grad_sync, rank 1 the least. Traces: the job is comm-bound, every rank alike, no rank named.
    StepTimer logs: the wait sits inside ``backward`` (DDP waits for its all-reduce at the end of backward), so
    no communication finding, and still no rank named."""
    ranks = load("cpu-gloo-slow-link-rank1")  # type: ignore[operator]
    assert sorted(r.rank for r in ranks) == [0, 1, 2, 3]
    findings = diagnose(ranks)
    assert FindingCode.STEP_STRAGGLER_RANK not in _codes(findings)
    if ranks[0].input == "steptimer":
        assert findings == []
        for r in ranks:  # backward is over 90% of the median step (the log's steps: 72-98%)
            assert sorted(s.stages_ms["backward"] / s.step_ms for s in r.steps)[len(r.steps) // 2] > 0.9
        return
    assert _codes(findings) == [FindingCode.STEP_COMM_BOUND]
    (f,) = findings
    assert f.subject == "job" and f.details["alike_on_all_ranks"] is True
    assert "global" in f.message and "fleetdx bandwidth" in f.message
    assert float(f.details["exposed_comm_share_pct"]) > 80  # type: ignore[arg-type]
    waits = f.details["exposed_comm_ms_by_rank"]
    assert isinstance(waits, dict) and sorted(waits) == ["0", "1", "2", "3"]
    assert all(300 < float(v) < 340 for v in waits.values())  # type: ignore[arg-type]


def test_slow_link_run_against_the_clean_one() -> None:
    from fleetdx.orchestrator.steps.run import compare

    cmp = compare(_traces("cpu-gloo-slow-link-rank1"), _traces("cpu-gloo-clean"), "cpu-gloo-clean")
    sync = next(c for c in cmp.stages if c.stage == "grad_sync")
    assert cmp.step.significant and sync.significant
    assert sync.change_ms > 0.8 * cmp.step.change_ms  # the step grew by its exposed communication


def _with_sync(rank: int, sync_ms: float, n: int = 10) -> RankSteps:
    stages = {"forward": 10.0, "backward": 20.0, "grad_sync": sync_ms, "other": 10.0}
    steps = [StepSample(step=i, step_ms=40.0 + sync_ms, stages_ms=stages) for i in range(n)]
    return RankSteps(rank=rank, source="synthesised", input="steptimer", timing="wall", steps=steps)


def test_comm_bound_says_global_only_when_every_rank_waits_alike() -> None:
    alike = diagnose([_with_sync(r, w) for r, w in enumerate([60.0, 62.0, 58.0, 50.0])])
    (f,) = alike
    assert f.code is FindingCode.STEP_COMM_BOUND and f.details["alike_on_all_ranks"] is True
    assert "global" in f.message
    # one rank waits far less (it arrives late: the others wait for it): not "global", no rank named either
    (g,) = diagnose([_with_sync(r, w) for r, w in enumerate([60.0, 62.0, 58.0, 30.0])])
    assert g.code is FindingCode.STEP_COMM_BOUND and g.details["alike_on_all_ranks"] is False
    assert "global" not in g.message and g.subject == "job"


@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(1, 10)), max_size=8),
    st.lists(st.tuples(st.integers(0, 50), st.integers(1, 10)), max_size=8),
)
def test_interval_subtract_equals_the_point_set_difference(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    import numpy as np

    from fleetdx.orchestrator.steps.intervals import subtract

    def arr(x: list[tuple[int, int]], i: int) -> np.ndarray:
        return np.array([float(p[0] + (p[1] if i else 0)) for p in x])

    s, e = subtract(arr(a, 0), arr(a, 1), arr(b, 0), arr(b, 1))
    covered = {t for lo, n in a for t in range(lo, lo + n)} - {t for lo, n in b for t in range(lo, lo + n)}
    assert {t for lo, hi in zip(s, e, strict=True) for t in range(int(lo), int(hi))} == covered
    assert all(s[1:] > e[:-1])  # sorted and disjoint (touching runs merged)
