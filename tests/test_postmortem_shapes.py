"""The postmortem on failures worded as newer torch, NCCL, Slurm, ROCm, UCX, Open MPI and Ray print them (issue
20's list of kinds of lines that were missed). Synthesised logs in the exact shapes of public reports
(tests/fixtures/joblogs_catalog/README.md); each case names the class, first rank and host a person would."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.judgement import Finding
from fleetdx.orchestrator.judgement import FindingCode as F
from fleetdx.orchestrator.postmortem.run import run_postmortem
from fleetdx.orchestrator.postmortem.sources import LogFiles
from fleetdx.probes.contracts import Verdict

FIX = Path(__file__).parent / "fixtures" / "joblogs_catalog"

#: file stem -> (first cause's code, rank, host, a phrase its message must carry)
CASES = {
    "01_slurm_oom_new": (F.OOM_HOST, 3, "gpu-a07", "gpu-a07"),  # srun task 3, no launcher: rank 3
    "02_dump_signal_only": (F.NCCL_TIMEOUT, None, None, "rank 5"),  # rank 5 timed out: it waited, not the culprit
    "03_watchdog_stuck": (F.NCCL_TIMEOUT, 2, None, "got stuck"),
    "04_no_socket": (F.CONFIG_ERROR, 0, "node17", "no usable network interface"),  # rank 0 raised right after
    "05_mismatch": (F.CONFIG_ERROR, 1, None, "different collectives"),
    "06_hip_oom": (F.OOM_GPU, 4, None, "HIP out of memory"),
    "07_sigbus": (F.PROCESS_CRASH, 3, "mi300-n02", "/dev/shm"),
    "08_ray_ip": (F.OOM_GPU, 2, "10.0.3.17", "out of memory"),
    "09_node_failure": (F.NODE_FAILURE, None, "gpu-c03", "gpu-c03"),  # not gpu-c01, whose slurmstepd printed it
    "10_nccl_internal": (F.NCCL_INTERNAL_ERROR, 9, None, "internal error"),
    # launcher summaries and messages catalogued later (messages.yaml): the launcher's line names the host
    "11_deepspeed_pdsh_sigkill": (F.OOM_HOST, None, "node2", "SIGKILL"),  # pdsh's "node2: " before launch.py's line
    "12_ray_memory_monitor": (F.OOM_HOST, None, "10.0.3.18", "10.0.3.18"),  # not 10.0.3.17, whose task was aborted
    "13_roce_modify_qp": (F.NCCL_NETWORK_ERROR, 13, "gpu-b03", "queue pair"),  # not rank 2, refused by it
    "14_c10d_port_in_use": (F.CONFIG_ERROR, 0, "node1", "port is taken"),  # node2's refusals only observe it
    "15_rocm_memory_fault": (F.CUDA_ERROR, 3, "mi300-n01", "Memory access fault by GPU node-4"),
}


@pytest.mark.parametrize("stem", sorted(CASES))
def test_first_cause_names_class_rank_and_host(stem: str) -> None:
    code, rank, host, phrase = CASES[stem]
    report = run_postmortem([LogFiles([FIX / f"synthetic_shape_{stem}.log"])])
    first = report.findings[0]
    assert (first.code, first.rank, first.host) == (code, rank, host), first.message
    assert phrase in first.message and first.evidence
    assert report.verdict is Verdict.CRITICAL and report.exit_code == 2
    if stem == "09_node_failure":  # the node that printed the cancellation is blamed nowhere
        assert all("gpu-c01" not in f.nodes for f in report.findings)
    if stem == "11_deepspeed_pdsh_sigkill":  # the launcher's own -9 line; pdsh's exit code 247 only observes node2
        assert [(f.code, f.host) for f in report.findings] == [(F.OOM_HOST, "node2"), (F.PROCESS_CRASH, "node2")]
        assert "exit code 247" in report.findings[1].message
    if stem == "14_c10d_port_in_use":  # the DistNetworkError is the rendezvous error, not a crash of rank 0
        assert F.PROCESS_CRASH not in {f.code for f in report.findings}
        assert [f.host for f in report.findings if f.code is F.NCCL_NETWORK_ERROR] == ["node2"]
    if stem == "13_roce_modify_qp":  # the timeout blames the rank whose queue pair never came up
        (timeout,) = [f for f in report.findings if f.code is F.NCCL_TIMEOUT]
        assert (timeout.rank, timeout.host) == (13, "gpu-b03")


def test_the_aborts_of_ranks_that_timed_out_are_the_timeout_s_evidence() -> None:
    """Ranks 0 and 1 reported the watchdog timeout, then srun says each ``Aborted (core dumped)`` and torch each
    ``terminate called ... c10::DistBackendError``: the watchdog's teardown, not two crashes ranked above the
    timeout. Rank 2's OOM stays first, the timeout names rank 2 as the rank that never reached the collective."""
    log = FIX / "synthetic_srun-l_rank2-oom-first_ranks0-1-watchdog.log"
    report = run_postmortem([LogFiles([log])])
    codes = [(f.code, f.rank) for f in report.findings]
    assert codes[0] == (F.OOM_GPU, 2)
    assert (F.PROCESS_CRASH, 0) not in codes and (F.PROCESS_CRASH, 1) not in codes
    (timeout,) = [f for f in report.findings if f.code is F.NCCL_TIMEOUT]
    assert timeout.rank == 2 and "never reached" in timeout.message
    assert any("task 0: Aborted" in e.text for e in timeout.evidence)


def test_a_store_that_saw_too_few_clients_observes_a_launch_that_started_too_few(tmp_path: Path) -> None:
    """TCPStore's ``M/N clients joined`` is the store's host speaking: a configuration error it only observes (the
    missing processes' own failure, when a log has it, ranks above it)."""
    log = tmp_path / "store.log"
    log.write_text(
        "node1: [rank0]: torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. "
        "7/8 clients joined.\n",
        encoding="utf-8",
    )
    (only,) = run_postmortem([LogFiles([log])]).findings
    assert (only.code, only.rank, only.host) == (F.CONFIG_ERROR, 0, "node1")
    assert "only 7 of 8 processes join within 1801.0 s" in only.message and "--ntasks" in only.action


def test_lightning_s_sigterm_echo_after_a_time_limit_is_no_crash(tmp_path: Path) -> None:
    """Lightning's ``[rank: 0] Received SIGTERM: 15`` echoes Slurm's cancellation: the time limit is the one cause."""
    log = tmp_path / "tl.log"
    log.write_text(
        "slurmstepd: error: *** STEP 4242.0 ON gpu-a03 CANCELLED AT 2026-01-10T15:27:25 DUE TO TIME LIMIT ***\n"
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
        "[rank: 0] Received SIGTERM: 15\n",
        encoding="utf-8",
    )
    assert [f.code for f in run_postmortem([LogFiles([log])]).findings] == [F.SLURM_TIME_LIMIT]


def test_a_store_barrier_counting_more_workers_than_the_world_is_a_configuration_error(tmp_path: Path) -> None:
    log = tmp_path / "barrier.log"
    log.write_text(
        "[rank0]: RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: "
        "store_based_barrier_key:1 (world_size=8, worker_count=16, timeout=0:30:00)\n",
        encoding="utf-8",
    )
    (only,) = run_postmortem([LogFiles([log])]).findings
    assert (only.code, only.rank) == (F.CONFIG_ERROR, 0)
    assert "counted 16 processes for a world of 8" in only.message and "its own port" in only.action


def _findings(tmp_path: Path, text: str, name: str = "job.log") -> list[Finding]:
    """The findings of one log file holding ``text``."""
    log = tmp_path / name
    log.write_text(text, encoding="utf-8")
    return run_postmortem([LogFiles([log])]).findings


@pytest.mark.parametrize(
    ("address", "code"),
    [
        ("[::ffff:0.0.0.5]", F.CONFIG_ERROR),  # MASTER_ADDR=05 (wild log 4115)
        ("0.104.99.143", F.CONFIG_ERROR),  # MASTER_ADDR=6841231 (wild log 4004)
        ("0.0.0.0", F.NCCL_NETWORK_ERROR),  # Linux's own host: a store there is reached on one node
        ("10.0.0.5", F.NCCL_NETWORK_ERROR),
    ],
)
def test_a_store_address_in_this_network_block_is_a_configuration_error(tmp_path: Path, address: str, code: F) -> None:
    """A client that cannot reach a store in 0.0.0.0/8 was given a numeric host name (RFC 1122: no host there);
    one that cannot reach a routable address is left to the network."""
    first = _findings(
        tmp_path,
        f"[W socket.cpp:558] [c10d] The client socket has failed to connect to {address}:40323 (errno: 110 - "
        "Connection timed out).\n",
    )[0]
    assert first.code is code
    assert ("MASTER_ADDR" in first.action) if code is F.CONFIG_ERROR else ("0.0.0.0/8" not in first.message)


@pytest.mark.parametrize(
    ("retcode", "code", "nodes"), [(3, F.NCCL_INTERNAL_ERROR, ["A100-02"]), (2, F.NCCL_NETWORK_ERROR, [])]
)
def test_the_proxy_services_failed_operation_is_judged_by_its_retcode(
    tmp_path: Path, retcode: int, code: F, nodes: list[str]
) -> None:
    """NCCL's proxy service failing a peer's Connect with ncclInternalError (3) is NCCL's own failure on its host
    (wild log 4514); with ncclSystemError (2), a system call's, it stays the network's, the printer its observer."""
    first = _findings(
        tmp_path,
        f"A100-02:2358430:2358556 [1] proxy.cc:1519 NCCL WARN [Proxy Service 9] Failed to execute operation Connect "
        f"from rank 15, retcode {retcode}\n",
    )[0]
    assert (first.code, first.nodes) == (code, nodes)


def test_winsocks_refused_store_address_is_a_configuration_error_a_decisive_cause_outranks(tmp_path: Path) -> None:
    """WinSock's 10049 on the store's address (wild logs 4352, 4569) is the launch's configuration; runs that work
    print it too, so a decisive cause in the same log comes first."""
    line = (
        "[W ..\\torch\\csrc\\distributed\\c10d\\socket.cpp:558] [c10d] The client socket has failed to connect to "
        "[x-tags.net]:29500 (system error: 10049 - The requested address is not valid in its context.).\n"
    )
    assert _findings(tmp_path, line, "alone.log")[0].code is F.CONFIG_ERROR
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    assert _findings(tmp_path, line + oom, "oom.log")[0].code is F.OOM_GPU


def test_a_launcher_killing_its_processes_alone_reads_as_the_likeliest_silent_death(tmp_path: Path) -> None:
    """DeepSpeed's sigkill_handler with nothing else in the log (wild logs 1263, 2911, 4158, 4733): a child that died
    without a word, most often the OOM killer's SIGKILL; beside a child's own error it is only that error's end."""
    kill = "[2023-05-23 11:11:32,282] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 32217\n"
    first = _findings(tmp_path, kill, "alone.log")[0]
    assert first.code is F.OOM_HOST and first.nodes == [] and "most often" in first.message
    error = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert [f.code for f in _findings(tmp_path, error + kill, "error.log")] == [F.CUDA_ERROR]


def test_ncclss_cuda_failure_of_the_setup_outranks_the_unhandled_cuda_errors_it_causes(tmp_path: Path) -> None:
    """NCCL's 'Cuda failure' with the stub libcuda.so (wild log 4714) is the setup's; the other ranks' unhandled
    cuda errors that follow are its consequence."""
    first = _findings(
        tmp_path,
        "[0]<stdout>:72d576acb451:1704:1899 [0] init.cc:255 NCCL WARN Cuda failure 'CUDA driver is a stub library'\n"
        "[1]<stdout>:E     tensorflow.python.framework.errors_impl.UnknownError: ncclCommInitRank failed: unhandled "
        "cuda error\n",
    )[0]
    assert (first.code, first.nodes) == (F.CONFIG_ERROR, ["72d576acb451"])


def test_ncclss_bind_on_a_port_in_use_is_a_configuration_error(tmp_path: Path) -> None:
    line = "42692884fcba:140:140 [0] include/socket.h:333 NCCL WARN Call to bind failed : Address already in use\n"
    first = _findings(tmp_path, line)[0]
    assert first.code is F.CONFIG_ERROR and "port is taken" in first.message


def test_nvidia_smi_s_gpu_is_lost_in_a_job_log_drains_the_host_with_its_bus_id(tmp_path: Path) -> None:
    log = tmp_path / "smi.log"
    log.write_text(
        "gpu-a05: [rank3]: step 88 loss 1.2\n"
        "gpu-a05: Unable to determine the device handle for gpu 0000:01:00.0: GPU is lost. Reboot the system to "
        "recover this GPU\n",
        encoding="utf-8",
    )
    first = run_postmortem([LogFiles([log])]).findings[0]
    assert (first.code, first.host) == (F.GPU_HW_FAULT, "gpu-a05")
    assert "0000:01:00.0" in first.message and first.action.startswith("drain gpu-a05")


def test_system_not_yet_initialized_drains_the_node_for_its_fabric_manager(tmp_path: Path) -> None:
    """cudaErrorSystemNotReady (torch's CUDA error, NCCL's Cuda failure) is the node's NVSwitch fabric manager."""
    log = tmp_path / "fm.log"
    log.write_text(
        "gpu-h07: [rank3]: RuntimeError: CUDA error: system not yet initialized\n"
        "gpu-h07:4411:4490 [2] NCCL WARN Cuda failure 'system not yet initialized'\n",
        encoding="utf-8",
    )
    first = run_postmortem([LogFiles([log])]).findings[0]
    assert (first.code, first.host) == (F.CUDA_ERROR, "gpu-h07")  # CUDA's 802: the node's state, not its hardware
    assert "Fabric Manager" in first.message and first.action.startswith("drain gpu-h07")


def test_nccl_s_nvml_gpu_is_lost_drains_the_host_of_that_cuda_device(tmp_path: Path) -> None:
    log = tmp_path / "nvml.log"
    log.write_text(
        "gpu-b11:51230:51230 [3] NCCL WARN nvmlDeviceGetHandleByPciBusId() failed: GPU is lost\n", encoding="utf-8"
    )
    (only,) = run_postmortem([LogFiles([log])]).findings
    assert (only.code, only.host) == (F.GPU_HW_FAULT, "gpu-b11")
    assert "CUDA device 3" in only.message and only.action.startswith("drain gpu-b11")
