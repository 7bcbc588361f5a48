"""Correlation rules on hand-made (synthesised) events and log lines: which rank hung a collective, clock-skew
tolerance, the observer rule, the window filter, and never OK for an unexplained failure."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fleetdx.orchestrator.judgement import Finding
from fleetdx.orchestrator.judgement import FindingCode as F
from fleetdx.orchestrator.postmortem.contracts import TimelineEntry, cause
from fleetdx.orchestrator.postmortem.correlate import SKEW_TOLERANCE_S, first_decisive, timeout_analysis
from fleetdx.orchestrator.postmortem.run import Window, run_postmortem
from fleetdx.orchestrator.postmortem.sources import Bundles, Evidence, LogFiles
from fleetdx.probes.contracts import Job, RankPlacement, SchedulerKind, Severity, Verdict
from fleetdx.probes.parsers.joblog import EventKind as K
from fleetdx.probes.parsers.joblog import JobEvent, parse_joblog
from fleetdx.probes.parsers.logline import stamp_ts


def _wd(rank: int, seq: int, pg: int = 0) -> str:
    return (
        f"[rank{rank}]:[E0321 02:07:08.408 ProcessGroupNCCL.cpp:607] [PG {pg} Rank {rank}] Watchdog caught "
        f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
        f"Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
    )


def _progress(rank: int, at: int, enq: int, done: int, pg: int = 0) -> str:
    return (
        f"[rank{rank}]:[E0321 02:07:08.465 ProcessGroupNCCL.cpp:1664] [PG {pg} Rank {rank}] Exception (either an "
        f"error or timeout) detected by watchdog at work: {at}, last enqueued NCCL work: {enq}, last completed "
        f"NCCL work: {done}."
    )


def _events(lines: list[str]) -> list[JobEvent]:
    return parse_joblog("\n".join(lines), "synth.log", 2025).events


def test_rank_that_never_enqueued_the_collective_hung_it() -> None:
    lines = [_wd(r, 100) for r in (0, 1, 3)] + [_progress(r, 100, 101, 99) for r in (0, 1, 3)]
    lines.append(_progress(2, 99, 99, 98))  # rank 2 never enqueued 100; it timed out on 99
    a = timeout_analysis(_events(lines))
    assert a.suspects == [2] and "never reached" in a.reason and a.seq == 100


def test_rank_timing_out_on_a_lower_seq_is_behind() -> None:
    a = timeout_analysis(_events([_wd(0, 100), _wd(1, 100), _wd(5, 97)]))
    assert a.suspects == [5] and "behind" in a.reason


def test_silent_ranks_of_the_job_are_the_suspects() -> None:
    a = timeout_analysis(_events([_wd(r, 100) for r in (0, 1, 2)]), world=range(4))
    assert a.suspects == [3]


def test_suspect_named_with_its_host_from_the_job() -> None:
    path = (
        Path(__file__).parent
        / "fixtures"
        / "joblogs"
        / "13_watchdog-reduce-scatter-ranks64-67_1800000ms_quote-prefix_megatron.log"
    )
    job = Job(
        scheduler=SchedulerKind.SLURM,
        job_id="7",
        nodes=["n1", "n2"],
        state="FAILED",
        exit_code=1,
        ranks=[RankPlacement(rank=r, host="n1" if r < 66 else "n2") for r in range(64, 69)],
    )
    cause = run_postmortem([LogFiles([path])], job=job).causes[0]
    assert (cause.code, cause.rank, cause.host, cause.nodes) == (F.NCCL_TIMEOUT, 68, "n2", ["n2"])


def test_skew_tolerance_lets_the_more_decisive_event_win() -> None:
    t = "2025-03-21T02:07:08"
    ts = stamp_ts(t)
    assert ts is not None
    crash = JobEvent(
        kind=K.SIGNAL,
        rank=1,
        ts=ts + SKEW_TOLERANCE_S / 2,
        file="a",
        line=1,
        text="Segmentation fault",
        details={"signal": "Segmentation fault (11)"},
    )
    xid = JobEvent(
        kind=K.XID,
        host="n1",
        ts=ts + SKEW_TOLERANCE_S - 1,
        file="k",
        line=9,
        text="Xid 79",
        details={"xid": 79, "pci": "0000:3b:00"},
    )
    early = JobEvent(
        kind=K.PYTHON_EXCEPTION, rank=2, ts=ts, file="b", line=3, text="ValueError: x", details={"type": "ValueError"}
    )
    assert first_decisive([crash, xid, early]) is xid
    late_xid = xid.model_copy(update={"ts": ts + 10 * SKEW_TOLERANCE_S})
    # within the tolerance the crash outranks the earlier exception; past it, the earliest event is first
    assert first_decisive([crash, late_xid, early]) is crash
    later_crash = crash.model_copy(update={"ts": ts + 2 * SKEW_TOLERANCE_S})
    assert first_decisive([later_crash, late_xid, early]) is early


def test_observer_only_evidence_names_the_peer(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text(
        "gpu01:1:2 [0] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer gpu02.cl<4711>\n"
        "gpu02: [rank8]: hello\n"
    )
    cause = run_postmortem([LogFiles([log])]).causes[0]
    assert cause.code is F.NCCL_NETWORK_ERROR and cause.host == "gpu02" and cause.nodes == ["gpu02"]
    assert "observer" in cause.message


_CHECK_TIMEOUT_FRAME = (
    "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
    "std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in /opt/conda/lib/python3.11/site-packages/torch/lib/"
    "libtorch_cuda.so)\n"
)


def test_c10_frames_speak_only_when_nothing_else_does(tmp_path: Path) -> None:
    """A watchdog's checkTimeout frame alone tells a timeout (the paste lost its message); beside an error line
    (here rank 3's CUDA OOM) it is fallback evidence and makes no cause of its own."""
    alone = tmp_path / "frames.log"
    alone.write_text(_CHECK_TIMEOUT_FRAME)
    (cause,) = run_postmortem([LogFiles([alone])]).causes
    assert cause.code is F.NCCL_TIMEOUT
    both = tmp_path / "both.log"
    both.write_text(
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
        "capacity of 79.10 GiB of which 1.06 GiB is free.\n" + _CHECK_TIMEOUT_FRAME
    )
    assert [(c.code, c.rank) for c in run_postmortem([LogFiles([both])]).causes] == [(F.OOM_GPU, 3)]


def test_a_keyboard_interrupt_is_no_crash_and_never_above_the_hang(tmp_path: Path) -> None:
    """Ctrl-C (KeyboardInterrupt) after a watchdog timeout: the timeout is the cause, the interrupt none; alone,
    the interrupt tells no failure (UNKNOWN, never a PROCESS_CRASH)."""
    interrupt = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\nKeyboardInterrupt\n'
    log = tmp_path / "hang.log"
    log.write_text(_wd(0, 96) + "\n" + interrupt)
    assert [c.code for c in run_postmortem([LogFiles([log])]).causes] == [F.NCCL_TIMEOUT]
    log.write_text(interrupt)
    assert [c.code for c in run_postmortem([LogFiles([log])]).causes] == [F.UNKNOWN]


def test_no_cause_is_unknown_never_ok(tmp_path: Path) -> None:
    log = tmp_path / "quiet.log"
    log.write_text("epoch 1 loss 2.3\nepoch 2 loss 2.1\n")
    report = run_postmortem([LogFiles([log])])
    assert report.verdict is Verdict.UNKNOWN and report.exit_code == 3
    assert [c.code for c in report.causes] == [F.UNKNOWN]
    assert any("none telling of a failure" in m for m in report.missing_evidence)


def test_completed_job_with_nothing_found_is_ok(tmp_path: Path) -> None:
    log = tmp_path / "quiet.log"
    log.write_text("done\n")
    job = Job(scheduler=SchedulerKind.SLURM, job_id="1", state="COMPLETED", exit_code=0)
    report = run_postmortem([LogFiles([log])], job=job)
    assert report.verdict is Verdict.OK and report.causes == [] and report.job == job


def test_unreadable_log_is_named_not_skipped(tmp_path: Path) -> None:
    report = run_postmortem([LogFiles([tmp_path / "absent.log"])])
    assert report.verdict is Verdict.UNKNOWN
    assert any("absent.log: not read" in m for m in report.missing_evidence)
    binary = tmp_path / "bin.log"
    binary.write_bytes(b"abc\x00def\n")
    assert any("bin.log: not read" in m for m in run_postmortem([LogFiles([binary])]).missing_evidence)


def _bundle(tmp_path: Path, host: str, dmesg: str) -> Path:
    d = tmp_path / host
    d.mkdir()
    (d / "dmesg.txt").write_text(dmesg)
    return d


def test_bundle_kernel_events_outside_the_window_are_left_out(tmp_path: Path) -> None:
    line = (
        "2026-11-22T10:58:12+00:00 {h} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, "
        "GPU has fallen off the bus."
    )
    b1 = _bundle(tmp_path, "gpu1", line.format(h="gpu1") + "\n")
    ts = stamp_ts("2026-11-22T10:58:12Z")
    assert ts is not None
    inside = run_postmortem([Bundles([b1])], window=Window(since=ts - 60, until=ts + 60))
    assert inside.causes[0].code is F.GPU_HW_FAULT and inside.causes[0].host == "gpu1"
    assert inside.causes[0].evidence[0].file == f"{b1}/dmesg.txt"
    outside = run_postmortem([Bundles([b1])], window=Window(since=ts + 3600, until=ts + 7200))
    assert outside.causes[0].code is F.UNKNOWN
    assert any("outside the job's window" in m for m in outside.missing_evidence)
    other = run_postmortem([Bundles([b1])], window=Window(nodes=frozenset({"gpu2"})))
    assert other.causes[0].code is F.UNKNOWN


def test_bundle_without_kernel_log_says_so(tmp_path: Path) -> None:
    d = tmp_path / "gpu3"
    d.mkdir()
    (d / "nvidia-smi_-L.txt").write_text("GPU 0: NVIDIA H100 (UUID: GPU-1)\n")
    report = run_postmortem([Bundles([d])])
    assert any("no kernel log in the bundle" in m for m in report.missing_evidence)


def test_a_link_flap_that_recovered_before_the_failure_is_not_the_cause(tmp_path: Path) -> None:
    dmesg = (
        "[Fri Mar 21 06:00:20 2025] mlx5_core 0000:5e:00.0 ibp94s0: Link down\n"
        "[Fri Mar 21 06:00:21 2025] mlx5_core 0000:5e:00.0 ibp94s0: Link up\n"
        "[Fri Mar 21 07:10:00 2025] mlx5_core 0000:5e:00.0 ibp94s1: Link down\n"
    )
    log = tmp_path / "job.log"
    log.write_text("gpu9: [rank3]:2025-03-21 07:10:30,000 RuntimeError: CUDA error: unspecified launch failure\n")
    report = run_postmortem([Bundles([_bundle(tmp_path, "gpu9", dmesg)]), LogFiles([log])])
    codes = [(c.code, c.severity.value, c.evidence[0].line) for c in report.causes]
    # the link still down when the job failed comes first; the flap is only a warning
    assert codes[0] == (F.NCCL_NETWORK_ERROR, "critical", 3)
    assert (F.NCCL_NETWORK_ERROR, "warning", 1) in codes
    assert "came back up 1.0 s later" in next(c.message for c in report.causes if c.severity.value == "warning")


class _Judging:
    """A source that judges its own inputs (as Flight Recorder dumps do): it names rank 2 as the hang's culprit."""

    def collect(self, ctx: object) -> Evidence:
        def causes(rank_hosts: Mapping[int, str]) -> list[Finding]:
            return [
                cause(
                    code=F.NCCL_TIMEOUT,
                    severity=Severity.CRITICAL,
                    rank=2,
                    host=rank_hosts.get(2),
                    nodes=[h for h in [rank_hosts.get(2)] if h],
                    time="2025-03-21T02:07:07.000Z",
                    message="rank 2 never issued ALLREDUCE #1580",
                    action="look at rank 2",
                )
            ]

        def timeline(rank_hosts: Mapping[int, str]) -> list[TimelineEntry]:
            return [TimelineEntry(time="2025-03-21T02:07:07.000Z", host=None, rank=2, kind="flight-recorder", text="x")]

        return Evidence(causes=causes, timeline=timeline, missing=["from the judging source"])


def test_a_judging_source_names_the_culprit_before_the_timeouts(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join(["gpu5: " + _wd(r, 1580) for r in (0, 1, 3)] + ["gpu7: [rank2]: step 99"]) + "\n")
    job = Job(scheduler=SchedulerKind.SLURM, job_id="9", start_time=stamp_ts("2025-03-21T00:00:00Z"))
    report = run_postmortem([LogFiles([log]), _Judging()], job=job)
    assert [(c.code, c.rank) for c in report.causes] == [(F.NCCL_TIMEOUT, 2), (F.NCCL_TIMEOUT, None)]
    assert report.causes[0].host == "gpu7"  # from "gpu7: [rank2]: step 99", a line with no event
    assert "from the judging source" in report.missing_evidence
    assert not any("never reached" in m for m in report.missing_evidence)
    times = [t.time for t in report.timeline]
    assert times[0] == "2025-03-21T02:07:07.000Z" and times == sorted(times)


def test_old_kernel_oom_outside_the_window_is_left_out_and_no_window_is_said(tmp_path: Path) -> None:
    dmesg = "[Mon Mar 10 06:00:20 2025] Out of memory: Killed process 1234 (python3) total-vm:1kB\n"
    b = _bundle(tmp_path, "gpu4", dmesg)
    since, until = stamp_ts("2025-03-21T06:00:00Z"), stamp_ts("2025-03-21T08:00:00Z")
    report = run_postmortem([Bundles([b])], window=Window(since=since, until=until))
    assert report.causes[0].code is F.UNKNOWN
    unbounded = run_postmortem([Bundles([b])])
    assert unbounded.causes[0].code is F.OOM_HOST
    assert any("no job window" in m for m in unbounded.missing_evidence)


def test_a_line_both_parsers_read_is_one_evidence_line(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("Out of memory: Killed process 4242 (python3) total-vm:1kB\n")
    (cause,) = run_postmortem([LogFiles([log])]).causes
    assert cause.code is F.OOM_HOST and [e.line for e in cause.evidence] == [1]


def test_a_garbled_nvrm_line_costs_the_kernel_reading_not_the_job_log(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "NVRM: Xid (PCI:0000:3b:00): notanumber\n"
        "[rank0]:RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    report = run_postmortem([LogFiles([log])])
    assert report.causes[0].code is F.CUDA_ERROR and report.causes[0].rank == 0
    assert any("kernel-log lines not read after line 1" in m for m in report.missing_evidence)
    log.write_text("[rank0]:RuntimeError: CUDA error: an illegal memory access was encountered\nNVRM: Xid (PCI:0): x\n")
    report = run_postmortem([LogFiles([log])])
    assert report.causes[0].code is F.CUDA_ERROR
    assert any("kernel-log lines at its end not read" in m for m in report.missing_evidence)


def test_srun_task_becomes_a_rank_only_where_the_log_shows_the_layout(tmp_path: Path) -> None:
    log = tmp_path / "slurm-12.out"
    lines = [f"{t}: [rank{t + 100}]: step 1" for t in range(4)] + ["srun: error: sim3: task 2: Segmentation fault"]
    log.write_text("\n".join(lines) + "\n")
    cause = run_postmortem([LogFiles([log])]).causes[0]
    assert (cause.code, cause.rank, cause.host) == (F.PROCESS_CRASH, 102, "sim3")
    # no pair and no launcher starting several ranks per task: srun started one process per rank (SLURM_PROCID)
    bare = tmp_path / "bare.out"
    bare.write_text("0: step 1\nsrun: error: sim3: task 2: Segmentation fault\n")
    cause = run_postmortem([LogFiles([bare])]).causes[0]
    assert (cause.code, cause.rank, cause.host) == (F.PROCESS_CRASH, 2, "sim3")
    # torchrun under srun (one task per node): task 2 is a node's launcher, no rank
    torchrun = tmp_path / "torchrun.out"
    torchrun.write_text(
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -11) local_rank: 0 (pid: 71) of "
        "binary: /usr/bin/python\nsrun: error: sim3: task 2: Segmentation fault\n"
    )
    causes = run_postmortem([LogFiles([torchrun])]).causes
    assert causes and all(c.rank != 2 for c in causes)


def test_a_watchdog_teardown_is_no_cause_of_its_own_a_real_cpp_crash_is(tmp_path: Path) -> None:
    """Lines shaped after the real H100 capture (tests/fixtures/flight_recorder/nccl_1rank_gpu_stall/stderr.txt):
    the terminate after a CUDA error is that error's teardown; a std::bad_alloc stays a PROCESS_CRASH."""
    cuda = (
        "[rank0]:[E1124 22:20:31.243 ProcessGroupNCCL.cpp:2119] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process "
        "group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered\n"
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: "
        "CUDA error: an illegal memory access was encountered\n"
    )
    log = tmp_path / "cuda.log"
    log.write_text(cuda)
    causes = run_postmortem([LogFiles([log])]).causes
    assert [(c.code, c.rank) for c in causes] == [(F.CUDA_ERROR, 0)]
    crash = tmp_path / "crash.log"
    crash.write_text(
        _wd(1, 7) + "\nterminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n"
    )
    causes = run_postmortem([LogFiles([crash])]).causes
    assert [c.code for c in causes] == [F.PROCESS_CRASH, F.NCCL_TIMEOUT]
    assert "what(): std::bad_alloc" in causes[0].message


def test_a_c10d_terminate_whose_what_is_unread_ranks_below_the_timeout(tmp_path: Path) -> None:
    log = tmp_path / "r.log"
    log.write_text(_wd(1, 7) + "\nterminate called after throwing an instance of 'c10::DistBackendError'\n")
    causes = run_postmortem([LogFiles([log])]).causes
    assert [c.code for c in causes] == [F.NCCL_TIMEOUT, F.PROCESS_CRASH]


_JOBACCT = [
    "slurmstepd: error: Job 7518 exceeded memory limit (626359956 > 512000000), being killed",
    "slurmstepd: error: Exceeded job memory limit",
    "slurmstepd: error: *** JOB 7518 ON xantipa CANCELLED AT 2022-06-10T17:11:35 ***",
]


def test_slurm_job_line_takes_the_host_of_its_cancelled_line_on_a_one_node_job(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text("\n".join(["Epoch 0 | Steps: 93 | Loss: 24.58", *_JOBACCT]) + "\n")
    c = run_postmortem([LogFiles([log])]).causes[0]
    assert (c.code, c.nodes) == (F.OOM_HOST, ["xantipa"])
    assert [e.line for e in c.evidence] == [2, 4]  # the OOM line, and the line that named its host


def test_slurm_job_line_gets_no_host_when_the_logs_name_two(tmp_path: Path) -> None:
    """On a job of two nodes the stepd that printed the memory line is not known: no host is guessed."""
    log = tmp_path / "job.out"
    log.write_text("\n".join([*_JOBACCT, "srun: error: n2: task 1: Exited with exit code 1"]) + "\n")
    c = run_postmortem([LogFiles([log])]).causes[0]
    assert (c.code, c.nodes) == (F.OOM_HOST, [])


def test_a_placeless_line_merged_into_a_placed_group_leads_it_only_if_it_came_first(tmp_path: Path) -> None:
    """NCCL's specific WARN (host and rank named) before torch's generic 'invalid usage' RuntimeError (no place):
    one cause, and its message quotes the WARN, the line that says what was wrong."""
    log = tmp_path / "job.out"
    log.write_text(
        "node-1:5514:5577 [0] init.cc:703 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device "
        "1b000\nRuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, invalid usage, "
        "NCCL version 2.21.5\n"
    )
    (c,) = run_postmortem([LogFiles([log])]).causes
    assert (c.code, c.rank, c.nodes) == (F.CONFIG_ERROR, 1, ["node-1"])
    assert "Duplicate GPU detected" in c.message and [e.line for e in c.evidence] == [1, 2]


def test_a_stall_report_names_the_rank_that_never_joined(tmp_path: Path) -> None:
    """Horovod's stall inspector (wild log 195's shape): the rank it lists as missing is the rank that hung the
    collective, the coordinator that printed it only the observer."""
    log = tmp_path / "job.out"
    log.write_text(
        "[1,0]<stderr>:[2019-04-13 13:53:31.851506: W horovod/common/operations.cc:588] "
        "HorovodBroadcast_dense_1_bias_Momentum_0 [missing ranks: 1]\n"
        "[1,0]<stderr>:[2019-04-13 13:53:31.851527: W horovod/common/operations.cc:588] "
        "HorovodBroadcast_global_step_0 [missing ranks: 1]\n"
    )
    c = run_postmortem([LogFiles([log])]).causes[0]
    assert (c.code, c.rank) == (F.NCCL_TIMEOUT, 1)
    assert "never joined" in c.message


def test_the_exit_of_a_rank_whose_monitored_barrier_raised_is_its_echo(tmp_path: Path) -> None:
    """torch's monitoredBarrier raises a RuntimeError that ends the rank (exit code 1): the collective hang is the
    cause, not a crash of that rank (wild log 184's shape)."""
    log = tmp_path / "job.out"
    log.write_text(
        "RuntimeError: Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv "
        "from rank 0. Please check rank 0 logs for faulty rank.\n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2024-10-01_10:00:00\n  host      : n1\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 4711)\n"
        "============================================================\n"
    )
    causes = run_postmortem([LogFiles([log])]).causes
    assert [c.code for c in causes] == [F.NCCL_TIMEOUT]


def test_horovods_oldest_stall_list_names_the_rank_missing_from_its_range(tmp_path: Path) -> None:
    """Horovod's oldest stall report lists the ranks that were ready (wild log 197's shape): the one missing from
    inside their range never submitted the tensor."""
    log = tmp_path / "job.out"
    log.write_text(
        "WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and "
        "are waiting for remainder of ranks for more than 60 seconds. Stalled ops: allreduce_0 "
        "[ready ranks: 3, 0, 1, 5, 4]\n"
    )
    c = run_postmortem([LogFiles([log])]).causes[0]
    assert (c.code, c.rank) == (F.NCCL_TIMEOUT, 2)


def _causes(log: Path, text: str) -> list[Finding]:
    """The causes of a postmortem of the job log ``log``, written with ``text`` first."""
    log.write_text(text)
    return run_postmortem([LogFiles([log])]).causes


def test_an_unprefixed_oom_is_the_only_rank_the_logs_name(tmp_path: Path) -> None:
    """A one-node job whose launcher names its only child (wild log 363's shape: '--local_rank=0'): the unprefixed
    CUDA OOM above it is that rank's, said in its details; when the launcher's line names its last child of
    several, the OOM stays rankless."""
    oom = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 25.10 GiB (GPU 0; 79.15 GiB total "
        "capacity; 62.79 GiB already allocated)\n"
    )
    child = (
        "[2023-09-07 13:55:11,220] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', './t.py', "
        "'--local_rank={r}'] exits with return code = 1\n"
    )
    log = tmp_path / "job.out"
    (c,) = _causes(log, oom + child.format(r=0))  # the launcher's exit code 1 is the OOM's echo
    assert (c.code, c.rank) == (F.OOM_GPU, 0) and [e.line for e in c.evidence] == [1, 2]
    # '--local_rank=1' is the launcher's last child, not the failed one (deepspeed/launcher/launch.py): no rank
    c = _causes(log, oom + child.format(r=1))[0]
    assert (c.code, c.rank) == (F.OOM_GPU, None)


def test_a_launchers_exitcode_minus_6_of_a_rank_that_timed_out_is_the_timeouts_echo(tmp_path: Path) -> None:
    """torch elastic's 'exitcode: -6' (SIGABRT) of a rank whose watchdog timed out (wild log 366's shape, the
    launcher's line pasted first): the watchdog took the process down; the timeout is the cause."""
    log = tmp_path / "job.out"
    causes = _causes(
        log,
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 0 (pid: 514946) of "
        "binary: /usr/bin/python\n"
        + "".join(
            f"[E ProcessGroupNCCL.cpp:821] [Rank {r}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum=27962, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1807582 milliseconds before "
            f"timing out.\n"
            for r in (0, 1, 3)
        ),
    )
    assert [c.code for c in causes] == [F.NCCL_TIMEOUT]


def test_launch_failures_of_ssh_and_mpiruns_daemons_are_configuration(tmp_path: Path) -> None:
    """ssh could not resolve a hostfile's name and ORTE could not start its daemons (wild log 358's shape): no
    rank ran, a configuration error, and the unresolvable name is no node at fault; DeepSpeed's ssh check as
    check_call raises it (wild log 310's shape) names the host it could not reach."""
    log = tmp_path / "job.out"
    (c,) = _causes(
        log,
        "ssh: Could not resolve hostname horovod-w1-0: Temporary failure in name resolution\n"
        "--------------------------------------------------------------------------\n"
        "ORTE was unable to reliably start one or more daemons.\n",
    )
    assert (c.code, c.nodes) == (F.CONFIG_ERROR, [])
    assert "horovod-w1-0" in c.message and [e.line for e in c.evidence] == [1, 3]
    (c,) = _causes(
        log,
        "subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 192.168.3.100 hostname' returned "
        "non-zero exit status 255.\n",
    )
    assert (c.code, c.nodes) == (F.CONFIG_ERROR, ["192.168.3.100"])


def test_a_store_connect_failure_is_the_cause_not_its_exception(tmp_path: Path) -> None:
    """torch's DistNetworkError around the client socket's connect failure (wild log 311's shape) is the
    rendezvous error, not a crash of its own."""
    log = tmp_path / "job.out"
    (c,) = _causes(
        log,
        "trainer-2: torch.distributed.DistNetworkError: The client socket has failed to connect to any network "
        "address of (192.168.121.122, 1040). The client socket has failed to connect to 192.168.121.122:1040 "
        "(errno: 113 - No route to host).\n",
    )
    assert (c.code, c.nodes) == (F.NCCL_NETWORK_ERROR, ["trainer-2"])


def test_rays_worker_died_report_yields_to_what_the_worker_printed_after_it(tmp_path: Path) -> None:
    """The raylet's 'A worker died or was killed' (its cause unknown to it) is printed before the worker's own
    lines reach the driver (wild log 231's shape): libmlx5's error completion on that worker's node is the cause.
    Alone, the report is still that node's worker crash. 'mlx5: ' is no host prefix."""
    died = (
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
        "the problem, check the logs for the dead worker. RayTask ID: ffff Worker ID: d893 Node ID: 8440 Worker IP "
        "address: 172.19.24.110 Worker port: 10105 Worker PID: 92234 Worker exit type: SYSTEM_ERROR\n"
    )
    log = tmp_path / "job.out"
    c = _causes(
        log,
        died + "(RayWorkerWrapper pid=92234, ip=172.19.24.110) mlx5: host_unknown: got completion with error: "
        "[repeated 2x across cluster]\n",
    )[0]
    assert (c.code, c.nodes) == (F.NCCL_NETWORK_ERROR, ["172.19.24.110"])
    (c,) = _causes(log, died)
    assert (c.code, c.nodes) == (F.PROCESS_CRASH, ["172.19.24.110"])


def test_a_terminate_line_whose_what_was_lost_is_one_more_watchdog_teardown(tmp_path: Path) -> None:
    """Old torch's watchdog throws std::runtime_error; the last 'terminate called' of a cut log lost its what()
    (wild log 432's shape): the same exception as the teardowns before it, not a crash of its own."""
    wd = (
        "[E ProcessGroupNCCL.cpp:916] [Rank {r}] NCCL watchdog thread terminated with exception: [Rank {r}] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=48490, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=1800000) ran for 1800781 milliseconds before timing out.\n"
    )
    term = "terminate called after throwing an instance of 'std::runtime_error'\n"
    log = tmp_path / "job.out"
    causes = _causes(log, wd.format(r=2) + term + "  what():  " + wd.format(r=2) + wd.format(r=7) + term)
    assert [c.code for c in causes] == [F.NCCL_TIMEOUT]


def test_a_context_switch_timeout_after_an_application_xid_is_its_consequence(tmp_path: Path) -> None:
    """XID 13 (an application's SM exception) then XID 109 (context-switch timeout) on the same GPU 5 s later
    (wild log 65's shape): the application fault is the cause; a 109 alone stays the GPU's."""
    x13 = (
        "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM "
        "Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter\n"
    )
    x109 = (
        "[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, "
        "errorString CTX SWITCH TIMEOUT, Info 0x58005\n"
    )
    log = tmp_path / "dmesg.txt"
    (c,) = _causes(log, x13 + x109)
    assert c.code is F.CUDA_ERROR and [e.line for e in c.evidence] == [1, 2]
    (c,) = _causes(log, x109)
    assert c.code is F.GPU_HW_FAULT


def test_cuda_errors_of_the_jobs_setup_are_configuration(tmp_path: Path) -> None:
    """A GPU index the process cannot see (wild log 465's shape, the driver API's name) is the launch's device
    assignment, not the GPU; an illegal memory access stays a CUDA error."""
    log = tmp_path / "job.out"
    (c,) = _causes(
        log,
        "unable to create StreamExecutor for CUDA:1: failed initializing StreamExecutor for CUDA device ordinal 1: "
        "INTERNAL: Failed call to cuDeviceGet: CUDA_ERROR_INVALID_DEVICE: invalid device ordinal\n",
    )
    assert c.code is F.CONFIG_ERROR and "CUDA_VISIBLE_DEVICES" in c.action
    (c,) = _causes(log, "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert c.code is F.CUDA_ERROR


def test_a_launchers_exit_code_1_of_a_rank_whose_configuration_failed_is_its_echo(tmp_path: Path) -> None:
    """Hydra could not locate the config's target, then Composer reports rank 0 exited with code 1 (wild log 408's
    shape): the configuration error is the cause, the exit its evidence."""
    log = tmp_path / "job.out"
    (c,) = _causes(
        log,
        "Error locating target 'diffusion.datasets.build_loader', set env var HYDRA_FULL_ERROR=1 to see chained "
        "exception.\nERROR:composer.cli.launcher:Rank 0 crashed with exit code 1.\n",
    )
    assert (c.code, c.rank) == (F.CONFIG_ERROR, 0)
    assert "diffusion.datasets.build_loader" in c.message and [e.line for e in c.evidence] == [1, 2]


def test_a_slurmstepd_line_without_host_or_job_is_the_only_srun_hosts(tmp_path: Path) -> None:
    """slurmstepd's execve failure names neither host nor job; srun's task line names the one node (wild log 401's
    shape): it ran there. With two nodes named it stays hostless."""
    log = tmp_path / "job.out"
    execve = "slurmstepd: error: execve(): torchrun: No such file or directory\n"
    c = _causes(log, execve + "srun: error: g1301: task 0: Exited with exit code 2\n")[0]
    assert (c.code, c.nodes) == (F.CONFIG_ERROR, ["g1301"])
    two = "srun: error: g1301: task 0: Exited with exit code 2\nsrun: error: g1302: task 1: Exited with exit code 2\n"
    c = _causes(log, execve + two)[0]
    assert (c.code, c.nodes) == (F.CONFIG_ERROR, [])


def test_a_tasks_host_comes_from_ncclS_own_prefix_behind_the_task_prefix(tmp_path: Path) -> None:
    """srun -l's task prefix before NCCL's 'host:pid:tid [dev]' on an INFO line no event starts on (wild log
    501's shape): task 0 ran there, so did the elastic agent's failed child on task 0."""
    c = _causes(
        tmp_path / "job.out",
        "0: g1002:2128869:2128880 [0] NCCL INFO Setting affinity for GPU 0 to ffff0000\n"
        "0: Fatal Python error: Segmentation fault\n"
        "0: E0909 14:03:50.013000 22579342468928 torch/distributed/elastic/multiprocessing/api.py:833] failed "
        "(exitcode: -11) local_rank: 0 (pid: 2128869) of binary: /usr/bin/python3\n",
    )[0]
    assert (c.code, c.nodes) == (F.PROCESS_CRASH, ["g1002"])


def test_the_one_peer_every_observer_names_is_the_node_several_are_not(tmp_path: Path) -> None:
    """'Connection closed by remote peer draw4' (wild log 601's shape, the host redacted to '-'): the one end
    every observer names is where the connection ended, named as the node; NCCL's proxy naming 'rank 1' is no
    host. Two different peers condemn neither: they are the subject only."""
    closed = "-:6015:6224 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer {p}<59227>\n"
    proxy = "-:6015:6224 [1] proxy.cc:884 NCCL WARN Proxy Call to rank 1 failed (Connect)\n"
    log = tmp_path / "job.out"
    c = _causes(log, proxy + closed.format(p="draw4"))[0]
    assert (c.code, c.nodes) == (F.NCCL_NETWORK_ERROR, ["draw4"]) and "observer" in c.message
    c = _causes(log, closed.format(p="draw4") + closed.format(p="draw5"))[0]
    assert (c.code, c.nodes) == (F.NCCL_NETWORK_ERROR, []) and c.subject == "draw4"


def test_the_abort_after_an_uncaught_cpp_exception_is_the_exceptions_not_a_crash(tmp_path: Path) -> None:
    """'terminate called after throwing' with a what() naming NCCL's unhandled system error, then 'Fatal Python
    error: Aborted' (wild log 554's shape): the NCCL error is why the process aborted. A UCX 'Caught signal 11'
    while the other threads terminate (wild log 628's shape) names the host of the CUDA error it follows. An
    abort far below the terminate, or on another rank, stays a crash of its own."""
    log = tmp_path / "job.out"
    term = "terminate called after throwing an instance of 'std::runtime_error'\n"
    nccl = "  what():  NCCL error: unhandled system error, NCCL version 2.10.3\n"
    causes = _causes(log, term + nccl + "Fatal Python error: Aborted\n")
    assert [c.code for c in causes] == [F.NCCL_INTERNAL_ERROR] and [e.line for e in causes[0].evidence] == [2, 1, 3]
    cuda = "  what():  CUDA runtime error: an illegal memory access was encountered LlamaBatch.h:143\n"
    ucx = "[pod-7f9c:1    :0:289] Caught signal 11 (Segmentation fault: Sent by the kernel at address (nil))\n"
    (c,) = _causes(log, term + cuda + "terminate called recursively\n" + ucx)
    assert (c.code, c.nodes) == (F.CUDA_ERROR, ["pod-7f9c"]) and "on pod-7f9c" in c.message
    far = _causes(log, term + nccl + "step\n" * 80 + "Fatal Python error: Aborted\n")
    assert {c.code for c in far} == {F.NCCL_INTERNAL_ERROR, F.PROCESS_CRASH}


def test_one_pid_joins_a_ranks_exit_to_the_hosts_signal_line_on_one_node(tmp_path: Path) -> None:
    """UCX's '[host:pid:...] Caught signal 11' and torchrun's 'failed (exitcode: -11) local_rank: 0 (pid: 157)'
    (wild log 603's shape, one node) are one process: one crash of rank 0 on that host. Two hosts printing the
    same pid join nothing."""
    log = tmp_path / "job.out"
    ucx = "[{h}:157  :4:419] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))\n"
    failed = (
        "[2024-05-06 07:29:45,438] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -11) "
        "local_rank: 0 (pid: 157) of binary: /usr/bin/python\n"
    )
    (c,) = _causes(log, ucx.format(h="92c90024c028") + failed)
    assert (c.code, c.rank, c.nodes) == (F.PROCESS_CRASH, 0, ["92c90024c028"])
    two = _causes(log, ucx.format(h="a1") + ucx.format(h="b2") + failed)
    assert {(c.rank, tuple(c.nodes)) for c in two} == {(None, ("a1",)), (None, ("b2",)), (None, ())}


def test_a_host_is_called_by_its_own_name_where_a_launchers_prefix_names_it_otherwise(tmp_path: Path) -> None:
    """pdsh's '10.0.87.143: ' before NCCL's 'ip-10-0-87-143:149:298' (wild logs 166, 503, 755): the cause names
    the host by NCCL's name, its own (gethostname); a Docker container's generated name says less than the
    launcher's and is not taken."""
    warn = "{p}: {h}:149:298 [5] register_mr_buffers:465 NCCL WARN NET/OFI Unable to register memory (type = 1) for "
    warn += "device 0. RC: 12, Error: Cannot allocate memory\n"
    (c,) = _causes(tmp_path / "job.out", warn.format(p="10.0.87.143", h="ip-10-0-87-143"))
    assert (c.code, c.nodes) == (F.NCCL_INTERNAL_ERROR, ["ip-10-0-87-143"]) and "ulimit -l" in c.action
    (c,) = _causes(tmp_path / "job.out", warn.format(p="gpu-a04", h="c4d7a0d1e5f2"))
    assert c.nodes == ["gpu-a04"]


def test_an_abort_after_the_watchdogs_terminate_is_the_timeouts(tmp_path: Path) -> None:
    """Two ranks' watchdog timeouts, the teardown's terminate whose what() is rank 1's timeout, then 'Fatal Python
    error: Aborted' with no rank (wild log 751's shape): one timeout cause, no crash beside it."""
    wd = (
        "[E ProcessGroupNCCL.cpp:828] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=388923, "
        "OpType=_ALLGATHER_BASE, Timeout(ms)=1800000) ran for 1804360 milliseconds before timing out.\n"
    )
    log = (
        wd.format(r=0)
        + wd.format(r=1)
        + "terminate called after throwing an instance of 'std::runtime_error'\n  what():  "
        + wd.format(r=1)
        + "Fatal Python error: Aborted\n"
    )
    assert [c.code for c in _causes(tmp_path / "job.out", log)] == [F.NCCL_TIMEOUT]


def test_torchruns_agent_hung_up_on_is_the_cause_when_nothing_else_failed(tmp_path: Path) -> None:
    """'Received 1 death signal, shutting down workers' (wild log 756's shape: SIGHUP, the session closed) with no
    other failure; SIGTERM's (a cancellation's echo) stays no cause."""
    line = "WARNING:torch.distributed.elastic.agent.server.api:Received {s} death signal, shutting down workers\n"
    (c,) = _causes(tmp_path / "job.out", line.format(s=1))
    assert c.code is F.PROCESS_CRASH and "SIGHUP" in c.message and "tmux" in c.action
    assert [c.code for c in _causes(tmp_path / "job.out", line.format(s=15))] == [F.UNKNOWN]


def test_a_ray_worker_that_vanished_is_a_death_of_unknown_cause_on_its_node(tmp_path: Path) -> None:
    """The raylet's 'Worker unexpectedly exits with a connection error code 2' (wild logs 48, 707, 812, 1362,
    1510): no exit of the worker's own, and Ray's text lists three causes it cannot tell apart: the node is named,
    the verdict is UNKNOWN, and the action says where the OOM killer's line with the pid would be."""
    line = (
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. Worker IP "
        "address: 10.226.129.21 Worker port: 50045 Worker PID: 110142 Worker exit type: SYSTEM_ERROR Worker exit "
        "detail: Worker unexpectedly exits with a connection error code 2. End of file.\n"
    )
    (c,) = _causes(tmp_path / "job.out", line)
    assert (c.code, c.severity, c.nodes) == (F.UNKNOWN, Severity.UNKNOWN, ["10.226.129.21"])
    assert "Killed process 110142" in c.action
    intended = line.replace(
        "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2.",
        "INTENDED_SYSTEM_EXIT",
    )
    assert _causes(tmp_path / "job.out", intended)[0].code is F.PROCESS_CRASH


def test_a_ray_actor_that_died_is_a_death_of_unknown_cause_below_its_own_error(tmp_path: Path) -> None:
    """A task's RayTaskError(ActorDiedError) (wild 803, 1557) or an actor whose creation task raised (1710): the
    death on its node, cause UNKNOWN; the actor's own error, when the log has it, is the cause."""
    died = (
        "ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunner.run() (pid=18948, ip=10.164.37.106, "
        "actor_id=2dbcd32867b5a1f1d0c9e8b701000000)\n"
    )
    (c,) = _causes(tmp_path / "job.out", died)
    assert (c.code, c.severity, c.nodes) == (F.UNKNOWN, Severity.UNKNOWN, ["10.164.37.106"])
    own = "(WorkerDict pid=2211, ip=10.164.37.106) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2GB\n"
    assert _causes(tmp_path / "job.out", own + died)[0].code is F.OOM_GPU


def test_mxms_caught_signal_line_names_its_host(tmp_path: Path) -> None:
    """MXM (Mellanox OFED's messaging library before UCX) prints UCX's line behind '[host:pid:tid]' (wild log
    705): a crash on that host."""
    (c,) = _causes(tmp_path / "job.out", "[ava02:21329:1] Caught signal 11 (Segmentation fault)\n")
    assert (c.code, c.nodes) == (F.PROCESS_CRASH, ["ava02"]) and "SIGSEGV" in c.message


def test_more_wordings_of_round_nine(tmp_path: Path) -> None:
    """Paddle's 'Nccl error, unhandled cuda error' (wild log 656) is a CUDA error; mpirun's line with the pid and
    node redacted (653) still names rank 1; a bare 'NCCL communicator was aborted.' (657) is the echo of a
    failure it does not name; XLA's barrier of the program's own that timed out (658) is a hang, the connect
    barrier at start-up a join that never happened; TensorFlow's group-size mismatch (665) is configuration."""
    log = tmp_path / "job.out"
    c = _causes(
        log, "ExternalError:  Nccl error, unhandled cuda error  (at /paddle/fluid/platform/collective_helper.cc:83)\n"
    )
    assert c[0].code is F.CUDA_ERROR
    c = _causes(
        log, "mpirun noticed that process rank 1 with PID xxxxxx on node xxxxxxxx exited on signal 9 (Killed).\n"
    )
    assert (c[0].code, c[0].rank, c[0].nodes) == (F.OOM_HOST, 1, [])
    assert _causes(log, "RuntimeError: NCCL communicator was aborted.\n")[0].code is F.UNKNOWN
    # XLA's barrier timeout in its older wording and in that of 2024 on ("Id:", wild log 4804): the program's own
    # barrier is a hang, the start-up's (connect, registration) processes that never joined
    xla = "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. "
    for barrier, own, startup in (
        (xla + "Barrier_id: {b}. Timed out task names:\n", "multihost_broadcast_sync0", "PjRT_Client_Connect"),
        (
            xla + "Id: {b}. This usually happens because a task triggered the barrier too early or too slowly.\n",
            "0_async_write_complete.0.1",
            "[Init]Wait_for_all_tasks_to_register::0",
        ),
    ):
        c = _causes(log, barrier.format(b=own))[0]
        assert c.code is F.NCCL_TIMEOUT and own in c.message
        assert _causes(log, barrier.format(b=startup))[0].code is F.CONFIG_ERROR
    tf = "  (1) Internal:  Collective Op  has group_size 8 and group_key2 but that group has size 4\n"
    c = _causes(log, tf)[0]
    assert c.code is F.CONFIG_ERROR and "TF_CONFIG" in c.action


def test_more_wordings_of_round_ten(tmp_path: Path) -> None:
    """A torchrun summary entry whose header was cut keeps its host (wild log 855); hydra's 'RUNNING AT user@host'
    names the host (861); gloo's failed connect is an observer naming its peer (863); gloo's
    'op.preamble.length <= op.nbytes' is a size mismatch between ranks (864); nccl-tests' 'Test CUDA failure ...
    invalid device ordinal' is the launch's (854); aws-ofi-nccl finding no provider is configuration (869)."""
    log = tmp_path / "job.out"
    entry = "  time      : 2025-12-23_05:17:58\n  host      : yotta-B200-232\n  rank      : 0 (local_rank: 0)\n"
    entry += "  exitcode  : -11 (pid: 3304209)\n  traceback : Signal 11 (SIGSEGV) received by PID 3304209\n"
    c = _causes(log, entry)[0]
    assert (c.code, c.rank, c.nodes) == (F.PROCESS_CRASH, 0, ["yotta-B200-232"])
    hydra = "=   PID 108257 RUNNING AT jetson@node1\n=   EXIT CODE: 134\n"
    assert _causes(log, hydra)[0].nodes == ["node1"]
    gloo = "RuntimeError: [/w/third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [172.31.71.170]:13195: "
    c = _causes(log, gloo + "Connection refused\n")[0]
    assert c.code is F.NCCL_NETWORK_ERROR and "observer" in c.message
    sizes = "  what():  [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= "
    c = _causes(
        log, "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n" + sizes + "op.nbytes. 9 vs 8\n"
    )
    assert [x.code for x in c] == [F.CONFIG_ERROR] and "different sizes" in c[0].message
    c = _causes(log, "node1: Test CUDA failure common.cu:963 'invalid device ordinal'\n")[0]
    assert (c.code, c.nodes) == (F.CONFIG_ERROR, ["node1"])
    ofi = "10.3.35.83: WARN: Function: find_ofi_provider Line: 543: NET/OFI Couldn't find any optimal provider\n"
    c = _causes(log, ofi)[0]
    assert (c.code, c.nodes) == (F.CONFIG_ERROR, ["10.3.35.83"]) and "EFA" in c.action


def test_the_unspecified_address_names_no_host(tmp_path: Path) -> None:
    """Ray's 'ip=0.0.0.0' of an actor bound to every interface (wild log 814) names no node to blame."""
    line = (
        "ray.exceptions.RayTaskError(WorkerCrashedError): ray::RemoteRewardModel.get_rewards() (pid=1625610, "
        "ip=0.0.0.0, actor_id=7cdb557236a)\n"
    )
    (c,) = _causes(tmp_path / "job.out", line)
    assert c.code is F.PROCESS_CRASH and c.nodes == []


def test_more_wordings_of_round_eleven(tmp_path: Path) -> None:
    """NCCL's 'Connect to PEER failed : ERROR' names its peer (wild log 956, NCCL 2.4's wording; 2.10's
    'socketStartConnect: Connect to ...' alike), and an EC2 peer IP is the host ip-A-B-C-D the logs name: the
    printing host itself here; CPython's "can't open file" is the launch's (963); torchrun's other failures, all
    SIGKILLed with the root cause's entry cut, are the OOM killer's (955); TCPStore's 'wait timeout' is a hang
    (1068)."""
    log = tmp_path / "job.out"
    warn = "ip-172-31-34-232:63799:64163 [7] include/socket.h:387 NCCL WARN Connect to {p}<52473> failed : {e}\n"
    c = _causes(log, warn.format(p="172.31.34.232", e="Connection refused"))[0]
    assert (c.code, c.nodes) == (F.NCCL_NETWORK_ERROR, ["ip-172-31-34-232"])
    c = _causes(
        log, warn.format(p="10.0.0.9", e="Connection refused").replace("NCCL WARN ", "NCCL WARN socketStartConnect: ")
    )[0]
    assert (c.code, c.nodes) == (F.NCCL_NETWORK_ERROR, ["10.0.0.9"]) and "to 10.0.0.9" in c.message
    c = _causes(
        log, "10.141.250.227: /usr/bin/python3: can't open file 'train_mpu.py': [Errno 2] No such file or directory\n"
    )[0]
    assert (c.code, c.nodes) == (F.CONFIG_ERROR, ["10.141.250.227"]) and "'train_mpu.py'" in c.message
    entry = "[{i}]:\n  time      : 2023-08-11_17:21:54\n  host      : test-luo-1\n  rank      : {r} (local_rank: {i})\n"
    entry += (
        "  exitcode  : -9 (pid: 16{i})\n  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 16{i}\n"
    )
    failures = "Failures:\n" + entry.format(i=1, r=9) + entry.format(i=2, r=10)
    failures += "-----\nRoot Cause (first observed failure):\n[0]:\n  time      : 2023-08-11_17:21:54\n"
    c = _causes(log, failures)[0]
    assert (c.code, c.nodes) == (F.OOM_HOST, ["test-luo-1"])
    root = entry.format(i=0, r=8).replace("-9 (pid", "1 (pid").replace("Signal 9 (SIGKILL) received by PID 160", "N/A")
    c = _causes(log, failures.rsplit("[0]:", 1)[0] + root)
    assert c[0].code is F.PROCESS_CRASH and c[0].rank == 8 and F.OOM_HOST in {x.code for x in c[1:]}
    store = (
        "[rank0]: torch.distributed.DistStoreError: wait timeout after 600000ms, keys: //worker/attempt_0/pg:7/0/1\n"
    )
    assert _causes(log, store)[0].code is F.NCCL_TIMEOUT


def test_more_wordings_of_round_twelve(tmp_path: Path) -> None:
    """NCCL's NVLS set-up failing is the fabric manager's configuration (wild logs 1106, 1107); aws-ofi-nccl not
    opening its address vector is the node's EFA set-up (1102); nvidia-smi's 'Unknown Error' for one GPU is that
    GPU lost (1112); a loopback peer is the printing host, never a node to blame (1113); a system error whose
    'Last error:' on the next line is a failed connect is that network error (1201); NCCL's INFO trace of a
    socket call's errno is an observer's report (1114); mp.spawn's '-- Process N terminated' names the local rank
    of the traceback below (1207); XLA's NCCL stub finding no library is the environment's (1203); NCCL's IB port
    error is a link down (1211)."""
    log = tmp_path / "job.out"
    nvls = "h100-3:1:2 [0] transport/nvls.cc:165 NCCL WARN Cuda failure 'invalid argument'\n"
    c = _causes(log, nvls)[0]
    assert c.code is F.CONFIG_ERROR and "NCCL_NVLS_ENABLE=0" in c.action
    bind = "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152:\nCUDA error 401 'the operation "
    bind += "cannot be performed in the present state'.\n"
    assert [x.code for x in _causes(log, bind)] == [F.CONFIG_ERROR]
    av = "[1,23]<stdout>:ip-172-32-45-165:72593:73427 [7] create_nccl_ofi_component:459 NCCL WARN NET/OFI Couldn't "
    c = _causes(log, av + "open AV. RC: -22, ERROR: Invalid argument\n")[0]
    assert (c.code, c.rank, c.nodes) == (F.CONFIG_ERROR, 23, ["ip-172-32-45-165"]) and "open AV" in c.message
    c = _causes(log, "Unable to determine the device handle for GPU0000:03:00.0: Unknown Error\n")[0]
    assert c.code is F.GPU_HW_FAULT and "0000:03:00.0" in c.message
    loop = "10: gpu-a1:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 127.0.0.1<45069> failed "
    c = _causes(log, loop + ": Software caused connection abort\n")[0]
    assert c.code is F.NCCL_NETWORK_ERROR and "127.0.0.1" not in c.nodes and "same host" in c.message
    wrapped = (
        "[rank9]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "NCCLUtils.cpp:77, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.6\n"
        "[rank9]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
        "[rank9]: Last error:\n[rank9]: socketPollConnect poll() returned 1, no POLLOUT events\n"
    )
    assert [x.code for x in _causes(log, wrapped)] == [F.NCCL_NETWORK_ERROR]
    alone = wrapped.replace("[rank9]: socketPollConnect poll() returned 1, no POLLOUT events\n", "")
    assert _causes(log, alone)[0].code is F.NCCL_INTERNAL_ERROR
    trace = "g105:26921:27058 [0] NCCL INFO misc/socket.cc:505 -> 2 (Operation now in progress)\n"
    assert _causes(log, trace)[0].code is F.NCCL_NETWORK_ERROR
    spawn = "-- Process 1 terminated with the following error:\nTraceback (most recent call last):\n"
    spawn += (
        "  File \"main.py\", line 29, in main\nUnboundLocalError: local variable 'model' referenced before assignment\n"
    )
    c = _causes(log, spawn)[0]
    assert (c.code, c.rank) == (F.CONFIG_ERROR, 1)
    stub = "nccl_utils.cc:133: NCCL operation ncclGetUniqueId(&id) failed: Unable to load NCCL library. Multi-GPU "
    assert _causes(log, stub + "collectives will not work.;\n")[0].code is F.CONFIG_ERROR
    port = "[2025-09-17 15:23:34] pod-2:311:405 [0] transport/net_ib.cc:199 NCCL WARN NET/IB : mlx5_32:1 Got async "
    c = _causes(log, port + "error event: port error\n")[0]
    assert (c.code, c.nodes) == (F.NCCL_NETWORK_ERROR, ["pod-2"]) and "mlx5_32:1" in c.message
    tests = (
        "fengyun: Test NCCL failure common.cu:959 'internal error - please report this issue to the NCCL developers'\n"
    )
    assert _causes(log, tests)[0].nodes == ["fengyun"]  # nccl-tests' own host field (1108), no digit in the name
    # the watchdog's own teardown line names its rank when its timeout line was cut (1151); NCCL's verbs wrapper
    # failing to register memory is a system error of that host (1157)
    some = "[rank6]:[E624 04:14:29.224103812 ProcessGroupNCCL.cpp:684] [Rank 6] Some NCCL operations have failed or "
    assert _causes(log, some + "timed out. Due to the asynchronous nature of CUDA kernels\n")[0].code is F.NCCL_TIMEOUT
    c = _causes(log, "cn135:30193:30246 [0] misc/ibvwrap.cc:252 NCCL WARN Call to ibv_reg_mr\n")[0]
    assert (c.code, c.nodes) == (F.NCCL_INTERNAL_ERROR, ["cn135"]) and "ulimit -l" in c.action


def test_more_wordings_of_round_thirteen(tmp_path: Path) -> None:
    """UCX's handler line with no prefix is a crash (wild log 1351); UCX's TCP and EFA SRD transports' errors are
    an observer's network error (1352, 1354); Open MPI's '[host:pid] Signal:' names its host, and the rank mpirun
    names for the same host and pid (1356, 143); gloo's 'Connect timeout' is an observer's (1311); NCCL's IB
    'collective mismatch error' is the program's (1306); NCCL 2.4's 'Could not find real path' is set-up (1301)."""
    log = tmp_path / "job.out"
    assert _causes(log, "Caught signal 11 (Segmentation fault: Sent by the kernel at address (nil))\n")[0].code is (
        F.PROCESS_CRASH
    )
    tcp = "[1749803291.555759] [pod-a:7053 :0]          tcp_ep.c:1260 UCX  ERROR tcp_ep 0x3c502370 (state=CONNECTED): "
    assert _causes(log, tcp + "send(110) failed: Input/output error\n")[0].code is F.NCCL_NETWORK_ERROR
    srd = "[1784621081.896648] [pod-b:537  :0]       srd_iface.c:221  UCX  ERROR send completion[0] with error on "
    assert _causes(log, srd + "rdmap133s0/0x55cf44182010: Work Request Flushed Error, vendor_err 0x1\n")[0].code is (
        F.NCCL_NETWORK_ERROR
    )
    sig = "[node7:17969] *** Process received signal ***\n[node7:17969] Signal: Segmentation fault (11)\n"
    noticed = (
        "mpirun noticed that process rank 286 with PID 17969 on node node7 exited on signal 11 (Segmentation fault).\n"
    )
    c = _causes(log, sig + noticed)[0]
    assert (c.code, c.rank, c.nodes) == (F.PROCESS_CRASH, 286, ["node7"])
    gloo = "RuntimeError: [/w/gloo/transport/tcp/pair.cc:611] Connect timeout [172.17.27.13]:27023\n"
    assert _causes(log, gloo)[0].code is F.NCCL_NETWORK_ERROR
    ib = "host2:14508:15205 [0] transport/net_ib.cc:651 NCCL WARN NET/IB : collective mismatch error local size 348160 "
    assert _causes(log, ib + "remote 32768 addr 7fb47b011000 rkey baa8 seq 5a/5a\n")[0].code is F.CONFIG_ERROR
    topo = "h:430:2237 [0] include/topo.h:27 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:02/../../0\n"
    assert _causes(log, topo)[0].code is F.CONFIG_ERROR


def test_wordings_of_round_fourteen(tmp_path: Path) -> None:
    """Ascend's HCCL timeouts are collective timeouts and say so (wild logs 1454-1456); Gaudi's HCCL 'Collective
    call returned error' and NCCL's 'unhandled system error' after a framework's own words are NCCL internal
    errors, not crashes (1451, 1453); torch's 'No backend type associated with device type' is the program's
    configuration (1463)."""
    log = tmp_path / "job.out"
    ei0002 = (
        "EI0002: The wait execution of the Notify register times out. Reason: The Notify register has not received "
        "the Notify record from remote rank [4294967295].base information: [streamID:[1], taskID[39], taskType[Notify "
        "Wait], tag[AllReduce_192.168.0.116%enp69s0_60000_0_1694500287022627].]\n"
    )
    c = _causes(log, ei0002)[0]
    assert c.code is F.NCCL_TIMEOUT and c.message.startswith("HCCL timeout (Ascend CANN): ")
    task = "worker-1:         rtDeviceSynchronize execute failed, reason=[task timeout][FUNC:FuncErrorReason]\n"
    assert [x.code for x in _causes(log, task)] == [F.NCCL_TIMEOUT]
    gaudi = "(RayTrainWorker pid=19045) Unhandled exception: N3c105ErrorE. what(): Collective call returned error\n"
    assert [x.code for x in _causes(log, gaudi)] == [F.NCCL_INTERNAL_ERROR]
    hugectr = "RuntimeError: Runtime error: unhandled system error\n    ncclGroupEnd() at ResourceManagerCore(x.cc:1)\n"
    assert [x.code for x in _causes(log, hugectr)] == [F.NCCL_INTERNAL_ERROR]
    c = _causes(log, "[rank0]: RuntimeError: No backend type associated with device type xpu\n")[0]
    assert (c.code, c.rank) == (F.CONFIG_ERROR, 0)
    nccl = "[rank3]:[E ProcessGroupNCCL.cpp:1] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5"
    nccl += ", OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\n"
    c = _causes(log, nccl)[0]
    assert c.code is F.NCCL_TIMEOUT and c.message.startswith("NCCL watchdog timeout: ")


def test_launchers_and_services_of_round_fourteen(tmp_path: Path) -> None:
    """Hydra that cannot exec the program is a launch error on the proxy's host (wild log 1508); Slurm's PMIx
    fence timing out is a launch error naming no node (1511: the printer waited); Rust's failed allocation is the
    host's memory (1514); a Vertex AI replica's non-zero exit is that replica's crash (1505); RCCL's gtest names
    the NCCL result by number (866)."""
    log = tmp_path / "job.out"
    hydra = "[8] [proxy:1:1@node2] HYD_spawn (../hydra_spawn.c:117): execvp error on file X/ep_server (No such file)\n"
    c = _causes(log, hydra)[0]
    assert (c.code, c.nodes) == (F.CONFIG_ERROR, ["node2"])
    pmix = "slurmstepd: error:  mpi/pmix_v3: pmixp_coll_ring_reset_if_to: adas-ml [0]: pmixp_coll_ring.c:742: "
    c = _causes(log, pmix + "0x14ce0c02cb20: collective timeout seq=0\n")[0]
    assert (c.code, c.nodes) == (F.CONFIG_ERROR, [])
    assert [x.code for x in _causes(log, "memory allocation of 2097152 bytes failed\n")] == [F.OOM_HOST]
    vertex = (
        'Step #4: message: "The replica workerpool1-1 exited with a non-zero status of 1. Termination reason: Error.'
    )
    c = _causes(log, vertex + '"\n')[0]
    assert (c.code, c.nodes) == (F.PROCESS_CRASH, ["workerpool1-1"])
    gtest = "[ ERROR    ] Child process 0 fails NCCL call ncclGroupEnd with code {}\n"
    assert [_causes(log, gtest.format(n))[0].code for n in (1, 2, 5, 6)] == [
        F.CUDA_ERROR,
        F.NCCL_INTERNAL_ERROR,
        F.CONFIG_ERROR,
        F.NCCL_NETWORK_ERROR,
    ]


def test_older_wordings_of_round_fourteen(tmp_path: Path) -> None:
    """NCCL's 'no algorithm/protocol available' is the job's NCCL settings though NCCL returns an internal error
    (wild log 1404); the store client's 'Connection reset by peer' is an observer's network error (1417, 1419);
    Open MPI failing in MPI_Init_thread is a launch error (1414)."""
    log = tmp_path / "job.out"
    algo = "202: :41368:41368 [2] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available\n"
    c = _causes(log, algo + "202: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1169, internal error\n")[0]
    assert c.code is F.CONFIG_ERROR and "NCCL_ALGO" in c.message + c.action + str(c.details)
    reset = "    default_pg._set_sequence_number_for_group()\nRuntimeError: Connection reset by peer\n"
    assert [x.code for x in _causes(log, reset)] == [F.NCCL_NETWORK_ERROR]
    mpi = "*** An error occurred in MPI_Init_thread\n*** on a NULL communicator\n"
    assert [x.code for x in _causes(log, mpi)] == [F.CONFIG_ERROR]


def test_wordings_of_round_fifteen(tmp_path: Path) -> None:
    """Open MPI's 'Failing at address' alone is the process's crash on its host (wild log 1601); NCCL's failed
    verbs call is an internal error on its host (1655); Cray MPICH's GTL failing a CUDA IPC handle is GPU-aware
    MPI set up wrongly, on the rank it names (1662); torch's fatal-signal handler is a crash (1656); a shell prompt
    running nvidia-smi names the host of its output (1658)."""
    log = tmp_path / "job.out"
    c = _causes(log, "[notebook-2a7fcf5e-9744:3436928] Failing at address: 0xb8\n")[0]
    assert (c.code, c.nodes) == (F.PROCESS_CRASH, ["notebook-2a7fcf5e-9744"])
    c = _causes(log, "hai-a100-3:3778851:3779883 [4] ibvwrap.c:130 NCCL WARN Call to ibv_create_qp failed\n")[0]
    assert (c.code, c.nodes) == (F.NCCL_INTERNAL_ERROR, ["hai-a100-3"])
    gtl = "(GTL DEBUG: 1) cuIpcOpenMemHandle: invalid argument, CUDA_ERROR_INVALID_VALUE, line no 272\n"
    c = _causes(log, gtl)[0]
    assert (c.code, c.rank) == (F.CONFIG_ERROR, 1)
    sizes = "MPIR_CRAY_Bcast_Tree(183).: message sizes do not match across processes in the collective routine\n"
    assert [x.code for x in _causes(log, sizes)] == [F.CONFIG_ERROR]
    assert [x.code for x in _causes(log, " 43 SIGABRT(6), PID: 4119976, Thread 4119976:\n")] == [F.PROCESS_CRASH]
    smi = "zeyer@cn-234 ~ % nvidia-smi\nUnable to determine the device handle for GPU0000:03:00.0: Unknown Error\n"
    c = _causes(log, smi)[0]
    assert (c.code, c.nodes) == (F.GPU_HW_FAULT, ["cn-234"])


def test_torch_npus_hccl_function_error_reads_by_its_hcclresult(tmp_path: Path) -> None:
    """torch_npu's 'HCCL function error: CALL, error code is N' (wild logs 3010, 3011) is judged by CANN's HcclResult:
    9 (timeout) a hang's observer, 11-14 and 19 the network's, any other (1 parameter, 5 not supported) HCCL's own
    error, told as HCCL's."""
    log = tmp_path / "job.out"
    line = (
        "[rank1]: RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:148 HCCL function "
        "error: hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), error code is {}\n"
    )
    c = _causes(log, line.format(1))[0]
    assert (c.code, c.rank) == (F.NCCL_INTERNAL_ERROR, 1) and "HCCL" in c.message and "HcclResult 1" in c.message
    assert _causes(log, line.format(9))[0].code is F.NCCL_TIMEOUT
    assert _causes(log, line.format(12))[0].code is F.NCCL_NETWORK_ERROR


def test_a_socket_call_refused_for_want_of_file_descriptors_is_configuration(tmp_path: Path) -> None:
    """'Call to accept failed : Too many open files' (EMFILE; wild log 5331, a 32-worker Trainium job) is the
    process's open-file limit, not the network; other socket errors stay the network's."""
    log = tmp_path / "job.out"
    warn = "gpu1:123:456 [0] misc/socket.cc:500 NCCL WARN Call to accept failed : {}\n"
    c = _causes(log, warn.format("Too many open files"))[0]
    assert c.code is F.CONFIG_ERROR and "ulimit -n" in c.action
    assert _causes(log, warn.format("Connection reset by peer"))[0].code is F.NCCL_NETWORK_ERROR


def test_a_launchers_report_of_an_abort_below_a_watchdog_timeout_is_its_teardown(tmp_path: Path) -> None:
    """Rank 0's watchdog timeout, then torchrun's 'failed (exitcode: -6) local_rank: 1' (wild log 5517): rank 1's
    abort is another watchdog's teardown, not a crash of its own; the same report above the timeout stays a crash."""
    log = tmp_path / "job.out"
    wd = (
        "RuntimeError: NCCL communicator was aborted on rank 0.  Original reason for failure was: [Rank 0] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=35582, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for "
        "1800366 milliseconds before timing out.\n"
    )
    agent = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 1 (pid: 886322) of "
        "binary: /usr/bin/python\n"
    )
    assert [c.code for c in _causes(log, wd + agent)] == [F.NCCL_TIMEOUT]
    assert _causes(log, agent + wd)[0].code is F.PROCESS_CRASH


def test_nccl_tests_invalid_device_ordinal_under_mpirun_is_the_launch_not_a_crash(tmp_path: Path) -> None:
    """nccl-tests' failed CUDACHECK ('Test CUDA failure common.cu:892 ...', and 2017's 'Cuda failure
    common.cu:891 ...') above Open MPI's 'first process to exit' summary (wild logs 5542, 5543): the summary is that
    failure's end (a non-zero status of the process's own, not a signal), and the invalid ordinal is the launch's."""
    log = tmp_path / "job.out"
    ompi = (
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n\n  Process name: [[25735,1],1]\n"
        "  Exit code:    2\n"
    )
    for line in (
        "gpu7: Test CUDA failure common.cu:892 'invalid device ordinal'\n",
        "Cuda failure common.cu:891 'invalid device ordinal'\n",
    ):
        assert [c.code for c in _causes(log, line + ompi)] == [F.CONFIG_ERROR]


def test_a_kernels_trap_after_its_own_timeout_is_that_timeout(tmp_path: Path) -> None:
    """DeepEP's kernel prints its receiver timeout, then trap()s: the host's 'unspecified launch failure' below it
    (wild log 6052) is that timeout's end, not a CUDA error of its own. Printed before the timeout, or another CUDA
    error after it, it stays a CUDA error."""
    log = tmp_path / "job.out"
    timeout = "DeepEP dispatch NVL receiver timeout, channel: 6, RDMA: 0, nvl: 0, src NVL: 5, head: 315, tail: 315\n"
    trap = (
        "terminate called after throwing an instance of 'EPException'\n"
        "  what():  Failed: CUDA error /workspace/DeepEP/csrc/deep_ep.cpp:83 'unspecified launch failure'\n"
    )
    assert [c.code for c in _causes(log, timeout + trap)] == [F.NCCL_TIMEOUT]
    assert _causes(log, trap + timeout)[0].code is F.CUDA_ERROR
    illegal = trap.replace("unspecified launch failure", "an illegal memory access was encountered")
    assert _causes(log, timeout + illegal)[0].code is F.CUDA_ERROR


def test_a_neuron_device_allocation_failure_is_its_out_of_memory(tmp_path: Path) -> None:
    """The Neuron runtime's NRT_RESOURCE on a tensor allocation (wild log 6358) is the accelerator's OOM, told as
    the Neuron device's, not CUDA's."""
    log = tmp_path / "job.out"
    line = 'engine.py:389] RuntimeError: nrt_tensor_allocate status=4 message="Allocation Failure"\n'
    c = _causes(log, line)[0]
    assert c.code is F.OOM_GPU and c.message.startswith("Neuron device out of memory")


def test_a_driver_the_cuda_build_cannot_use_is_the_set_up(tmp_path: Path) -> None:
    """cudaErrorSystemDriverMismatch (803, a container's CUDA compat libraries against the host's driver) is the
    node's or image's set-up, as 804's forward-compatibility error is; an illegal memory access stays a CUDA error."""
    log = tmp_path / "job.out"
    line = "RuntimeError: CUDA error: system has unsupported display driver / cuda driver combination\n"
    assert _causes(log, line)[0].code is F.CONFIG_ERROR
    assert _causes(log, "RuntimeError: CUDA error: an illegal memory access was encountered\n")[0].code is F.CUDA_ERROR
