"""Issue 20: the cause rules as a table (orchestrator/postmortem/rules.py), the new event kinds of the message
catalog judged as causes, and the job's own rank -> host map (orchestrator/postmortem/ranks.py).

The logs are tests/fixtures/joblogs_catalog/: ``multirank_new_kinds.log`` and ``own_timeout_then_dump.log`` (the
catalog's), and the ``synthetic_*`` ones written for these tests in the exact shapes srun -l, torch and NCCL print.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.judgement import Finding
from fleetdx.orchestrator.judgement import FindingCode as F
from fleetdx.orchestrator.postmortem.contracts import PostmortemReport
from fleetdx.orchestrator.postmortem.ranks import task_ids
from fleetdx.orchestrator.postmortem.rules import DECISIVE, RULES, judge, rule_of
from fleetdx.orchestrator.postmortem.run import run_postmortem
from fleetdx.orchestrator.postmortem.sources import LogFiles
from fleetdx.probes.contracts import Severity
from fleetdx.probes.parsers.joblog import EventKind as K
from fleetdx.probes.parsers.joblog import JobEvent
from fleetdx.probes.parsers.msgcatalog import catalog

CAT = Path(__file__).parent / "fixtures" / "joblogs_catalog"
SRUN = CAT / "synthetic_srun-l_rank2-oom-first_ranks0-1-watchdog.log"


def _pm(*names: str | Path) -> PostmortemReport:
    return run_postmortem([LogFiles([n if isinstance(n, Path) else CAT / n for n in names])])


def _of(report: PostmortemReport, code: F) -> list[Finding]:
    return [c for c in report.findings if c.code is code]


def _ev(kind: K, **details: object) -> JobEvent:
    return JobEvent(kind=kind, file="x.log", line=1, text="x", rank=0, host="h1", details=details)


# ------------------------------------------------------------------------------------------------- the table


def test_every_rule_role_agrees_with_its_priority() -> None:
    for r in RULES:
        if r.code is None:
            assert r.role == "context", r
        elif r.judge is None:
            assert (r.priority >= DECISIVE) == (r.role == "decisive"), r


def test_every_event_kind_has_a_rule_or_is_context_by_design() -> None:
    """A kind with no row makes no cause: only the catch-alls and the link-up line may be such (a Slurm
    cancellation has a row for preemption only: srun prints a plain one for every step it ends)."""
    ruled = {r.kind for r in RULES}
    assert set(K) - ruled == {K.NCCL_WARN, K.IB_LINK_UP}


def test_first_matching_row_decides() -> None:
    assert rule_of(_ev(K.SRUN_TASK_EXIT, reason="Out Of Memory")).code is F.OOM_HOST  # type: ignore[union-attr]
    assert rule_of(_ev(K.SRUN_TASK_EXIT, reason="Bus error (core dumped)")).priority == 79  # type: ignore[union-attr]
    assert rule_of(_ev(K.SRUN_TASK_EXIT, reason="Exited with exit code 1")).role == "observer"  # type: ignore[union-attr]
    assert judge(_ev(K.PYTHON_EXCEPTION, type="torch.distributed.DistBackendError")) is None


def test_new_kinds_are_judged() -> None:
    cases = {
        K.COLLECTIVE_MISMATCH: (F.CONFIG_ERROR, "decisive"),
        K.NCCL_NO_SOCKET_INTERFACE: (F.CONFIG_ERROR, "decisive"),
        K.NCCL_SHM_ERROR: (F.CONFIG_ERROR, "decisive"),
        K.BUS_ERROR: (F.PROCESS_CRASH, "decisive"),
        K.WATCHDOG_STUCK: (F.NCCL_TIMEOUT, "observer"),
        K.FLIGHT_RECORDER_DUMP: (F.NCCL_TIMEOUT, "observer"),
        K.GLOO_ERROR: (F.NCCL_NETWORK_ERROR, "observer"),
        K.UCX_ERROR: (F.NCCL_NETWORK_ERROR, "observer"),
    }
    for kind, (code, role) in cases.items():
        r = rule_of(_ev(kind))
        assert r is not None and (r.code, r.role) == (code, role), kind


def test_task_ids() -> None:
    assert task_ids("2") == [2] and task_ids("0-3,7") == [0, 1, 2, 3, 7] and task_ids("x") == [] == task_ids("3-1")


# ------------------------------------------------------------------------------------ the new kinds as causes


def test_new_kinds_make_causes_with_their_rank_and_host() -> None:
    report = _pm("multirank_new_kinds.log")
    where = {(c.code, c.rank, c.host) for c in report.findings}
    assert (F.CONFIG_ERROR, 0, "gpu-a01") in where  # no socket interface, and the collective mismatch
    assert (F.CONFIG_ERROR, 6, "gpu-a04") in where  # NCCL's /dev/shm segment
    assert (F.OOM_GPU, 5, "10.0.0.9") in where  # HIP OOM behind Ray's ip= prefix
    config = _of(report, F.CONFIG_ERROR)
    assert any("no usable network interface" in c.message and "NCCL_SOCKET_IFNAME" in c.action for c in config)
    assert any("different collectives" in c.message for c in config)
    shm = next(c for c in config if c.rank == 6)
    assert "/dev/shm" in shm.message and "--shm-size" in shm.action and "emptyDir" in shm.action


def test_hip_oom_names_its_device() -> None:
    (oom,) = _of(_pm("multirank_new_kinds.log"), F.OOM_GPU)
    assert oom.message.startswith("HIP out of memory") and oom.gpu == "cuda:1"


def test_bus_error_is_one_crash_with_the_shm_advice() -> None:
    crash = [c for c in _of(_pm("multirank_new_kinds.log"), F.PROCESS_CRASH) if c.host == "gpu-a03"]
    assert len(crash) == 1
    (c,) = crash
    assert "SIGBUS" in c.message and "task 4" in c.message
    assert "/dev/shm" in c.action and "--shm-size" in c.action and "medium: Memory" in c.action
    assert [e.line for e in c.evidence] == [7]  # srun's line read twice is one evidence line


def test_dump_signal_culprit_is_the_rank_that_timed_out() -> None:
    (t,) = _of(_pm("multirank_new_kinds.log"), F.NCCL_TIMEOUT)
    assert t.message.startswith("NCCL watchdog timeout: rank 3 waited")
    assert "dump signals printed by ranks 1,3" in t.message and "watchdog of rank 2 got stuck" in t.message


def test_internal_error_wrapping_no_socket_interface_is_a_config_error() -> None:
    report = _pm("synthetic_internal-error-wrapping-no-socket-interface.log")
    assert [c.code for c in report.findings] == [F.CONFIG_ERROR]
    (c,) = report.findings
    assert c.rank == 1 and [e.line for e in c.evidence][0] == 9 and {6, 7} <= {e.line for e in c.evidence}


# ------------------------------------------------------------------------------------ the job knows its ranks


def test_srun_error_line_names_the_host_of_the_rank_that_failed_first() -> None:
    """The real-Slurm failure of issue 20: rank 2's OOM (task 2 under srun -l) and srun's ``sim3: task 2`` line
    in one file; the host was left empty and the timeout said the rank was not among the logs."""
    report = _pm(SRUN)
    first = report.findings[0]
    assert (first.code, first.rank, first.host) == (F.OOM_GPU, 2, "sim3")
    assert [e.line for e in first.evidence][:2] == [11, 12]  # the OOM, then the srun line that named sim3
    (t,) = _of(report, F.NCCL_TIMEOUT)
    assert (t.rank, t.host) == (2, "sim3")
    assert "rank 2 never reached it" in t.message and "oom-gpu" in t.message
    assert "not among the logs given" not in t.message
    assert not any("never reached" in m for m in report.missing_evidence)
    assert t.evidence[0].line == 11 and t.severity is Severity.CRITICAL


def test_a_rank_that_failed_after_the_timeouts_is_not_blamed_for_them() -> None:
    (t,) = _of(_pm("multirank_new_kinds.log"), F.NCCL_TIMEOUT)
    assert t.rank is None  # rank 5's HIP OOM comes after the dump signals


# ------------------------------------------------------------------------------------ verdicts a person can read


def test_the_same_nccl_error_on_every_rank_of_a_host_is_one_cause_with_a_count() -> None:
    from fleetdx.orchestrator.postmortem.correlate import correlate

    events = [
        JobEvent(kind=K.NCCL_INTERNAL_ERROR, file="x.log", line=r + 1, text="internal error", rank=r, host=h)
        for r, h in [(r, "h1") for r in range(8)] + [(r, "h2") for r in range(8, 16)]
    ]
    causes = correlate(events).causes
    assert [(c.code, c.rank, c.host) for c in causes] == [
        (F.NCCL_INTERNAL_ERROR, 0, "h1"),
        (F.NCCL_INTERNAL_ERROR, 8, "h2"),
    ]
    assert "8 ranks" in causes[0].message and "ranks 1-7" in causes[0].message
    assert causes[0].details["count"] == 8 and causes[0].details["ranks"] == 8  # for a script: the burst's size


def test_a_peer_named_by_its_ib_name_is_that_host() -> None:
    from fleetdx.orchestrator.postmortem.correlate import correlate

    e = JobEvent(
        kind=K.NCCL_CONNECTION_CLOSED,
        file="x.log",
        line=1,
        text="closed",
        host="gpu01",
        details={"peer": "gpu02-ib<4711>"},
    )
    other = JobEvent(kind=K.WATCHDOG_TIMEOUT, file="y.log", line=1, text="t", host="gpu02", rank=1)
    (observed,) = [c for c in correlate([e, other]).causes if c.code is F.NCCL_NETWORK_ERROR]
    assert observed.nodes == ["gpu02"] and "gpu02-ib" not in observed.action


# ---------------------------------------------------------------------------------- the scheduler's own kills

_PREEMPTED = """[rank3]: step 100 loss 2.1
slurmstepd: error: *** STEP 889123.0 ON gpu-a-07 CANCELLED AT 2025-01-14T03:12:09 DUE TO {why} ***
[rank1]: RuntimeError: NCCL communicator was aborted on rank 1.
srun: error: gpu-a-08: task 1: Terminated
"""


def test_a_preempted_job_is_preempted_and_the_ranks_dying_after_it_are_its_echoes(tmp_path: Path) -> None:
    for why, said in (("PREEMPTION", "preempted"), ("JOB REQUEUE", "requeued")):
        log = tmp_path / f"{said}.log"
        log.write_text(_PREEMPTED.format(why=why))
        (cause,) = _pm(log).causes
        assert (cause.code, cause.severity, cause.nodes) == (F.SLURM_PREEMPTED, Severity.CRITICAL, [])
        # line 3, a communicator aborted with no reason given, is the echo of a failure it does not name: context
        assert said in cause.message and [e.line for e in cause.evidence] == [2, 4]


def test_a_crash_before_the_preemption_stays_a_cause_of_its_own(tmp_path: Path) -> None:
    log = tmp_path / "crash-first.log"
    log.write_text(
        "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        + _PREEMPTED.format(why="PREEMPTION")
    )
    codes = [c.code for c in _pm(log).causes]
    assert F.OOM_GPU in codes and F.SLURM_PREEMPTED in codes


def test_a_plain_cancellation_is_no_preemption(tmp_path: Path) -> None:
    # srun cancels every step after a task failed: that line is not the scheduler taking the nodes
    log = tmp_path / "cancel.log"
    log.write_text(
        "srun: error: node3: task 2: Exited with exit code 1\n"
        "slurmstepd: error: *** STEP 12.0 ON node3 CANCELLED AT 2025-01-14T03:12:09 ***\n"
    )
    assert F.SLURM_PREEMPTED not in [c.code for c in _pm(log).causes]


# the shapes of round 16's wild logs (1708, 1803, 1762, 1766; 867 for CANN), lines as torch, CUDA and NCCL print them
_TAKING_DOWN = (
    "[E ProcessGroupNCCL.cpp:828] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
    "OpType=ALLREDUCE, Timeout(ms)=60000) ran for 69662 milliseconds before timing out.\n"
    "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the asynchronous nature of "
    "CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n"
    "[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down.\n"
    "terminate called after throwing an instance of 'std::runtime_error'\n"
)


def test_the_watchdog_taking_its_process_down_is_the_timeout_not_a_crash(tmp_path: Path) -> None:
    """torch 1.x logs "taking the entire process down" before the terminate; with the what() cut, the terminate is
    still the watchdog's."""
    log = tmp_path / "taken-down.log"
    log.write_text(_TAKING_DOWN)
    assert _pm(log).causes[0].code is F.NCCL_TIMEOUT
    # the same terminate far below it, or of another process, is a crash of its own
    far = tmp_path / "far.log"
    far.write_text(_TAKING_DOWN.replace("terminate", "\n" * 6 + "[rank3]: terminate"))
    assert _pm(far).causes[0].code is F.PROCESS_CRASH


def test_an_uncorrectable_nvlink_error_is_a_hardware_fault_in_both_wordings(tmp_path: Path) -> None:
    for said in ("an uncorrectable NVLink error was detected", "uncorrectable NVLink error detected"):
        log = tmp_path / "nvlink.log"
        log.write_text(f"  what():  CUDA error: {said} during the execution\n")
        (cause,) = _pm(log).causes
        assert cause.code is F.GPU_HW_FAULT and "NVLink" in cause.message, cause


def test_a_held_device_is_a_configuration_error_with_its_own_advice(tmp_path: Path) -> None:
    for line in (
        "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
        "EJ0001: 2024-05-21-11:57:54.167.645 Failed to initialize the HCCP process. Reason: Maybe the last training "
        "process is running.",
    ):
        log = tmp_path / "held.log"
        log.write_text(line + "\n")
        cause = _pm(log).causes[0]
        assert cause.code is F.CONFIG_ERROR and "holds the accelerator" in cause.message, cause


def test_an_ib_completion_error_of_nccl_before_2_10_names_no_peer(tmp_path: Path) -> None:
    log = tmp_path / "ib.log"
    log.write_text(
        "gpu5:35917:35994 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, "
        "len 0, vendor err 129\n"
    )
    (cause,) = _pm(log).causes
    assert (cause.code, cause.nodes) == (F.NCCL_NETWORK_ERROR, ["gpu5"])
    assert "IBV_WC_RETRY_EXC_ERR" in cause.message and "peer None" not in cause.message


def test_a_gpu_nvml_cannot_see_is_a_configuration_error_of_the_node(tmp_path: Path) -> None:
    log = tmp_path / "nvml.log"
    log.write_text(
        "node7:6897:7102 [2] misc/nvmlwrap.cc:187 NCCL WARN nvmlDeviceGetHandleByPciBusId() failed: Not Found\n"
        "node7:6897:7102 [2] NCCL INFO graph/xml.cc:850 -> 2\n"
    )
    (cause,) = _pm(log).causes
    assert (cause.code, cause.nodes) == (F.CONFIG_ERROR, ["node7"]) and "NVML cannot see" in cause.message


def test_nccl_not_finding_a_virtual_nics_sysfs_path_at_info_is_no_error(tmp_path: Path) -> None:
    log = tmp_path / "info.log"
    log.write_text("sfr-pod-rmeng:435:783 [0] NCCL INFO Could not find real path of /sys/class/net/eth0/device\n")
    assert F.CONFIG_ERROR not in [c.code for c in _pm(log).causes]


@pytest.mark.parametrize(
    ("row", "code"),
    [
        # NCCL WARNs harvested from its tags v2.4.8 .. v2.28.9 that read as a plain NCCL WARN before
        ("nccl.alloc.cuda_malloc_failed", F.OOM_GPU),
        ("nccl.shm.map_failed", F.CONFIG_ERROR),
        ("nccl.net_socket.message_truncated", F.CONFIG_ERROR),
        ("nccl.nvml.init_failed", F.CONFIG_ERROR),
        ("nccl.transport.none_found", F.CONFIG_ERROR),
        ("nccl.socket.exceeded_timeouts", F.NCCL_NETWORK_ERROR),
        ("nccl.net_socket.progress_error", F.NCCL_NETWORK_ERROR),
        ("nccl.ib.post_failed", F.NCCL_INTERNAL_ERROR),
        # rows of wild-log rounds 16 and 17
        ("openmpi.runtime.call_outside_init", F.CONFIG_ERROR),
        ("pytorch.distributed.nccl_not_built", F.CONFIG_ERROR),
        ("pytorch.ddp.unfinished_reduction", F.CONFIG_ERROR),
        ("custom_allreduce.cuda_check_failed", F.CUDA_ERROR),
        ("ray.task_error.wrapped_accelerator_error", F.CUDA_ERROR),
        ("aws_ofi_nccl.register_mr_failed", F.NCCL_INTERNAL_ERROR),
    ],
)
def test_new_catalog_rows_make_their_class_of_cause(row: str, code: F, tmp_path: Path) -> None:
    """A row's fixture line alone makes a cause of the row's class; an NCCL WARN's on the host its prefix names
    when it is that host's own failure (an observer's report blames no node)."""
    ((fixture, role),) = [(r.fixture, r.role) for r in catalog().rows if r.id == row]
    log = tmp_path / "row.log"
    log.write_text(fixture + "\n")
    cause = _pm(log).causes[0]
    assert cause.code is code, cause
    if " NCCL WARN " in fixture:
        assert cause.nodes == ([fixture.split(":")[0]] if role == "decisive" else []), cause


def test_a_wait_for_rank_0s_unique_id_that_timed_out_is_a_hang_not_the_network(tmp_path: Path) -> None:
    """torch's broadcastUniqueNCCLID: the store's get timing out means rank 0 never set the communicator up (wild
    1851); the store's connection reset means it went away (1903)."""
    said = (
        "[rank2]: torch.distributed.DistBackendError: [2] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: {}\n"
    )
    log = tmp_path / "uid.log"
    log.write_text(said.format("wait timeout after 1800000ms, keys: /default_pg/0//1//cuda//0"))
    assert _pm(log).causes[0].code is F.NCCL_TIMEOUT
    log.write_text(said.format("Connection reset by peer"))
    assert _pm(log).causes[0].code is F.NCCL_NETWORK_ERROR


def test_spawns_wrapper_gives_way_to_the_childs_own_exception(tmp_path: Path) -> None:
    """torch.multiprocessing.spawn's ProcessRaisedException, behind pytest's 'E' markers (wild 1909): the child's
    NCCL error is the cause, the wrapper an observer below it; alone, the wrapper still tells a crash."""
    log = tmp_path / "spawn.log"
    log.write_text(
        "E       torch.multiprocessing.spawn.ProcessRaisedException:\n"
        "E\n"
        "E       -- Process 3 terminated with the following error:\n"
        "E       Traceback (most recent call last):\n"
        "E       RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:957, unhandled system error, NCCL version 21.0.3\n"
    )
    first, second = _pm(log).causes[:2]
    assert (first.code, first.rank) == (F.NCCL_INTERNAL_ERROR, 3)
    assert second.code is F.PROCESS_CRASH
    log.write_text("torch.multiprocessing.spawn.ProcessRaisedException:\n")
    assert _pm(log).causes[0].code is F.PROCESS_CRASH
