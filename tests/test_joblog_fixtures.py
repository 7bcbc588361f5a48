"""The 22 real job logs of tests/fixtures/joblogs/ (README.md names their sources): per file, the facts read
from it by eye: event kinds, ranks, hosts, SeqNums, statuses, exit codes, line numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.probes.parsers.joblog import EventKind as K
from fleetdx.probes.parsers.joblog import JobEvent, JobLog, parse_joblog
from fleetdx.probes.parsers.joblog_kernel import parse_kernel_log

FIX = Path(__file__).parent / "fixtures" / "joblogs"


def _log(prefix: str, kernel: bool = False) -> JobLog:
    (path,) = FIX.glob(prefix + "_*.log")
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse_kernel_log(f, path.name) if kernel else parse_joblog(f, path.name)


def _of(log: JobLog, kind: K) -> list[JobEvent]:
    """The events of ``kind``, the fallback evidence left out (C++ frames of the function that threw: judged only
    in a log with nothing else)."""
    return [e for e in log.events if e.kind is kind and e.details.get("role") != "fallback"]


def test_all_22_files_are_read() -> None:
    assert len(list(FIX.glob("*.log"))) == 22


def test_01_watchdog_allreduce_seq1580_last_completed_1579() -> None:
    log = _log("01")
    wd = _of(log, K.WATCHDOG_TIMEOUT)
    assert [(e.rank, e.details["seq"], e.details["op"], e.details["timeout_ms"]) for e in wd] == [
        (0, 1580, "ALLREDUCE", 600000),
        (4, 1580, "ALLREDUCE", 600000),
    ]
    assert [e.details["ran_for_ms"] for e in wd] == [600060, 600067]
    prog = _of(log, K.WORK_PROGRESS)
    assert [(e.rank, e.line, e.details["last_enqueued"], e.details["last_completed"]) for e in prog] == [
        (0, 3, 1582, 1579),
        (3, 4, 1582, 1579),
    ]
    assert prog[0].details["pg"] == 1
    assert wd[0].time == "E321 02:07:08.408271257"


def test_02_default_pg_guid_lines() -> None:
    log = _log("02")
    assert [e.rank for e in _of(log, K.WATCHDOG_TIMEOUT)] == [1, 0, 2]
    assert {e.details["seq"] for e in _of(log, K.WATCHDOG_TIMEOUT)} == {808}
    prog = _of(log, K.WORK_PROGRESS)
    assert [(e.rank, e.details["pg"], e.details["pg_desc"], e.details["last_completed"]) for e in prog] == [
        (1, 0, "default_pg", 807),
        (0, 0, "default_pg", 807),
    ]


def test_03_ib_completion_status_12_vendor_129_on_kp_ddp_worker_0() -> None:
    ev = _of(_log("03"), K.NCCL_IB_COMPLETION)
    assert [e.line for e in ev] == [1, 6, 11]
    assert {(e.host, e.details["status"], e.details["vendor"], e.details["dir"]) for e in ev} == {
        ("kp-ddp-worker-0", 12, 129, "Recv")
    }
    assert ev[0].details["peer"] == "10.216.210.236<54862>" and ev[0].details["cuda_device"] == 4


def test_04_child_failed_root_cause_rank0_sigkill() -> None:
    (cf,) = _of(_log("04"), K.CHILD_FAILED)
    assert (cf.rank, cf.local_rank, cf.line) == (0, 0, 18)
    assert cf.host == "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker"
    assert cf.details["root_cause"] is True and cf.details["exit_code"] == -9 and cf.details["pid"] == 14750
    assert cf.details["signal"] == "SIGKILL" and cf.time == "2025-05-21_15:43:03"


def test_05_kernel_aer_surprise_down_then_xid79() -> None:
    log = _log("05", kernel=True)
    aer = _of(log, K.AER)
    assert [e.line for e in aer] == [1, 2, 4, 5, 6, 8]
    assert aer[3].details["received"] == "Uncorrected (Fatal)"
    assert aer[5].details["error"] == "Surprise Down Error" and aer[5].details["first"] is True
    (xid,) = _of(log, K.XID)
    assert (xid.line, xid.details["xid"], xid.details["pci"], xid.details["uptime_s"]) == (
        13,
        79,
        "0000:02:00",
        74889.644138,
    )
    # the job-log parser reads no training event from a kernel log
    assert _log("05").events == []


def test_06_two_process_groups_global_ranks_from_prefix() -> None:
    log = _log("06")
    wd = _of(log, K.WATCHDOG_TIMEOUT)
    assert [(e.rank, e.details["seq"], e.details["op"], e.details["pg_rank"]) for e in wd] == [
        (13, 216, "ALLTOALL_BASE", 1),
        (15, 57, "ALLREDUCE", 1),
    ]
    prog = _of(log, K.WORK_PROGRESS)
    assert [(e.rank, e.details["pg"], e.details["last_completed"]) for e in prog] == [(13, 11, 215), (15, 11, 56)]
    # the collector's date dates the process's own yearless glog stamp
    assert wd[0].details["collector_time"] == "2025-02-18 12:54" and wd[0].ts is not None


def test_07_ib_error_4_vendor_81_on_two_hosts() -> None:
    ev = _of(_log("07"), K.NCCL_IB_COMPLETION)
    assert [(e.host, e.line, e.details["status"], e.details["vendor"], e.details["dir"]) for e in ev] == [
        ("H100-2", 1, 4, 81, "Send"),
        ("H100-1", 6, 4, 81, "Send"),
    ]


@pytest.mark.parametrize("prefix", ["08", "36"])
def test_08_36_watchdog_terminated_illegal_memory_access_rank0(prefix: str) -> None:
    log = _log(prefix)
    (e,) = _of(log, K.CUDA_ERROR)
    assert e.rank == 0 and e.details["error"] == "an illegal memory access was encountered"
    assert e.line == (3 if prefix == "08" else 10)
    # the c10_cuda_check frames below it are read as fallback evidence (judged only in a log with nothing else)
    frames = [x for x in log.events if x.details.get("role") == "fallback"]
    assert frames and {x.details["catalog"] for x in frames} == {"pytorch.frames.c10_cuda_check"}


def test_09_slurm_time_limit() -> None:
    (e,) = _log("09").events
    assert e.kind is K.SLURM_TIME_LIMIT and e.host == "c0700a-s1" and e.details["job"] == "867816"
    assert e.time == "2021-05-11T12:06:17"


def test_10_tqdm_glued_watchdog_rank0_and_rank7_differ() -> None:
    wd = _of(_log("10"), K.WATCHDOG_TIMEOUT)
    assert [(e.rank, e.details["seq"]) for e in wd] == [(0, 96120), (0, 96117), (0, 96125), (0, 96125), (7, 64088)]
    assert wd[0].line == 2 and wd[0].details["timeout_ms"] == 1800000


def test_13_quoted_reduce_scatter_ranks_64_to_67() -> None:
    wd = _of(_log("13"), K.WATCHDOG_TIMEOUT)
    assert [e.rank for e in wd] == [65, 66, 64, 67]
    assert {(e.details["seq"], e.details["op"]) for e in wd} == {(1559, "_REDUCE_SCATTER_BASE")}


def test_17_ray_prefix_ansi_gather() -> None:
    log = _log("17")
    wd = _of(log, K.WATCHDOG_TIMEOUT)
    assert {(e.rank, e.details["seq"], e.details["op"], e.details["pid"]) for e in wd} == {(1, 158046, "GATHER", 4009)}
    (prog,) = _of(log, K.WORK_PROGRESS)
    assert (prog.details["last_enqueued"], prog.details["last_completed"]) == (158046, 158045)


def test_19_broken_pipe_then_connection_closed_on_p4d_22() -> None:
    log = _log("19")
    assert [(e.kind, e.line) for e in log.events if e.details.get("role") != "fallback"] == [
        (K.NCCL_SOCKET_ERROR, 1),
        (K.NCCL_REMOTE_ERROR, 7),  # [Proxy Service 9] Failed to execute operation Connect (messages.yaml)
        (K.NCCL_CONNECTION_CLOSED, 8),
    ]
    assert {e.host for e in log.events} == {"a100-st-p4d24xlarge-22"}
    assert log.events[0].details["error"] == "Broken pipe"


def test_22_mpirun_ranks_12_13_14_local_catastrophic_error() -> None:
    log = _log("22")
    ev = _of(log, K.NCCL_IB_ASYNC)
    assert [(e.rank, e.line) for e in ev] == [(12, 1), (14, 5), (13, 9)]
    assert {e.details["event"] for e in ev} == {"local catastrophic error"}
    assert ev[0].host == "container-e275-1553839402050-12124-01-000057" and ev[0].time == "2019-06-02T16:13:44.884Z"
    assert log.rank_hosts[12] == "container-e275-1553839402050-12124-01-000057"


def test_25_cuda_oom_on_local_gpu3_and_the_observer() -> None:
    log = _log("25")
    (oom,) = _of(log, K.NCCL_CUDA_FAILURE)
    assert (oom.line, oom.host, oom.details["error"], oom.details["cuda_device"]) == (14, "ng30903", "out of memory", 3)
    (closed,) = _of(log, K.NCCL_CONNECTION_CLOSED)
    assert closed.line == 1 and closed.details["cuda_device"] == 0


def test_27_root_cause_block_without_header_sigsegv() -> None:
    (cf,) = _log("27").events
    assert cf.kind is K.CHILD_FAILED and cf.rank == 0 and cf.details["exit_code"] == -11
    assert cf.details["signal"] == "SIGSEGV" and cf.details["root_cause"] is None


def test_28_root_cause_rank0_and_rank1_also_failed() -> None:
    cf = _of(_log("28"), K.CHILD_FAILED)
    assert [(e.rank, e.details["root_cause"], e.details["exit_code"], e.line) for e in cf] == [
        (1, False, 1, 6),
        (0, True, 1, 15),
    ]
    assert {e.host for e in cf} == {"n136-117-136.byted.org"}


def test_29_oom_kill_and_srun_task_0_on_node107() -> None:
    oom, srun = _log("29").events
    assert oom.kind is K.OOM_HOST and oom.details == {"oom_kill_events": 1, "step": "37205392.0"}
    assert srun.kind is K.SRUN_TASK_EXIT and srun.host == "node107" and srun.task == 0 and srun.rank is None
    assert srun.details["reason"] == "Out Of Memory"


def test_32_kernel_xid45_on_four_gpus() -> None:
    xids = _of(_log("32", kernel=True), K.XID)
    assert [e.details["xid"] for e in xids] == [45] * 7
    assert {e.details["pci"] for e in xids} == {"0000:dc:00", "0000:ed:00", "0000:ba:00", "0000:97:00"}
    assert "caused by previous Xid 149" in str(xids[0].details["message"])


def test_34_socket_transport_on_bond0() -> None:
    (e,) = _log("34").events
    assert e.kind is K.NCCL_NET_SOCKET and e.details["device"] == "[0]bond0:200.8.184.2<0>"


def test_40_app_log_then_watchdog_rank0() -> None:
    (wd,) = _log("40").events
    assert (wd.rank, wd.line, wd.details["seq"], wd.details["ran_for_ms"]) == (0, 4, 377286, 1805402)


# --- a real NCCL watchdog timeout captured on a lent H100 (tests/fixtures/flight_recorder/README.md) ---

NCCL_STALL = Path(__file__).parent / "fixtures" / "flight_recorder" / "nccl_1rank_gpu_stall" / "stderr.txt"


def test_h100_nccl_stall_watchdog_timeout_seq5_allreduce_3000ms_rank0() -> None:
    with open(NCCL_STALL, encoding="utf-8") as f:
        log = parse_joblog(f, NCCL_STALL.name)
    wd = _of(log, K.WATCHDOG_TIMEOUT)
    # line 5: the watchdog's report; 20: "Process group watchdog thread terminated with exception: ..."; 31: what()
    assert [(e.line, e.rank, e.details["seq"], e.details["op"], e.details["timeout_ms"]) for e in wd] == [
        (5, 0, 5, "ALLREDUCE", 3000),
        (20, 0, 5, "ALLREDUCE", 3000),
        (31, 0, 5, "ALLREDUCE", 3000),
    ]
    assert wd[0].details["ran_for_ms"] == 3019 and wd[0].details["numel_in"] == 1048576
    assert wd[0].time == "E1124 22:20:31.243644707"
    # torch 2.11's form: "failure detected by watchdog at work sequence id: 5 PG status: last enqueued work: 5,
    # last completed work: 4"
    (prog,) = _of(log, K.WORK_PROGRESS)
    assert (prog.line, prog.rank, prog.details["pg"], prog.details["pg_desc"]) == (6, 0, 0, "default_pg")
    assert (prog.details["at_work"], prog.details["last_enqueued"], prog.details["last_completed"]) == (5, 5, 4)
    # line 30 "terminate called after throwing an instance of 'c10::DistBackendError'" (no [rank0]: prefix) and its
    # what() on line 31: the watchdog taking the process down after the timeout; the rank is the what()'s Rank 0
    (term,) = _of(log, K.SIGNAL)
    assert (term.line, term.rank, term.details["exception"]) == (30, 0, "c10::DistBackendError")
    assert term.details["teardown_of"] == "watchdog-timeout" and term.details["rank_from_what"] is True
    assert str(term.details["what"]).startswith("[PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog")
    assert [e.kind for e in log.events if e.details.get("role") != "fallback"] == [
        K.WATCHDOG_TIMEOUT,
        K.WORK_PROGRESS,
        K.WATCHDOG_TIMEOUT,
        K.SIGNAL,
        K.WATCHDOG_TIMEOUT,
    ]
