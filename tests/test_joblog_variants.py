"""The job-log and kernel-log parsers on every launcher prefix, time stamp and kind of damage the module docs
list. The lines are hand-made variants (synthesised: they change the prefix or damage of a real line shape from
tests/fixtures/joblogs/, never its message), so each variant is checked on its own."""

from __future__ import annotations

import pytest

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.joblog import EventKind, parse_joblog
from fleetdx.probes.parsers.joblog_kernel import parse_kernel_log
from fleetdx.probes.parsers.logline import normalise_line, stamp_ts

WD = (
    "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for "
    "600060 milliseconds before timing out."
)


def _one(text: str, kind: EventKind = EventKind.WATCHDOG_TIMEOUT, year: int | None = None):  # type: ignore[no-untyped-def]
    events = [e for e in parse_joblog(text, "v.log", year).events if e.kind is kind]
    assert len(events) == 1, parse_joblog(text, "v.log").events
    return events[0]


@pytest.mark.parametrize(
    ("line", "rank", "local_rank", "task", "host"),
    [
        (f"[rank5]:{WD}", 5, None, None, None),
        (f"[default3]:{WD}", 5, 3, None, None),  # torchrun: local rank 3; [Rank 5] of the default group
        (f"[1,5]<stdout>:{WD}", 5, None, None, None),
        (f"3: [rank5]:{WD}", 5, None, 3, None),  # srun -l: a task id, not a rank
        (f"(RayTrainWorker pid=4009, ip=10.0.0.7) [rank5]:{WD}", 5, None, None, "10.0.0.7"),
        (f"(pid=4009, ip=10.0.0.7) {WD}", 5, None, None, "10.0.0.7"),
        (f"gpu017: [rank5]:{WD}", 5, None, None, "gpu017"),
        (f"node-a1.cluster.local: {WD}", 5, None, None, "node-a1.cluster.local"),
        (f"> > [rank5]:{WD}", 5, None, None, None),
        (f"\x1b[36m(RayWorkerWrapper pid=1)\x1b[0m [rank5]:{WD}", 5, None, None, None),
        (f"[36m(RayWorkerWrapper pid=1)[0m [rank5]:{WD}", 5, None, None, None),
        (f"2025-02-18 12:54 [rank5]:{WD}", 5, None, None, None),
        (f"2019-06-02T16:13:44.884Z: [1,5]<stdout>:{WD}", 5, None, None, None),
        (f"xxx-xxx-001: [rank5]:{WD}", 5, None, None, None),  # redacted host
        (f"<hostname>: [rank5]:{WD}", 5, None, None, None),
    ],
)
def test_rank_and_host_prefixes(
    line: str, rank: int, local_rank: int | None, task: int | None, host: str | None
) -> None:
    e = _one(line)
    assert (e.rank, e.local_rank, e.task, e.host) == (rank, local_rank, task, host)
    assert e.details["seq"] == 1580 and e.details["op"] == "ALLREDUCE" and e.details["timeout_ms"] == 600000
    assert e.details["ran_for_ms"] == 600060


def test_redacted_host_is_flagged_not_named() -> None:
    e = _one(f"xxx-xxx-001: [rank5]:{WD}")
    assert e.host is None and e.details["host_redacted"] is True


def test_srun_task_is_never_a_rank() -> None:
    e = _one("srun: error: node107: task 3: Exited with exit code 1", EventKind.SRUN_TASK_EXIT)
    assert e.rank is None and e.task == 3 and e.host == "node107" and e.details["exit_code"] == 1


def test_stacked_timestamps_collector_then_process() -> None:
    e = _one(f"2025-02-18 12:54 [rank13]:{WD}")
    # the process's own glog stamp, dated with the collector's year
    assert e.time == "E321 02:07:08.408271257" and e.details["collector_time"] == "2025-02-18 12:54"
    assert e.ts == stamp_ts("2025-03-21T02:07:08.408271Z")


@pytest.mark.parametrize(
    ("stamp", "iso"),
    [
        ("2019-06-02T16:13:44.884Z", "2019-06-02T16:13:44.884Z"),
        ("2024-10-18 20:47:35,180", "2024-10-18T20:47:35.180Z"),
        ("2025-05-21_15:43:03", "2025-05-21T15:43:03Z"),
        ("2026-11-22T10:58:12+02:00", "2026-11-22T08:58:12Z"),
        ("Sun Nov 22 10:58:12 2026", "2026-11-22T10:58:12Z"),
    ],
)
def test_time_formats(stamp: str, iso: str) -> None:
    assert stamp_ts(stamp) == stamp_ts(iso)


def test_yearless_stamps_need_a_year() -> None:
    assert stamp_ts("E0321 02:07:08.408") is None
    assert stamp_ts("E0321 02:07:08.408", 2025) == stamp_ts("2025-03-21T02:07:08.408Z")
    assert stamp_ts("Nov 22 10:58:12", 2026) == stamp_ts("2026-11-22T10:58:12Z")


def test_line_glued_to_a_progress_bar() -> None:
    bar = "Epoch 0:   6%|██        | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6, v_num=95nc]"
    e = _one(bar + WD)
    assert e.rank == 5 and e.details["seq"] == 1580


def test_carriage_return_overdrawn_bar() -> None:
    text = "  3%|▎ | 3/100 [00:01<00:40,  2.40it/s]\r  4%|▍ | 4/100 [00:01<00:39,  2.41it/s]\r[rank2]:" + WD
    assert _one(text).rank == 2


@pytest.mark.parametrize("sep", ["", " "])
def test_hard_wrap_is_joined(sep: str) -> None:
    cut = WD.index("NumelOut=466") + 12
    text = f"[rank5]:{WD[:cut]}\n{sep}{WD[cut:]}"
    e = _one(text)
    assert e.line == 1 and e.details["ran_for_ms"] == 600060 and e.details["timeout_ms"] == 600000


def test_hard_wrap_cut_short_keeps_what_it_said() -> None:
    e = _one("[rank5]:" + WD[: WD.index("Timeout(ms)")] + "\n[rank6]: something else")
    assert e.details["seq"] == 1580 and "ran_for_ms" not in e.details


def test_hostname_repeated_mid_line_splits_the_line() -> None:
    text = f"gpu01: hello\ngpu01: [rank0]:{WD} gpu01: [rank1]:{WD.replace('[Rank 5]', '[Rank 1]')}"
    ranks = sorted(e.rank for e in parse_joblog(text).events if e.rank is not None)
    assert ranks == [0, 1]


def test_process_group_rank_is_not_the_global_rank() -> None:
    line = (
        "[E218 04:54:22.864535778 ProcessGroupNCCL.cpp:1795] [PG ID 11 PG GUID 119 Rank 1] Exception (either an "
        "error or timeout) detected by watchdog at work: 216, last enqueued NCCL work: 220, last completed NCCL "
        "work: 215."
    )
    e = _one(line, EventKind.WORK_PROGRESS)
    assert e.rank is None and e.details["pg"] == 11 and e.details["pg_rank"] == 1
    assert (e.details["at_work"], e.details["last_enqueued"], e.details["last_completed"]) == (216, 220, 215)


@pytest.mark.parametrize(
    ("line", "kind", "detail"),
    [
        (
            "h1:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> "
            "with error 12, opcode 0, len 0, vendor err 129 (Recv)",
            EventKind.NCCL_IB_COMPLETION,
            ("status", 12),
        ),
        (
            "h1:1:2 [0] NCCL WARN NET/IB : Got async event : port error",
            EventKind.NCCL_IB_ASYNC,
            ("event", "port error"),
        ),
        (
            "h1:1:2 [0] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer h2<4>",
            EventKind.NCCL_CONNECTION_CLOSED,
            ("peer", "h2<4>"),
        ),
        (
            "torch.distributed.DistBackendError: NCCL error in: ../ProcessGroupNCCL.cpp:1970, unhandled system error "
            "(run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
            EventKind.NCCL_SYSTEM_ERROR,
            None,
        ),
        (
            "RuntimeError: NCCL error in: ../ProcessGroupNCCL.cpp:1269, remote process exited or there was a network "
            "error, NCCL version 2.20.5",
            EventKind.NCCL_REMOTE_ERROR,
            None,
        ),
        (
            "RuntimeError: NCCL error in: ../ProcessGroupNCCL.cpp:1269, internal error, NCCL version 2.14.3",
            EventKind.NCCL_INTERNAL_ERROR,
            None,
        ),
        (
            "h1:1:2 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
            EventKind.NCCL_CUDA_FAILURE,
            ("error", "out of memory"),
        ),
        (
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
            EventKind.CUDA_ERROR,
            ("error", "uncorrectable ECC error encountered"),
        ),
        (
            "RuntimeError: CUDA error: unspecified launch failure",
            EventKind.CUDA_ERROR,
            ("error", "unspecified launch failure"),
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
            "79.10 GiB",
            EventKind.OOM_GPU,
            ("gpu", 3),
        ),
        (
            "slurmstepd: error: Detected 2 oom-kill event(s) in StepId=99.0. Some of your processes may have been "
            "killed by the cgroup out-of-memory handler.",
            EventKind.OOM_HOST,
            ("oom_kill_events", 2),
        ),
        (
            "slurmstepd: error: *** STEP 12.0 ON gpu3 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***",
            EventKind.SLURM_TIME_LIMIT,
            ("job", "12.0"),
        ),
        (
            "slurmstepd: error: *** JOB 12 ON gpu3 CANCELLED AT 2024-01-01T00:00:00 DUE TO NODE FAILURE ***",
            EventKind.NODE_FAIL,
            ("job", "12"),
        ),
        ("srun: error: Node failure on gpu9", EventKind.NODE_FAIL, None),
        ("Segmentation fault (core dumped)", EventKind.SIGNAL, None),
        ("ValueError: bad config key 'lr'", EventKind.PYTHON_EXCEPTION, ("type", "ValueError")),
        ("h1:1:2 [0] NCCL INFO NET/IB : No device found.", EventKind.NCCL_NET_SOCKET, None),
        (
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 2 (pid: 5180) "
            "of binary: /usr/bin/python",
            EventKind.CHILD_FAILED,
            ("exit_code", -9),
        ),
        (
            "[rank1]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 1] Heartbeat monitor timed out! Process will be "
            "terminated after dumping debug info. workMetaList_.size()=0",
            EventKind.WATCHDOG_TIMEOUT,
            ("heartbeat", True),
        ),
        (
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            EventKind.OOM_HOST,
            None,
        ),
        (
            "h1:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with status=IBV_WC_RETRY_EXC_ERR(12) "
            "opcode=0 len=0 vendor err 129 (Recv)",
            EventKind.NCCL_IB_COMPLETION,
            ("status", 12),
        ),
    ],
)
def test_event_kinds(line: str, kind: EventKind, detail: tuple[str, object] | None) -> None:
    e = _one(line, kind)
    if detail is not None:
        assert e.details[detail[0]] == detail[1]


def test_ray_host_oom_is_not_a_gpu_oom() -> None:
    text = "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory."
    assert [e.kind for e in parse_joblog(text).events] == [EventKind.OOM_HOST]


def test_agent_failure_line_gives_the_local_rank() -> None:
    e = _one("failed (exitcode: 1) local_rank: 2 (pid: 5180) of binary: /usr/bin/python", EventKind.CHILD_FAILED)
    assert e.local_rank == 2 and e.rank is None and e.details["pid"] == 5180


def test_nccl_line_names_its_host_and_device() -> None:
    e = _one("h1:1:2 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'", EventKind.NCCL_CUDA_FAILURE)
    assert e.host == "h1" and e.details["cuda_device"] == 3


def test_nul_byte_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_joblog("ok\nbad\x00line\n")
    with pytest.raises(ParseError):
        parse_kernel_log("bad\x00line\n")


def test_events_per_key_are_bounded() -> None:
    log = parse_joblog("\n".join(f"[rank0]:{WD}" for _ in range(100)))
    assert len(log.events) == 16 and log.events_dropped == 84


def test_normalise_keeps_plain_lines() -> None:
    assert normalise_line("Traceback (most recent call last):")[0].body == "Traceback (most recent call last):"
    assert normalise_line("srun: error: node107: task 0: Out Of Memory")[0].host is None
    assert normalise_line("RuntimeError: boom")[0].body == "RuntimeError: boom"


KERNEL = "\n".join(
    [
        "Nov 22 10:58:12 gpu017 kernel: mlx5_core 0000:5e:00.0 ibp94s0: Link down",
        "Nov 22 10:58:13 gpu017 kernel: mlx5_core 0000:5e:00.0: mlx5_port_module_event:1147:(pid 0): "
        "Port module event: module 0, Cable unplugged",
        "Nov 22 10:58:14 gpu017 kernel: infiniband mlx5_0: port 1 state changed to DOWN",
        "Nov 22 10:59:13 gpu017 kernel: mlx5_core 0000:5e:00.0 ibp94s0: Link up",
        "2026-11-22T10:58:12.123456+00:00 gpu018 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
        "GPU has fallen off the bus.",
        "[Sun Nov 22 10:58:12 2026] Out of memory: Killed process 1234 (python3) total-vm:1kB",
    ]
)


def test_kernel_variants() -> None:
    log = parse_kernel_log(KERNEL, "k.log", year=2026)
    got = [(e.kind, e.host, e.line) for e in log.events]
    assert got == [
        (EventKind.IB_LINK_DOWN, "gpu017", 1),
        (EventKind.IB_PORT_STATE, "gpu017", 2),
        (EventKind.IB_PORT_STATE, "gpu017", 3),
        (EventKind.IB_LINK_UP, "gpu017", 4),
        (EventKind.XID, "gpu018", 5),
        (EventKind.OOM_HOST, None, 6),
    ]
    assert log.events[0].ts == stamp_ts("2026-11-22T10:58:12Z")
    assert (log.events[2].details["state"], log.events[2].details["device"]) == ("DOWN", "mlx5_0")
    assert "device" not in log.events[1].details  # mlx5_core is the driver, not a device
    assert log.events[4].details["xid"] == 79


def test_kernel_host_default_and_wrapped_fall() -> None:
    text = (
        "[ 10.5] NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:20b0)\n"
        "[ 10.5] NVRM: installed in this system has\n"
        "[ 10.5] NVRM: fallen off the bus and is not responding to commands.\n"
    )
    (e,) = parse_kernel_log(text, "k", host="gpu5").events
    assert e.kind is EventKind.GPU_LOST and e.host == "gpu5" and e.details["pci"] == "0000:b3:00.0"
    assert e.details["uptime_s"] == 10.5 and e.text.count("\n") == 2


def test_wrap_inside_a_word_and_before_the_work_numbers() -> None:
    """Shapes of real pastes (open-r1#620: a terminal wrap inside ``OpType``; milabench#269: a collector's
    ``host [stderr]`` tag and wraps after ``timeout:`` and before ``by watchdog at work``)."""
    text = (
        "[rank2]:[E424 01:11:21.160832730 ProcessGroupNCCL.cpp:629] [Rank 2] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=4, OpTy\n"
        "pe=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for 1800010 milliseconds before timing "
        "out.\n"
        "node-d004 [stderr] [rank14]:[E909 09:55:29.307629539 ProcessGroupNCCL.cpp:607] [Rank 14] Watchdog caught "
        "collective operation timeout: \n"
        "WorkNCCL(SeqNum=2070, OpType=REDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600034 "
        "milliseconds before timing out.\n"
        "node-d004 [stderr] [rank12]:[E909 09:55:29.313379098 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank "
        "12] Exception (either an error or timeout) detected\n"
        "by watchdog at work: 2070, last enqueued NCCL work: 2070, last completed NCCL work: 2069.\n"
    )
    events = parse_joblog(text).events
    got = [(e.kind, e.rank, e.host, e.line, e.details.get("op"), e.details.get("last_completed")) for e in events]
    assert got == [
        (EventKind.WATCHDOG_TIMEOUT, 2, None, 1, "BROADCAST", None),
        (EventKind.WATCHDOG_TIMEOUT, 14, "node-d004", 3, "REDUCE", None),
        (EventKind.WORK_PROGRESS, 12, "node-d004", 5, None, 2069),
    ]


def test_nccl_errors_torch_reports_without_nccl_warn() -> None:
    """Shapes of real reports (nccl#1928, nccl#2076, stanford_alpaca#207): torch's summary, then ``Last error:``
    and NCCL's own text on the next line or the same one; an ``ncclRemoteError: ...`` line is no crash of its
    own."""
    text = (
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:3763, remote process exited or there was a network error, NCCL version 2.28.8\n"
        "[rank3]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
        "prematurely.\n"
        "[rank3]: Last error:\n"
        "[rank3]: NET/OFI Request 0x7f14cc5b60c0 completed with error. RC: 113. Error: 2 (UNDELIVERABLE). "
        "Completed length: 0\n"
        "socketProgressOpt: Call to recv from 172....<33759> failed : Connection reset by peer\n"
        "terminate called after throwing an instance of 'std::runtime_error' what(): NCCL error: remote process "
        "exited or there was a network error, NCCL version 2.14.3 ncclRemoteError: A call failed possibly due to a "
        "network error or a remote process exiting prematurely. Last error: NET/IB : Got completion from peer "
        "11.214.147.122<39138> with error 12, opcode 0, len 0, vendor err 129\n"
    )
    got = [(e.kind, e.rank, e.line) for e in parse_joblog(text).events]
    assert got == [
        (EventKind.NCCL_REMOTE_ERROR, 3, 1),
        (EventKind.NCCL_REMOTE_ERROR, 3, 2),
        (EventKind.NCCL_IB_COMPLETION, 3, 4),
        (EventKind.NCCL_SOCKET_ERROR, None, 5),
        (EventKind.NCCL_IB_COMPLETION, None, 6),
        (EventKind.SIGNAL, None, 6),
    ]
    ofi = parse_joblog(text).events[2].details
    assert (ofi["provider"], ofi["rc"], ofi["status"], ofi["status_name"]) == ("NET/OFI", 113, 2, "UNDELIVERABLE")
    assert parse_joblog(text).events[4].details["status"] == 12


def test_slash_dates_are_iso() -> None:
    e = _one("2023/10/26 12:12:06 RuntimeError: CUDA error: unspecified launch failure", EventKind.CUDA_ERROR)
    assert e.ts == stamp_ts("2023-10-26T12:12:06Z")


def test_slurmstepd_prefix_names_the_node() -> None:
    """The shape of a real ``srun -l`` output (tests/test_postmortem_slurm.py, Slurm 22.05)."""
    line = "0: slurmstepd-sim1: error: *** STEP 1.0 ON sim1 CANCELLED AT 2026-11-24T20:19:54 ***"
    assert normalise_line(line)[0].host == "sim1"
    log = parse_joblog(line + "\n")
    assert [(e.kind, e.host, e.task) for e in log.events] == [(EventKind.SLURM_CANCELLED, "sim1", 0)]
    assert log.hosts == ["sim1"]


# --- "terminate called after throwing an instance of ...": the watchdog's teardown, or a real C++ crash ---

#: the shape of the real H100 capture (tests/fixtures/flight_recorder/nccl_1rank_gpu_stall/stderr.txt lines 30-31)
TEARDOWN = (
    "terminate called after throwing an instance of 'c10::DistBackendError'\n"
    "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: "
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, "
    "NumelOut=8, Timeout(ms)=3000) ran for 3019 milliseconds before timing out.\n"
)


def test_terminate_after_a_watchdog_timeout_is_its_teardown_with_the_rank_of_its_what() -> None:
    e = _one(TEARDOWN, EventKind.SIGNAL)
    assert (e.line, e.rank, e.details["exception"], e.details["teardown_of"]) == (
        1,
        3,
        "c10::DistBackendError",
        "watchdog-timeout",
    )


def test_terminate_with_its_what_on_the_same_line_and_older_torch_wording() -> None:
    """torch 2.1 wrote ``[Rank 6] NCCL watchdog thread terminated with exception`` (catalyst-rl-tutorial#15);
    a paste may put the what() on the terminate line."""
    line = (
        "terminate called after throwing an instance of 'c10::DistBackendError' what(): [Rank 6] NCCL watchdog "
        "thread terminated with exception: [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum="
        "880, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800902 milliseconds before "
        "timing out."
    )
    e = _one(line, EventKind.SIGNAL)
    assert (e.rank, e.details["teardown_of"]) == (6, "watchdog-timeout")


def test_terminate_teardown_of_another_group_names_no_global_rank() -> None:
    """``[PG 3 Rank 5]`` (sglang#1693) is rank 5 of group 3, not the global rank 5."""
    text = TEARDOWN.replace("[PG ID 0 PG GUID 0(default_pg) Rank 3]", "[PG 3 Rank 5]").replace("[Rank 3]", "[Rank 5]")
    e = _one(text, EventKind.SIGNAL)
    assert e.rank is None and e.details["teardown_of"] == "watchdog-timeout"


def test_terminate_teardown_after_a_cuda_error_names_that_error() -> None:
    """The watchdog taken down by a CUDA error (the error text of fixtures 08/36)."""
    text = (
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: "
        "CUDA error: an illegal memory access was encountered\n"
    )
    e = _one(text, EventKind.SIGNAL)
    assert (e.rank, e.details["teardown_of"]) == (0, "cuda-error")


def test_terminate_of_a_real_cpp_crash_is_no_teardown() -> None:
    text = (
        "[rank2]: terminate called after throwing an instance of 'std::bad_alloc'\n[rank2]:   what():  std::bad_alloc\n"
    )
    e = _one(text, EventKind.SIGNAL)
    assert (e.rank, e.details["exception"], e.details["what"]) == (2, "std::bad_alloc", "std::bad_alloc")
    assert "teardown_of" not in e.details
    # a timeout's text in the what() of an exception the watchdog never throws proves nothing
    e = _one(TEARDOWN.replace("c10::DistBackendError", "std::logic_error"), EventKind.SIGNAL)
    assert "teardown_of" not in e.details and e.rank is None


def test_interleaved_terminates_take_the_what_of_their_own_process() -> None:
    """torchrun's ``[defaultN]:`` prefixes: two processes abort at once, their what() lines in the other order."""
    text = (
        "[default0]:terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "[default1]:terminate called after throwing an instance of 'std::bad_alloc'\n"
        "[default1]:  what():  std::bad_alloc\n"
        "[default0]:  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated "
        "with exception: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
        "OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=3000) ran for 3019 milliseconds before timing out.\n"
    )
    sig = [e for e in parse_joblog(text).events if e.kind is EventKind.SIGNAL]
    assert [(e.local_rank, e.rank, e.details.get("teardown_of"), e.details["what"][:14]) for e in sig] == [
        (0, 0, "watchdog-timeout", "[PG ID 0 PG GU"),
        (1, None, None, "std::bad_alloc"),
    ]


def test_a_what_too_far_from_its_terminate_is_not_its_own() -> None:
    filler = "step ok\n" * 20
    text = TEARDOWN.replace("\n", "\n" + filler, 1)
    e = _one(text, EventKind.SIGNAL)
    assert "what" not in e.details and e.rank is None


def test_the_same_message_on_many_ranks_gives_independent_events() -> None:
    # _events_of is memoised per message body: ranks printing the same words must still get their own rank,
    # and changing one event's details must not reach another's
    log = parse_joblog("\n".join(f"[rank{r}]:{WD}" for r in range(4)))
    assert [e.rank for e in log.events] == [0, 1, 2, 3]
    log.events[0].details["seq"] = -1
    assert all(e.details["seq"] != -1 for e in log.events[1:])
    again = parse_joblog(f"[rank9]:{WD}")
    assert again.events[0].rank == 9 and again.events[0].details["seq"] != -1


def test_past_the_event_budget_each_rank_keeps_its_first_event(monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetdx.probes.parsers import joblog

    monkeypatch.setattr(joblog, "EVENT_BUDGET", 10)
    lines = [f"[rank0]:{WD}"] * 20 + [f"[rank{r}]:{WD}" for r in range(1, 40) for _ in range(3)]
    log = parse_joblog("\n".join(lines))
    # rank 0 filled the budget with 10 of its 20; every later rank keeps its first line only
    assert [e.rank for e in log.events] == [0] * 10 + list(range(1, 40))
    assert log.events_dropped == len(lines) - len(log.events)


@pytest.mark.parametrize(
    "line",
    [
        "[rank3]: RuntimeError: NCCL error",
        "[rank3]:[rank4]: x",
        "0: [rank5]: x",
        "7:\tx",
        "123456: x",
        "1234567: x",  # seven digits: no srun -l task prefix
        "12:30: x",
        "[rank\u0663]: x",  # a digit of another script
        "\u0663: x",
        "[rank00]:  >  quoted",
        "[rank1]: node1: [rank3]: x",
        "3: 2024-01-01 10:00:00 node1: x",
        "[rank2]:" + " [rank1]:" * 12 + " x",  # more prefixes than are read
        "[rank9]:" + "y" * 2000,  # longer than the memo takes
    ],
)
def test_rank_prefix_fast_path_reads_as_the_full_reader(line: str) -> None:
    # the [rankN]: / N: prefix is split off by hand and the rest memoised: the result must be the full reader's
    from fleetdx.probes.parsers import logline

    assert logline._strip_prefixes(line) == logline._strip_all(line, logline._MAX_PREFIXES)


def test_kernel_lowercase_link_down_is_read() -> None:
    # _LINK_RE reads "[Ll]ink"; the kernel gate once asked for "Link" and never let a lowercase line through
    log = parse_kernel_log("[Tue Mar  5 10:00:00 2024] mlx5_core 0000:3b:00.0 ib0: link down\n", "k", host="h")
    assert [(e.kind, e.details["device"]) for e in log.events] == [(EventKind.IB_LINK_DOWN, "ib0")]


def test_torch_24_timeout_at_nccl_work_cut_after_a_blank_is_joined_with_it() -> None:
    # real lines (mila-iqia/milabench PR #269, a public log): a hard wrap cut torch >= 2.4's "Timeout at NCCL work"
    # line after "last enqueued "; joined without the blank the words ran together and no event was read
    log = parse_joblog(
        "n1.nolog [stderr] [rank3]:[E909 09:55:46.996672294 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 3] "
        "Timeout at NCCL work: 2070, last enqueued \n"
        "NCCL work: 2082, last completed NCCL work: 2069.\n"
    )
    (e,) = log.events
    assert e.kind is EventKind.WORK_PROGRESS and e.rank == 3
    assert (e.details["at_work"], e.details["last_enqueued"], e.details["last_completed"]) == (2070, 2082, 2069)


def test_a_wrap_cut_mid_word_is_joined_without_a_blank() -> None:
    log = parse_joblog(
        "[rank2]:[E ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran f\n"
        "or 1800010 milliseconds before timing out.\n"
    )
    (e,) = log.events
    assert e.kind is EventKind.WATCHDOG_TIMEOUT and e.details["ran_for_ms"] == 1800010


def test_watchdog_exception_cut_after_its_rank_tag_keeps_the_rank() -> None:
    # real lines (huggingface/open-r1 issue #620, a public log): the what() of the watchdog's exception was cut
    # after "[Rank 2]" and again mid-word; the timeout is rank 2's, in the default group
    log = parse_joblog(
        "  what():    what():    what():  [PG ID 0 PG GUID 0(default_pg) Rank 2] Process group watchdog thread "
        "terminated with exception: [Rank 2]\n"
        " Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, "
        "NumelOut=112, Timeout(ms)=1800000) ran f\n"
        "or 1800010 milliseconds before timing out.\n"
    )
    (e,) = log.events
    assert e.kind is EventKind.WATCHDOG_TIMEOUT and e.rank == 2
    assert (e.details["seq"], e.details["ran_for_ms"]) == (4, 1800010)


@pytest.mark.parametrize(
    "line",
    [
        "stdout: [rank3]: RuntimeError: NCCL error",
        "2024-01-01T00:00:00.123Z stderr F [rank3]: RuntimeError: NCCL error",  # a container runtime's log line
        "node1: stderr: [rank3]: RuntimeError: NCCL error",
    ],
)
def test_a_stream_tag_keeps_the_rank_behind_it(line: str) -> None:
    (ll,) = normalise_line(line)
    assert (ll.body, ll.rank) == ("RuntimeError: NCCL error", 3)


def test_an_nccl_host_printed_as_a_dash_is_no_host() -> None:
    log = parse_joblog("-:1234:5678 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.1.1.3<4567>")
    assert log.events and all(e.host is None for e in log.events) and "-" not in log.hosts


def test_a_bare_clock_time_before_the_rank_prefix_is_a_prefix() -> None:
    """A collector that stamps each line with a time of day only (ms-swift's log, tests/fixtures/joblogs_wild/10):
    ``18:11:06.680 [rank4]:[E205 ...]`` is rank 4's line; a time followed by words stays in the body."""
    from fleetdx.probes.parsers.logline import normalise_line

    ll = normalise_line("18:11:06.680 [rank4]:[E205 18:11:06.375750231 ProcessGroupNCCL.cpp:1870] [Rank 4] x")[0]
    assert ll.rank == 4 and ll.body.startswith("[E205 18:11:06")
    assert normalise_line("12:00:01 step 7 done [x]")[0].body == "12:00:01 step 7 done [x]"


def test_a_ray_actor_s_node_death_takes_the_host_of_the_exception_s_ip_field() -> None:
    """Ray's ActorDiedError prints its fields (class_name, actor_id, pid, namespace, ip) on tab-indented lines, then
    the GCS's death cause: "The actor is dead because its node has died" names the node by the ip above it (wild log
    67, ray-project/ray#43751); an ip field further above, or none, names no host."""
    head = [
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
        "\tclass_name: RayTrainWorker",
        "\tpid: 6420",
        "\tip: 10.72.56.3",
    ]
    died = "The actor is dead because its node has died. Node Id: 677df2a9020c5db45e755b0078c469e2ce51e05ea093ed3b2835"
    events = parse_joblog([*head, died]).events
    assert [(e.kind, e.host) for e in events if e.kind is EventKind.NODE_FAIL] == [(EventKind.NODE_FAIL, "10.72.56.3")]
    far = parse_joblog([*head, "a", "b", "c", died]).events
    assert [(e.kind, e.host) for e in far if e.kind is EventKind.NODE_FAIL] == [(EventKind.NODE_FAIL, None)]


def test_summary_entries_before_root_cause_header_are_other_failures_when_failures_header_is_cut() -> None:
    """A paste that starts inside torch's ChildFailedError summary (its ``Failures:`` header cut off): the
    entries before the ``Root Cause`` header are the other failures, the one after it the root cause."""
    entry = "  time      : 2024-03-05_07:01:51\n  host      : node1\n  rank      : {r} (local_rank: {r})\n"
    entry += "  exitcode  : 1 (pid: 6981{r})\n  error_file: <N/A>\n"
    text = (
        entry.format(r=2)
        + "[3]:\n"
        + entry.format(r=3)
        + "------------------------------------------------------------\n"
        + "Root Cause (first observed failure):\n[0]:\n"
        + entry.format(r=0)
        + "============================================================\n"
    )
    roots = {e.rank: e.details["root_cause"] for e in parse_joblog(text, "v.log").events}
    assert roots == {2: False, 3: False, 0: True}


def test_deepspeed_launcher_line_wrapped_over_lines_keeps_its_local_rank() -> None:
    """DeepSpeed's sigkill_handler line with its command list wrapped by a terminal (wild log 45's shape): the
    ``'--local_rank=N'`` of the first line and the return code of the last are one event. The command is the last
    child the launcher started (deepspeed/launcher/launch.py prints its loop variable ``cmd``), so only
    '--local_rank=0' (one child) names the process that failed."""
    text = (
        "[2023-11-13 16:59:55,650] [ERROR] [launch.py:320:sigkill_handler] ['/opt/conda/bin/python', '-u', "
        "'train.py', '--local_rank=0', '--model', 'm', \n"
        "'--data_path', '../data/x.json', '--save_path', './ckpt/', \n"
        "] exits with return code = -9\n"
    )
    ev = _one(text, EventKind.CHILD_FAILED)
    assert (ev.local_rank, ev.details["exit_code"], ev.details["signal"]) == (0, -9, "SIGKILL")
    ev = _one(text.replace("--local_rank=0", "--local_rank=1"), EventKind.CHILD_FAILED)
    assert (ev.local_rank, ev.details["exit_code"]) == (None, -9)


def test_raylet_oom_report_wrapped_behind_syslog_escaped_colours_keeps_its_node() -> None:
    """Ray's raylet OOM report as rsyslog stores it (ESC escaped as ``#033``) and a terminal wrapped it, inside
    the node's ID (wild log 117's shape): one event, with the IP of the node as its host."""
    text = (
        "#033[2m#033[33m(raylet)#033[0m [DATE] (raylet) node_manager.cc:3007: 2 Workers (tasks /\n"
        " actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: abd406d4\n"
        "e281968fd76aa2, IP: 10.0.167.26) over the last time period. To see more information about th\n"
    )
    ev = _one(text, EventKind.OOM_HOST)
    assert ev.host == "10.0.167.26"
    assert [ll.body for ll in normalise_line("#033[2m#033[33m(raylet)#033[0m Out of memory")] == ["Out of memory"]


def test_kernel_log_after_a_shell_prompt_is_that_hosts() -> None:
    """A dmesg pasted with the prompt that ran it (wild log 161's shape): the host is the prompt's, until another
    prompt; a host the scanner is given (a bundle's) still wins over a prompt."""
    text = (
        "root@node1:~# dmesg -T | grep NVRM\n"
        "[Tue Apr  9 01:21:38 2024] NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has "
        "fallen off the bus.\n"
        "[user@gpu-02 ~]$ sudo dmesg\n"
        "[ 3601.500000] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=python, An uncorrectable double bit error\n"
        "Training step 4 loss 2.1\n"
    )
    assert [(e.host, e.details["xid"]) for e in parse_kernel_log(text).events] == [("node1", 79), ("gpu-02", 48)]
    assert {e.host for e in parse_kernel_log(text, host="b7").events} == {"b7"}


def test_markdown_backticks_glued_to_a_line_start_are_paste_damage() -> None:
    """A code span's or fence's backticks glued to a log line (wild log 180's shape): NCCL's host is read."""
    (ll,) = normalise_line("`ubuntu20-server-2:94639:94647 [0] transport/net_ib.cc:100 NCCL WARN NET/IB : x")
    assert ll.body.startswith("ubuntu20-server-2:94639")
    (fenced,) = normalise_line("```[rank3]:RuntimeError: CUDA error: an illegal memory access was encountered")
    assert (fenced.rank, fenced.body) == (3, "RuntimeError: CUDA error: an illegal memory access was encountered")


def test_json_lines_records_are_read_by_their_text_field() -> None:
    """Docker's json-file driver (a Kubernetes node's /var/log/containers file) and a benchmark runner's JSON
    lines (wild log 169's shape): the record's text is the line, its time the stamp when the line has none."""
    docker = (
        '{"log":"[rank3]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total '
        'capacity of 79.11 GiB\\n","stream":"stderr","time":"2024-03-21T02:07:08.123456789Z"}\n'
    )
    ev = _one(docker, EventKind.OOM_GPU)
    assert (ev.rank, ev.time) == (3, "2024-03-21T02:07:08.123456789Z") and ev.ts is not None
    runner = '{"event": "line", "data": "[rank1]: RuntimeError: CUDA error: unspecified launch failure\\n"}'
    assert _one(runner, EventKind.CUDA_ERROR).rank == 1
    assert [ll.body for ll in normalise_line('{"a": 1, "log": 2}')] == ['{"a": 1, "log": 2}']  # no text field


def test_host_and_local_rank_prefix() -> None:
    """``[gpu187:1]:`` (host and local rank before each line; wild log 140's shape)."""
    (ll,) = normalise_line("[gpu187:1]:torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB")
    assert (ll.host, ll.local_rank, ll.rank) == ("gpu187", 1, None)
    assert normalise_line("[12:30:01]: boom")[0].host is None  # a clock is no host


def test_determined_prefix_and_horovods_first_process() -> None:
    """Determined's ``<> [stamp] ALLOC || `` prefix around Horovod's gloo summary (wild log 138's shape)."""
    text = (
        "<>        [2021-12-07 10:43:01] 087c0ee7 || RuntimeError: Horovod detected that one or more processes "
        "exited with non-zero status, thus causing the job to be terminated. The first process to do so was\n"
        "<>        [2021-12-07 10:43:01] 087c0ee7 || Exit code: 1\n"
        "<>        [2021-12-07 10:43:01] 087c0ee7 || Process name: 1\n"
    )
    ev = _one(text, EventKind.CHILD_FAILED)
    assert (ev.rank, ev.time) == (1, "2021-12-07 10:43:01")


def test_ray_task_header_names_the_host_of_the_traceback_below() -> None:
    """A Ray task's header (wild log 153's shape): the CUDA error of the traceback below it ran on its ip; a later
    error beyond the window, or after the header was used, is not given it."""
    head = (
        "ray::WorkerDict.actor_rollout_generate_sequences() (pid=838798, ip=10.138.0.27, actor_id=f5aa8b4a, "
        "repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f98d03dda50>)\n"
    )
    frames = '  File "/x/y.py", line 1, in f\n' * 3
    err = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    events = [e for e in parse_joblog(head + frames + err + err, "v.log").events if e.kind is EventKind.CUDA_ERROR]
    assert [e.host for e in events] == ["10.138.0.27", None]
    far = head + frames * 100 + err
    assert _one(far, EventKind.CUDA_ERROR).host is None


def test_open_mpi_5_prterun_message_wrapped_before_its_signal() -> None:
    """Open MPI 5's prterun help text, wrapped at its own width before 'signal 9' (wild log 146's shape)."""
    text = "prterun noticed that process rank 0 with PID 2389672 on node iccpc2 exited on\nsignal 9 (Killed).\n"
    ev = _one(text, EventKind.SIGNAL)
    assert (ev.rank, ev.host) == (0, "iccpc2")


def test_cray_mpich_error_header_places_its_ofi_error() -> None:
    """Cray MPICH's error header names the rank and host of the error stack below it (wild log 121's shape)."""
    text = (
        "MPICH ERROR [Rank 8281] [job id 1410467.0] [Wed Aug 23 06:05:55 2023] [frontier01982] - Abort(136982671) "
        "(rank 8281 in comm 0): Fatal error in PMPI_Waitall: Other MPI error, error stack:\n"
        "PMPI_Waitall(339)..............: MPI_Waitall(count=26, req_array=0x1006e9b0) failed\n"
        "MPIDI_OFI_handle_cq_error(1062): OFI poll failed (ofi_events.c:1064:MPIDI_OFI_handle_cq_error:Input/output "
        "error - UNDELIVERABLE)\n"
    )
    ev = _one(text, EventKind.FABRIC_ERROR)
    assert (ev.rank, ev.host, ev.details["error"]) == (8281, "frontier01982", "Input/output error - UNDELIVERABLE")


def test_torch_npu_error_header_ranks_the_cann_error_below_it() -> None:
    """torch_npu's ``[ERROR] TIME (PID:N, Device:D, RankID:R) ERR...`` line gives the global rank (not the device)
    of the CANN error lines printed under it (wild log 867's shape)."""
    text = (
        "[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:1, RankID:3) ERR02200 DIST call hccl api failed.\n"
        "EJ0001: 2024-05-21-11:57:54.167.645 Failed to initialize the HCCP process. Reason: Maybe the last training "
        "process is running.\n"
    )
    ev = _one(text, EventKind.CUDA_ERROR)
    assert (ev.rank, ev.details["catalog"]) == (3, "cann.hccp.ej0001_init_failed")


def test_metaflow_task_and_run_uuid_prefixes() -> None:
    """Metaflow's ``[RUN/STEP/TASK (pid N)] [UUID] `` before a task's lines (wild log 206's shape)."""
    (ll,) = normalise_line(
        "2023-04-29 06:01:12.977 [177/train/578 (pid 28936)] [09c561ee-a44c-4795-967c-7183a83b3160] OSError: "
        "[Errno 28] No space left on device"
    )
    assert (ll.body, ll.time) == ("OSError: [Errno 28] No space left on device", "2023-04-29 06:01:12.977")


def test_hydra_bad_termination_box_names_host_and_sigkill() -> None:
    """mpiexec.hydra's BAD TERMINATION box (wild log 189's shape): the host's line and the exit code's line are
    one message; exit code 9 is SIGKILL."""
    text = (
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   PID 92248 RUNNING AT fzh-desktop\n"
        "=   EXIT CODE: 9\n"
        "=   CLEANING UP REMAINING PROCESSES\n"
    )
    ev = _one(text, EventKind.CHILD_FAILED)
    assert (ev.host, ev.details["exit_code"], ev.details["signal"]) == ("fzh-desktop", 9, "SIGKILL")


def test_nccl_cuda_failure_with_the_errors_number() -> None:
    """NCCL >= 2.19 prints the CUDA error's number before its text (wild log 255's shape): still an OOM."""
    ev = _one(
        "TENCENT64:47604:53083 [0] include/alloc.h:103 NCCL WARN Cuda failure 2 'out of memory'\n",
        EventKind.NCCL_CUDA_FAILURE,
    )
    assert (ev.host, ev.details["error"]) == ("TENCENT64", "out of memory")


def test_open_mpi_lost_daemon_names_its_node_two_lines_below() -> None:
    """ORTE's lost-daemon help text (wild log 194's shape): the node is on its 'hostname:' line after a blank."""
    text = (
        " ORTE has lost communication with its daemon located on node:\n"
        "\n"
        "   hostname:  ip-10-15-20-17.ec2.internal\n"
        "\n"
        " This is usually due to either a failure of the TCP network\n"
    )
    assert _one(text, EventKind.NODE_FAIL).host == "ip-10-15-20-17.ec2.internal"
    far = text.replace("\n\n   hostname", "\n\n\n\n\n\n   hostname")
    assert _one(far, EventKind.NODE_FAIL).host is None  # too far below: not its node


def test_deepspeed_launcher_exit_line_keeps_the_childs_local_rank_whatever_its_kind() -> None:
    """DeepSpeed's sigkill_handler line with a command list (wild logs 334 and 363's shapes): '--local_rank=0' (the
    launcher's only child) is read on a bus error's exit code too, and through a pasted space; '--local_rank=1' is
    the last child it started, not the one that failed, and names no rank."""
    bus = _one(
        "[2023-05-17 11:25:13,146] [ERROR] [launch.py:324:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
        "'--local_rank=1', '--deepspeed_config', 'eyJ0'] exits with return code = -7\n",
        EventKind.BUS_ERROR,
    )
    assert "local_rank" not in bus.details and bus.local_rank is None
    spaced = _one(
        "[2023-09-07 13:55:11,220] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', './ht_01.py', "
        "'-- local_rank=0'] exits with return code = 1\n",
        EventKind.CHILD_FAILED,
    )
    assert spaced.details["local_rank"] == 0


def test_olmo_logger_prefix_names_the_rank_and_an_uncaught_exception_is_read() -> None:
    """OLMo's log line (wild log 340's shape): its '[module:line, rank=N]' is the rank, and its excepthook's
    'Uncaught XError: ...' is the exception."""
    ev = _one(
        "[2024-04-18 19:10:41] CRITICAL [olmo.util:158, rank=0] Uncaught OLMoThreadError: generator thread data "
        "thread 3 failed\n",
        EventKind.PYTHON_EXCEPTION,
    )
    assert (ev.rank, ev.details["type"]) == (0, "OLMoThreadError")
    assert normalise_line("INFO     [olmo.train:816, rank=3] [step=75/739328]")[0].rank == 3


def test_a_log_quoted_as_a_code_span_after_prose_keeps_its_rank_prefix() -> None:
    """A log pasted inside a sentence (wild log 342's shape): the prose before the code span is not a prefix."""
    (ll,) = normalise_line(
        "as soon as I allocate more than one GPU on a node it returns  `[rank7]: torch.distributed.DistBackendError: "
        "NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error"
    )
    assert ll.rank == 7 and ll.body.startswith("torch.distributed.DistBackendError")


def test_vllm_logger_prefix_and_torch_cuda_ncclS_numbered_error() -> None:
    """vLLM's logger behind a Ray worker's prefix (wild log 361's shape), and torch.cuda.nccl's 'NCCL Error 2:'
    wording: the host is the worker's ip and the error NCCL's system error."""
    ev = _one(
        "(RayWorkerWrapper pid=67451, ip=10.1.0.7) ERROR 06-25 15:28:30 worker_base.py:148] RuntimeError: NCCL Error "
        "2: unhandled system error (run with NCCL_DEBUG=INFO for details)\n",
        EventKind.NCCL_SYSTEM_ERROR,
    )
    assert ev.host == "10.1.0.7"
    (ll,) = normalise_line("(VllmWorker pid=3269) INFO 08-04 16:39:12 [executor_base.py:226] It took 0.19 seconds")
    assert ll.body == "It took 0.19 seconds"


def test_a_ray_actor_whose_repr_names_its_rank() -> None:
    """NeMo-RL's actors print as 'MegatronPolicyWorker[rank=0]' in Ray's prefix (wild log 308's shape)."""
    ev = _one(
        "(MegatronPolicyWorker[rank=0] pid=4182) [f676f732498b:4182 :0:4182] Caught signal 11 (Segmentation fault: "
        "address not mapped to object at address 0x3121dc10)\n",
        EventKind.SIGNAL,
    )
    assert (ev.rank, ev.host, ev.details["signal"]) == (0, "f676f732498b", "SIGSEGV")  # UCX prints the number


def test_device_side_asserts_take_the_rank_of_the_traceback_that_follows() -> None:
    """The GPU's assert lines reach the log unprefixed; the traceback of the rank that launched the kernel follows
    behind its prefix (wild logs 336 and 337's shapes). A ranked line that opens no traceback, or one too far
    below, gives no rank."""
    asserts = "".join(
        f"/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1284: indexSelectLargeIndex: block: [37,0,0], thread: "
        f"[{t},0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
        for t in (92, 93)
    )
    tb = '[rank3]: Traceback (most recent call last):\n[rank3]:   File "train.py", line 154, in <module>\n'
    events = [e for e in parse_joblog(asserts + tb, "v.log").events if e.kind is EventKind.CUDA_ERROR]
    assert events and {e.rank for e in events} == {3}
    assert all(e.details["rank_from_line"] == 3 for e in events)
    other = asserts + "[rank3]: loss 1.0 Error budget\n" + tb
    assert {e.rank for e in parse_joblog(other, "v.log").events if e.kind is EventKind.CUDA_ERROR} == {None}
    far = asserts + "".join(f"step {i}\n" for i in range(45)) + tb
    assert {e.rank for e in parse_joblog(far, "v.log").events if e.kind is EventKind.CUDA_ERROR} == {None}


def test_nccl_warn_lines_of_one_process_take_the_rank_of_the_traceback_that_follows() -> None:
    """NCCL writes its WARN lines itself, past torch's rank prefix; the rank's traceback follows (wild log 435's
    shape). WARN lines of two processes (two pids) before it take no rank: which one raised is unknown."""
    warn = "SGES-DT282:{pid}:{pid} [0] bootstrap.cc:48 NCCL WARN Bootstrap : no socket interface found\n"
    tb = "[rank0]: Traceback (most recent call last):\n"
    (ev,) = parse_joblog(warn.format(pid=4893) + tb, "v.log").events
    assert (ev.kind, ev.rank, ev.host, ev.details["rank_from_line"]) == (
        EventKind.NCCL_NO_SOCKET_INTERFACE,
        0,
        "SGES-DT282",
        2,
    )
    two = parse_joblog(warn.format(pid=4893) + warn.format(pid=4894) + tb, "v.log").events
    assert [e.rank for e in two] == [None, None]


def test_ctime_glued_to_a_tag_and_open_mpis_host_pid_prefix() -> None:
    """A ctime stamp glued to Open MPI's tag (wild log 416's shape) and Open MPI's '[host:pid] ' before its signal
    handler's lines (wild log 405's shape)."""
    (ll,) = normalise_line("Fri Aug 11 12:31:45 2023[1,0]<stdout>:tomte401:1850301:1881341 [0] NCCL WARN x")
    assert (ll.rank, ll.time, ll.body[:8]) == (0, "Fri Aug 11 12:31:45 2023", "tomte401")
    ev = _one("[rack1-93-slot7:186363] Signal: Aborted (6)\n", EventKind.SIGNAL)
    assert ev.host == "rack1-93-slot7"


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        # Paddle's enforce: the NCCL status number in parentheses
        (
            "OSError: (External) NCCL error(6), remote process exited or there was a network error.",
            EventKind.NCCL_REMOTE_ERROR,
        ),
        ("OSError: (External) NCCL error(1), unhandled cuda error.", EventKind.NCCL_CUDA_FAILURE),
        # nccl-tests' NCCLCHECK
        (
            "test-nccl-p5-2-worker-0: Test NCCL failure common.cu:961 'internal error - please report this issue to "
            "the NCCL developers / '",
            EventKind.NCCL_INTERNAL_ERROR,
        ),
    ],
)
def test_other_wordings_of_an_nccl_status(line: str, kind: EventKind) -> None:
    """Paddle's and nccl-tests' ways of printing NCCL's status string (wild logs 454, 462, 410's shapes)."""
    _one(line + "\n", kind)


def test_abseils_older_failure_signal_line() -> None:
    """abseil's failure signal handler as older jaxlib prints it (wild log 461's shape)."""
    ev = _one(
        "*** SIGSEGV (@(nil)), see gl__________41#s15 received by PID 11743 (TID 12350) on cpu 17; stack trace: ***\n",
        EventKind.SIGNAL,
    )
    assert ev.details["signal"] == "SIGSEGV"


def test_open_mpis_mpi_abort_names_the_rank_that_called_it() -> None:
    """Open MPI's MPI_ABORT help text (wild log 402's shape): the rank in its words is the rank that failed."""
    ev = _one(" MPI_ABORT was invoked on rank 2 in communicator MPI COMMUNICATOR 5 DUP FROM 0\nwith errorcode 1.\n",
              EventKind.SIGNAL)  # fmt: skip
    assert ev.rank == 2


def test_vllm_workers_prefix_with_space_separated_fields() -> None:
    """vLLM's multiprocessing workers print '(VllmWorker rank=0 pid=10672)' (wild log 636's shape)."""
    (ll,) = normalise_line("(VllmWorker rank=0 pid=10672) ERROR 03-16 06:12:38 [multiproc_executor.py:375] x")
    assert (ll.rank, ll.pid, ll.body) == (0, 10672, "x")


@pytest.mark.parametrize(
    ("name", "rank"),
    [("Worker_TP1_EP1", 1), ("Worker_TP3", 3), ("Worker_TP2_DCP1", 2), ("Worker_PP1_TP1", None),
     ("Worker_DP1_TP0_EP1", None), ("Worker", None)],
)  # fmt: skip
def test_vllm_v1_worker_names_give_the_rank_only_when_tp_is_the_whole_world(name: str, rank: int | None) -> None:
    """vLLM v1's worker names (wild log 1952's shape): with no DP, PP or PCP part, the TP rank is the global rank;
    with one, the TP rank is a rank inside a group and is not read."""
    (ll,) = normalise_line(f"({name} pid=636) ERROR 06-19 14:45:12 [multiproc_executor.py:990] x")
    assert (ll.rank, ll.pid, ll.body) == (rank, 636, "x")


@pytest.mark.parametrize(
    ("tags", "rank"),
    [("TP2", 2), ("TP10 EP10", 10), ("DP1 TP10", None), ("PP1 TP3", None), ("DP0 PP1 TP2 EP0", None)],
)
def test_sglang_logger_prefix_gives_the_rank_only_when_tp_is_the_whole_world(tags: str, rank: int | None) -> None:
    """SGLang's '[STAMP TP2] ' prefix (sglang/srt/managers/scheduler.py): the stamp is read and removed; the TP rank
    is the global rank only when no DP or PP part is named."""
    (ll,) = normalise_line(
        f"[2025-02-09 21:23:00 {tags}] Scheduler hit an exception: Traceback (most recent call last):"
    )
    assert (ll.rank, ll.time, ll.body) == (
        rank,
        "2025-02-09 21:23:00",
        "Scheduler hit an exception: Traceback (most recent call last):",
    )


def test_sglang_logger_prefix_of_older_releases_has_the_clock_time_alone() -> None:
    """SGLang before 2025 printed '[19:01:01 TP1] ' (wild log 1863's shape): the rank is read, no date is made up."""
    (ll,) = normalise_line("[19:01:01 TP1] Init nccl begin.")
    assert (ll.rank, ll.time, ll.body) == (1, None, "Init nccl begin.")


def test_sglang_scheduler_exception_gives_its_rank_to_the_traceback_below_and_a_raise_line_is_no_event() -> None:
    """SGLang prints its scheduler's exception with the logger's prefix on the first line only (sglang issue #3460's
    shape): the exception at the traceback's end is that rank's; the traceback's ``raise RuntimeError(f"NCCL error:
    ...")`` source line is code, not a message."""
    log = (
        "[2025-02-09 21:23:00] Received sigquit from a child proces. It usually means the child failed.\n"
        "[2025-02-09 21:23:00 TP2] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl-workspace/sglang/python/sglang/srt/distributed/device_communicators/pynccl_wrapper.py", '
        "line 329, in NCCL_CHECK\n"
        '    raise RuntimeError(f"NCCL error: {error_str}")\n'
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
    )
    events = parse_joblog(log).events
    assert [(e.kind, e.rank, e.line) for e in events] == [(EventKind.NCCL_SYSTEM_ERROR, 2, 5)]


@pytest.mark.parametrize(("code", "named"), [("2", "cdr2601"), ("1", None)])
def test_an_execve_failure_takes_the_host_of_srun_s_task_exit_with_its_errno(code: str, named: str | None) -> None:
    """slurmstepd's execve() failure names no host; the task exits with the errno as its code (ENOENT: 2), so srun's
    'HOST: task N: Exited with exit code 2' just below is the same task (wild log 2412's shape); another code is not."""
    log = (
        "slurmstepd: error: execve(): accelerate: No such file or directory\n"
        f"srun: error: cdr2601: task 1: Exited with exit code {code}\n"
    )
    (ev,) = [e for e in parse_joblog(log).events if e.kind is EventKind.LAUNCH_FAILED]
    assert ev.host == named


# Lightning's rank initialisation lines (the shapes of wild logs 1409 and 1558: lightning/fabric's
# "Initializing distributed: GLOBAL_RANK: N, MEMBER: N+1/W", "initializing ddp: ..." before 1.3)
def _claims(*ranks: int, world: int = 4, prefix: str = "", lead: str = "Initializing distributed") -> list[str]:
    return [f"{prefix}{lead}: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{world}" for r in ranks]


@pytest.mark.parametrize(
    "lines",
    [
        _claims(0, 1, 2, 3, 1, 2),  # one process per node started as node 0's ranks
        _claims(1, 2, lead="initializing ddp") + _claims(2, lead="initializing ddp"),
        [*_claims(1, 3, prefix="0: "), *_claims(3, prefix="1: ")],  # srun -l: two tasks, one rank
    ],
)
def test_a_rank_initialised_twice_is_one_duplicate_rank_event(lines: list[str]) -> None:
    events = parse_joblog("\n".join(lines), "v.log").events
    dups = [e for e in events if e.kind is EventKind.DUPLICATE_RANK]
    assert dups, events
    first = dups[0]
    assert first.rank is None and first.task is None  # no rank failed: neither is the culprit
    assert first.details["first_line"] < first.line
    assert first.details["world_size"] == 4


@pytest.mark.parametrize(
    "lines",
    [
        _claims(0, 1, 2, 3),  # each rank once
        _claims(0, 1) + _claims(0, 1, world=2),  # two runs of other world sizes in one file
        # a restart after a failure prints every rank again
        [*_claims(0, 1), "RuntimeError: CUDA error: an illegal memory access was encountered", *_claims(0, 1)],
    ],
)
def test_ranks_initialised_once_per_run_are_no_duplicate(lines: list[str]) -> None:
    events = parse_joblog("\n".join(lines), "v.log").events
    assert not [e for e in events if e.kind is EventKind.DUPLICATE_RANK], events


def test_a_code_spans_closing_backtick_at_a_lines_end_is_no_part_of_it() -> None:
    """A paste that opened a markdown code span on its first line closes it on its last (wild log 4497:
    "RuntimeError: Address already in use`"); a line with a pair of backticks keeps them."""
    (ll,) = normalise_line("RuntimeError: Address already in use`")
    assert ll.body == "RuntimeError: Address already in use"
    (pair,) = normalise_line("hint: run `ulimit -l` first`` ")
    assert pair.body == "hint: run `ulimit -l` first``"
    (kept,) = normalise_line("install it with `pip install fleetdx`")
    assert kept.body == "install it with `pip install fleetdx`"


def test_espnets_logger_prefix_places_its_global_rank_on_its_host() -> None:
    """ESPnet prints '[host:rank/world] ' before each line (espnet2/tasks/abs_task.py); a line no event is read
    from still places the rank (wild log 4409: rank 0's INFO lines name lion15, its SIGKILL line names no host)."""
    (ll,) = normalise_line("[lion15:0/4] 2020-09-05 20:04:10,182 (lm:187) INFO: Vocabulary size: 35")
    assert (ll.rank, ll.host, ll.time) == (0, "lion15", "2020-09-05 20:04:10,182")
    log = parse_joblog("[lion15:0/4] 2020-09-05 20:04:10,182 (lm:187) INFO: Vocabulary size: 35\n", "e.log")
    assert log.rank_hosts == {0: "lion15"}
    # Open MPI's "[host:pid]" and a "[gpu187:1]:" local-rank prefix are not this
    assert normalise_line("[gpu187:1]: hello")[0].rank is None


def test_a_link_inside_a_links_text_unwraps_in_turn() -> None:
    """A page that linked an already linked paste (wild log 4514: ``[[proxy.cc:1495](http://proxy.cc:1495/)](...)``)
    leaves NCCL's source location as printed."""
    (ll,) = normalise_line(
        "A100-02:2358430:2358556 [1] [[proxy.cc:1495](http://proxy.cc:1495/)](http://proxy.cc:1495/) NCCL WARN x"
    )
    assert ll.body.endswith("[1] proxy.cc:1495 NCCL WARN x")


def test_a_cuda_error_with_its_number_before_the_text_is_read() -> None:
    """'CUDA error N: text' (TFRA's CUDA_CHECK, wild log 4523): number 2 out of memory is the GPU's OOM."""
    oom = parse_joblog("what():  cuckoo_hashtable_op_gpu.cu.cc:413: CUDA error 2: out of memory\n", "t.log").events
    assert [e.kind for e in oom] == [EventKind.OOM_GPU]
    ima = parse_joblog("CUDA error 700: an illegal memory access was encountered\n", "t.log").events
    assert [(e.kind, e.details.get("error")) for e in ima] == [
        (EventKind.CUDA_ERROR, "an illegal memory access was encountered")
    ]


def test_a_dump_signal_line_cut_by_a_wrap_before_its_tail_still_names_the_timeout() -> None:
    """A terminal wrapped Flight Recorder's dump-signal line after 'dump the' (wild log 4917): what it says is in
    its head, the rank that saw the timeout."""
    events = parse_joblog(
        "[rank1]:[E603 04:19:16.570252694 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 1] Received "
        "a dump signal due to a collective timeout from this local rank and we will try our best to dump the\n"
        "debug info. Last enqueued NCCL work: 427698, last completed NCCL work: 427697.\n",
        "t.log",
    ).events
    assert [(e.kind, e.rank) for e in events] == [(EventKind.FLIGHT_RECORDER_DUMP, 1)]


def test_pytests_exception_marker_is_a_quote_not_part_of_the_line() -> None:
    """pytest prints 'E' and spaces before each line of the exception it reports (wild logs 1753, 1909); glog's
    'E0321 ...' severity letter is no such marker."""
    (ll,) = normalise_line("E       -- Process 3 terminated with the following error:")
    assert ll.body == "-- Process 3 terminated with the following error:"
    # inside a method the marker's spaces follow the source's indent (wild log 4418, MindSpore under pytest)
    (deep,) = normalise_line("E           RuntimeError: Loading libgpu_collective.so failed.")
    assert deep.body == "RuntimeError: Loading libgpu_collective.so failed."
    (glog,) = normalise_line("E0321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] x")
    assert glog.body.startswith("E0321 02:07:08")


def test_an_actor_deaths_ip_field_below_it_names_its_host_with_a_tab_or_its_spaces() -> None:
    """ActorDiedError prints its first sentence, then its fields, the ip last (wild logs 1361, 910: a paste turned
    the tab into spaces); a death far above the field keeps no host."""
    for indent in ("\t", " " * 8):
        fields = "".join(f"{indent}{k}: v\n" for k in ("class_name", "actor_id", "pid", "namespace"))
        text = (
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
            f"{fields}{indent}ip: 172.31.16.7\n"
        )
        assert _one(text, EventKind.CHILD_FAILED).host == "172.31.16.7"
        far = text.replace(fields, fields * 3)
        assert _one(far, EventKind.CHILD_FAILED).host is None


def test_nccls_cuda_failure_on_a_line_of_its_own_is_read() -> None:
    """checks.h's "Cuda failure N 'text'" with no NCCL WARN marker and no "Last error:" on its line (a log cut
    above it, wild logs 4922 and 2058) is NCCL's CUDA failure; prose that only says the words is not."""
    ev = parse_joblog("Cuda failure 1 'invalid argument'\nTraceback (most recent call last):\n", "t.log").events
    assert [(e.kind, e.details.get("error")) for e in ev] == [(EventKind.NCCL_CUDA_FAILURE, "invalid argument")]
    assert parse_joblog("we saw no cuda failure in this run\n", "t.log").events == []


def test_the_abort_reason_below_an_nccl_errors_what_names_its_rank() -> None:
    """torch < 2.2 puts ProcessGroupNCCL's abort reason ("Process Group destroyed on rank N") on the line after the
    what() of the NCCL error that abort raised (wild logs 3307, 4923): the error and its terminate are rank N's;
    the same words after an unrelated line name nothing."""
    what = (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:181, unhandled cuda error, "
        "NCCL version 21.0.3\n"
    )
    ev = parse_joblog(what + "Process Group destroyed on rank 3\n", "t.log").events
    assert {(e.kind, e.rank) for e in ev} == {(EventKind.SIGNAL, 3), (EventKind.NCCL_CUDA_FAILURE, 3)}
    apart = parse_joblog(what + "loading shard 2\nProcess Group destroyed on rank 3\n", "t.log").events
    assert {e.rank for e in apart} == {None}


def test_deepspeeds_bare_kernel_execution_error_is_a_cuda_error_of_its_rank() -> None:
    """The cuBLAS wrapper's '!!!! kernel execution error.' without the GEMM's sizes (an older DeepSpeed behind Open
    MPI's '[1,290]<stderr>:' prefix, wild log 5454) is a CUDA error of rank 290."""
    ev = parse_joblog("[1,290]<stderr>:!!!! kernel execution error.\n", "t.log").events
    assert [(e.kind, e.rank) for e in ev] == [(EventKind.CUDA_ERROR, 290)]
