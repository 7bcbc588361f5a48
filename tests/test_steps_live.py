"""Live: a real 4-process gloo DDP training on this machine's CPUs (tests/fixtures/traces/train_ddp.py) under
torch.profiler and the StepTimer, one injected fault at a time; fleetdx names the injected stage and rank from
the fresh traces and logs. The captured copies of these runs are the cpu-gloo-* fixtures (tests/test_steps.py);
this test regenerates them in a temporary folder. Slow (about 10-20 s per run), needs torch; the slow-link test
also needs root and iproute2 (network namespaces, ``tc``) and is skipped with the reason without them."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.steps.analyze import diagnose, stage_medians
from fleetdx.orchestrator.steps.run import compare, load_ranks
from tests.netns import netns_unavailable

TRAIN = Path(__file__).parent / "fixtures" / "traces" / "train_ddp.py"
pytestmark = pytest.mark.slow


def _train(out: Path, *args: str) -> None:
    pytest.importorskip("torch")
    res = subprocess.run(
        [sys.executable, str(TRAIN), str(out), "--steps", "12", *args], capture_output=True, text=True, timeout=240
    )
    assert res.returncode == 0, res.stderr[-3000:]


def _ranks(out: Path, pattern: str) -> list:  # type: ignore[type-arg]
    loaded = load_ranks(sorted(out.glob(pattern)))
    assert loaded.errors == [] and [r.rank for r in loaded.ranks] == [0, 1, 2, 3]
    return loaded.ranks


@pytest.mark.parametrize("rank", [1])
def test_live_slow_data_loader_is_named(tmp_path: Path, rank: int) -> None:
    _train(tmp_path, "--fault", "slow-data", "--fault-rank", str(rank), "--sleep-ms", "80")
    for pattern in ("rank-*.json.gz", "steps-rank-*.jsonl"):
        findings = diagnose(_ranks(tmp_path, pattern))
        stragglers = [f for f in findings if f.code is FindingCode.STEP_STRAGGLER_RANK]
        assert [(f.subject, f.details["stage"]) for f in stragglers] == [(f"rank {rank}", "data")], pattern


def test_live_tiny_ops_is_launch_bound(tmp_path: Path) -> None:
    _train(tmp_path, "--fault", "tiny-ops")
    codes = [f.code for f in diagnose(_ranks(tmp_path, "rank-*.json.gz"))]
    assert FindingCode.STEP_LAUNCH_BOUND in codes and FindingCode.STEP_STRAGGLER_RANK not in codes


def test_live_clean_run_names_no_straggler_and_no_bound_stage(tmp_path: Path) -> None:
    """On a shared 2-core machine a clean run's exposed all-reduce wait varies (25-40% of the step measured):
    the test asserts no straggler and no data/launch/H2D finding, the injected kinds."""
    _train(tmp_path)
    codes = [f.code for f in diagnose(_ranks(tmp_path, "rank-*.json.gz"))]
    for code in (
        FindingCode.STEP_STRAGGLER_RANK,
        FindingCode.STEP_DATA_BOUND,
        FindingCode.STEP_LAUNCH_BOUND,
        FindingCode.STEP_H2D_BOUND,
    ):
        assert code not in codes


def _comm_share(ranks: list) -> float:  # type: ignore[type-arg]
    """The job's exposed-communication share as the diagnosis computes it: median over ranks of grad_sync/step."""
    return statistics.median(
        stage_medians(r)["grad_sync"] / statistics.median(s.step_ms for s in r.steps) for r in ranks
    )


def _job_step(ranks: list) -> float:  # type: ignore[type-arg]
    return statistics.median(statistics.median(s.step_ms for s in r.steps) for r in ranks)


def _job_wait(ranks: list) -> float:  # type: ignore[type-arg]
    return statistics.median(stage_medians(r)["grad_sync"] for r in ranks)


#: the throttled rank and its link's rate; 536,616 B of fp32 gradients (the MLP's 134,154 parameters)
THROTTLED, RATE_MBIT, GRAD_BYTES = 1, 25, 134_154 * 4


@pytest.mark.netns
@pytest.mark.timeout(600)
def test_live_slow_link_is_global_exposed_comm_and_names_no_clean_rank(tmp_path: Path) -> None:
    """Rank 1's link shaped with ``tc tbf`` to 25 Mbit/s (each rank in its own network namespace on a bridge,
    tests/netns.py), against the same run with no shaping: the gradient all-reduce crosses the slow link on every
    step, so **every** rank waits for it: the step slows globally and exposed communication dominates
    (``STEP_COMM_BOUND``, subject "job", "every rank waits alike"); no rank is named.

    Measured on the dev machine (2 shared cores, load 9-12 from other work; 5 runs, 2 of them beside two CPU
    hogs), from the traces: job median step, per-rank median grad_sync (exposed wait), exposed share:

    ===========  ==========  ====================================  ===========
    run          step ms     grad_sync ms r0 / r1 / r2 / r3        exposed
    ===========  ==========  ====================================  ===========
    clean        48-160      5-108 per rank (job median 17-60)     12-47%
    slow-link 1  390.7       328.1 / **324.2** / 324.1 / 307.2     83.3%
    slow-link 2  453.1       353.0 / **353.3** / 359.9 / 347.4     77.4%
    slow-link 3  351.4       320.8 / **318.2** / 312.5 / 325.7     91.2%
    + 2 hogs     384.9       342.1 / **330.5** / 344.2 / 333.2     87.8%
    + 2 hogs     371.0       335.6 / **335.7** / 328.1 / 345.3     90.5%
    ===========  ==========  ====================================  ===========

    (At 50 Mbit/s the waits were 153-172 ms, exposed 67-89%; a clean run under load waited up to 136 ms, too
    close: hence 25 Mbit/s.) The throttled rank (bold) cannot be told from its peers by its steps: its wait is
    the lowest in one run, the highest in another, always within 5% of its peers, and its step time is the
    job's. (At 50 Mbit/s its gloo:all_reduce spans ended in a fixed order on the ring, r2, r3, r1, r0, 12 and
    25 ms apart, in two runs; comparing span ends across ranks needs one clock and the ring's order, neither of
    which a multi-node NCCL job gives, so fleetdx does not use it.) Hence the facts asserted: the exposed share
    above the 50% rule and 15 points above the clean run's, the wait in ms over 1.5x the clean run's, every
    rank waiting at least as long as the link allows (the throttled rank must send its whole gradient and
    receive the whole sum: S = 536,616 B each way at 25 Mbit/s = 172 ms, 80% of it asserted; a ring all-reduce
    moves 2 (N-1)/N x S, 258 ms' worth, measured 307-360 ms), and no straggler at all on either run, from
    traces or from StepTimer logs (where the wait sits inside ``backward``; the baseline comparison shows the
    step's significant growth). No step-time ratio is asserted: the clean run's step swung 35-335 ms with the
    load beside it.
    """
    why = netns_unavailable()
    if why:
        pytest.skip(why)
    clean, slow = tmp_path / "clean", tmp_path / "slow-link"
    _train(clean, "--netns")
    _train(slow, "--fault", "slow-link", "--fault-rank", str(THROTTLED), "--rate", f"{RATE_MBIT}mbit")
    c_tr, s_tr = _ranks(clean, "rank-*.json.gz"), _ranks(slow, "rank-*.json.gz")
    figures = {
        name: (round(_job_step(rs), 1), [stage_medians(r)["grad_sync"] for r in rs], round(100 * _comm_share(rs), 1))
        for name, rs in (("clean", c_tr), ("slow-link", s_tr))
    }
    print("job step ms, grad_sync ms per rank, exposed comm %:", figures)  # the evidence, shown with -s

    findings = diagnose(s_tr)
    comm = [f for f in findings if f.code is FindingCode.STEP_COMM_BOUND]
    assert len(comm) == 1, findings
    assert comm[0].subject == "job" and comm[0].details["alike_on_all_ranks"] is True, comm[0]
    assert "global" in comm[0].message
    # a clean run on 2 shared cores exposes 12-55% (the wait for descheduled peers)
    assert _comm_share(s_tr) > max(0.5, _comm_share(c_tr) + 0.15)
    assert _job_wait(s_tr) > 1.5 * _job_wait(c_tr)
    floor_ms = 1000 * GRAD_BYTES / (RATE_MBIT * 1e6 / 8)
    assert min(stage_medians(r)["grad_sync"] for r in s_tr) > 0.8 * floor_ms
    for code in (FindingCode.STEP_DATA_BOUND, FindingCode.STEP_LAUNCH_BOUND, FindingCode.STEP_H2D_BOUND):
        assert code not in [f.code for f in findings]

    c_log, s_log = _ranks(clean, "steps-rank-*.jsonl"), _ranks(slow, "steps-rank-*.jsonl")
    for rs in (s_tr, s_log, c_tr, c_log):
        # no rank is named; above all, never a rank whose link is clean
        assert [f.subject for f in diagnose(rs) if f.code is FindingCode.STEP_STRAGGLER_RANK] == []
    change = compare(s_log, c_log, str(clean)).step
    assert change.significant and change.change_ms > 0
