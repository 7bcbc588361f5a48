"""The GPU behind a cause's rank (``Finding.gpu`` / ``details["gpu_ref"]``) and a kernel XID tied to the rank
whose GPU it hit. Real job logs of tests/fixtures/joblogs/ (facts read by eye: the ``[N]`` of NCCL's
``host:pid:tid [N]``,
ChildFailedError's ``local_rank``); synthesised logs are named synthetic and use the line shapes of the real
NCCL_DEBUG=INFO captures (tests/fixtures/nccl/28_*: ``ncclCommInitRank comm ... rank R nranks N cudaDev C nvmlDev
M busId B ...``) and of the real XID lines (joblog 05)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.judgement import FindingCode as F
from fleetdx.orchestrator.postmortem.contracts import gpu_ref
from fleetdx.orchestrator.postmortem.run import run_postmortem
from fleetdx.orchestrator.postmortem.sources import Bundles, LogFiles
from fleetdx.probes.contracts import Job, RankPlacement, SchedulerKind
from fleetdx.probes.parsers.joblog import GpuSource

FIX = Path(__file__).parent / "fixtures" / "joblogs"


def _path(prefix: str) -> Path:
    (p,) = FIX.glob(prefix + "_*.log")
    return p


@pytest.mark.parametrize(
    ("prefix", "code", "rank", "host", "gpu", "source"),
    [
        # line 1: "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer ..."
        ("03", F.NCCL_NETWORK_ERROR, None, "kp-ddp-worker-0", "cuda:4", GpuSource.NCCL_PREFIX),
        # line 1: "H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion ..."
        ("07", F.NCCL_NETWORK_ERROR, None, "H100-2", "cuda:1", GpuSource.NCCL_PREFIX),
        # line 1: "[1,12]<stdout>:container-e275-...-000057:815:864 [0] ... NCCL WARN NET/IB : Got async event"
        (
            "22",
            F.NCCL_NETWORK_ERROR,
            12,
            "container-e275-1553839402050-12124-01-000057",
            "cuda:0",
            GpuSource.NCCL_PREFIX,
        ),
        # line 17: "ng30903:3063028:3066152 [3] ... NCCL WARN Cuda failure 'out of memory'"
        ("25", F.OOM_GPU, None, "ng30903", "cuda:3", GpuSource.NCCL_PREFIX),
        # the ChildFailedError root cause: "rank      : 0 (local_rank: 0)"
        ("28", F.PROCESS_CRASH, 0, "n136-117-136.byted.org", "cuda:0", GpuSource.LOCAL_RANK),
        ("27", F.PROCESS_CRASH, 0, None, "cuda:0", GpuSource.LOCAL_RANK),
    ],
)
def test_real_logs_gpu_of_the_first_cause(
    prefix: str, code: F, rank: int | None, host: str | None, gpu: str, source: GpuSource
) -> None:
    c = run_postmortem([LogFiles([_path(prefix)])]).causes[0]
    assert (c.code, c.rank, c.host, c.gpu) == (code, rank, host, gpu)
    assert gpu_ref(c) is not None and gpu_ref(c).source is source
    assert gpu_ref(c).physical_index is None and gpu_ref(c).bus_id is None  # nothing printed them


@pytest.mark.parametrize("prefix", ["01", "08", "36", "40"])
def test_real_logs_that_name_no_gpu_leave_it_null(prefix: str) -> None:
    """Ranks without any NCCL device, local rank or job model: no GPU, never one guessed from the rank."""
    for c in run_postmortem([LogFiles([_path(prefix)])]).causes:
        assert c.gpu is None and gpu_ref(c) is None


def test_real_kernel_xid_without_nccl_lines_names_the_bus_only() -> None:
    c = run_postmortem([LogFiles([_path("05")])]).causes[0]
    assert c.code is F.GPU_HW_FAULT and c.gpu == "PCI:0000:02:00" and c.rank is None
    assert gpu_ref(c) is not None and gpu_ref(c).source is GpuSource.KERNEL and not gpu_ref(c).kernel_match


def _init(host: str, pid: int, rank: int, nranks: int, dev: int, bus: str) -> str:
    """A synthetic NCCL init line in the shape of tests/fixtures/nccl/28_* line 76."""
    return (
        f"{host}:{pid}:{pid + 30} [{dev}] NCCL INFO ncclCommInitRank comm 0x5289720 rank {rank} nranks {nranks} "
        f"cudaDev {dev} nvmlDev {dev} busId {bus} commId 0x45701cda3f259923 - Init COMPLETE"
    )


#: a synthetic 4-rank job on 2 hosts, 2 GPUs each (bus ids of the real 28_* capture's gpu40)
SYNTH_INIT = [
    _init("synth-gpu1", 100, 0, 4, 0, "7000"),
    _init("synth-gpu1", 101, 1, 4, 1, "b000"),
    _init("synth-gpu2", 200, 2, 4, 0, "4c000"),
    _init("synth-gpu2", 201, 3, 4, 1, "88000"),
]


def _bundle(tmp_path: Path, host: str, dmesg: str) -> Path:
    d = tmp_path / host
    d.mkdir()
    (d / "dmesg.txt").write_text(dmesg)
    return d


def test_synthetic_rank_error_takes_the_gpu_and_bus_of_its_nccl_init_line(tmp_path: Path) -> None:
    log = tmp_path / "synthetic-job.log"
    log.write_text(
        "\n".join(
            SYNTH_INIT + ["synth-gpu2: [rank3]: RuntimeError: CUDA error: an illegal memory access was encountered"]
        )
        + "\n"
    )
    c = run_postmortem([LogFiles([log])]).causes[0]
    assert (c.code, c.rank, c.host, c.gpu) == (F.CUDA_ERROR, 3, "synth-gpu2", "cuda:1")
    d = gpu_ref(c)
    assert d is not None and d.source is GpuSource.NCCL_INIT
    assert (d.rank, d.index, d.physical_index, d.bus_id) == (3, 1, 1, "0000:88:00.0")
    # the line that says which GPU is the second evidence line
    assert (c.evidence[1].file, c.evidence[1].line) == (str(log), 4) and "busId 88000" in c.evidence[1].text


def test_synthetic_xid_on_a_rank_s_bus_names_that_rank(tmp_path: Path) -> None:
    log = tmp_path / "synthetic-job.log"
    log.write_text("\n".join(SYNTH_INIT) + "\n")
    xid = (
        "[Fri Mar 21 07:10:00 2025] NVRM: Xid (PCI:0000:4c:00): 79, pid=200, name=python, GPU has fallen off the bus.\n"
    )
    report = run_postmortem([LogFiles([log]), Bundles([_bundle(tmp_path, "synth-gpu2", xid)])])
    c = report.causes[0]
    assert (c.code, c.host, c.rank, c.gpu) == (F.GPU_HW_FAULT, "synth-gpu2", 2, "cuda:0")
    d = gpu_ref(c)
    assert (
        d is not None and d.kernel_match and (d.source, d.bus_id, d.index) == (GpuSource.NCCL_INIT, "0000:4c:00.0", 0)
    )
    assert "it is rank 2's GPU" in c.message and "0000:4c:00.0" in c.message
    assert [(e.file, e.line) for e in c.evidence[:2]] == [(f"{tmp_path}/synth-gpu2/dmesg.txt", 1), (str(log), 3)]


def test_synthetic_xid_on_another_bus_of_the_host_names_no_rank(tmp_path: Path) -> None:
    log = tmp_path / "synthetic-job.log"
    log.write_text("\n".join(SYNTH_INIT) + "\n")
    xid = "[Fri Mar 21 07:10:00 2025] NVRM: Xid (PCI:0000:c1:00): 79, pid=9, name=python, GPU has fallen off the bus.\n"
    c = run_postmortem([LogFiles([log]), Bundles([_bundle(tmp_path, "synth-gpu2", xid)])]).causes[0]
    assert (c.code, c.host, c.rank, c.gpu) == (F.GPU_HW_FAULT, "synth-gpu2", None, "PCI:0000:c1:00")
    assert gpu_ref(c) is not None and not gpu_ref(c).kernel_match
    assert "not the GPU of a rank" in c.message and "rank 2 0000:4c:00.0" in c.message
    # the same bus on another host is another GPU
    other = run_postmortem(
        [LogFiles([log]), Bundles([_bundle(tmp_path, "synth-gpu3", xid.replace("c1:00", "4c:00"))])]
    ).causes[0]
    assert other.rank is None and gpu_ref(other) is not None and not gpu_ref(other).kernel_match


def test_synthetic_sub_communicator_rank_is_not_a_global_rank(tmp_path: Path) -> None:
    """A tensor-parallel communicator of 2 ranks prints "rank 1 nranks 2": not global rank 1."""
    log = tmp_path / "synthetic-tp.log"
    log.write_text(
        "\n".join(
            [
                _init("synth-gpu1", 100, 0, 4, 0, "7000"),
                _init("synth-gpu1", 102, 1, 2, 1, "b000"),  # a 2-rank communicator
                "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered",
            ]
        )
        + "\n"
    )
    c = run_postmortem([LogFiles([log])]).causes[0]
    assert c.rank == 1 and c.gpu is None and gpu_ref(c) is None


def test_synthetic_cuda_visible_devices_gives_the_physical_gpu(tmp_path: Path) -> None:
    log = tmp_path / "synthetic-torchrun.log"
    log.write_text(
        "CUDA_VISIBLE_DEVICES=4,5,6,7\n"
        "[default1]:[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    c = run_postmortem([LogFiles([log])]).causes[0]
    d = gpu_ref(c)
    assert c.gpu == "cuda:1" and d is not None
    assert (d.source, d.index, d.physical_index, d.visible_devices) == (GpuSource.LOCAL_RANK, 1, 5, "4,5,6,7")
    assert c.evidence[1].line == 1  # the CUDA_VISIBLE_DEVICES line


def test_synthetic_one_gpu_per_task_is_cuda_0_of_its_visible_device(tmp_path: Path) -> None:
    log = tmp_path / "synthetic-srun.log"
    log.write_text(
        "node3: [rank3]: LOCAL_RANK=3 CUDA_VISIBLE_DEVICES=3\n"
        "node3: [rank3]: RuntimeError: CUDA error: unspecified launch failure\n"
    )
    c = run_postmortem([LogFiles([log])]).causes[0]
    d = gpu_ref(c)
    assert c.gpu == "cuda:0" and d is not None and (d.source, d.index, d.physical_index) == (GpuSource.LOCAL_RANK, 0, 3)


def test_synthetic_printed_local_rank_without_remap(tmp_path: Path) -> None:
    log = tmp_path / "synthetic-env.log"
    log.write_text("[rank9]: RANK=9 LOCAL_RANK=1\n[rank9]: RuntimeError: CUDA error: unspecified launch failure\n")
    c = run_postmortem([LogFiles([log])]).causes[0]
    d = gpu_ref(c)
    assert c.gpu == "cuda:1" and d is not None and (d.source, d.physical_index) == (GpuSource.LOCAL_RANK, None)
    assert c.evidence[1].line == 1


def test_synthetic_hung_rank_of_a_timeout_gets_its_own_gpu_not_a_reporter_s(tmp_path: Path) -> None:
    wd = (
        "[rank{r}]:[E0321 02:07:08.408 ProcessGroupNCCL.cpp:607] [PG 0 Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=100, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran "
        "for 600060 milliseconds before timing out."
    )
    log = tmp_path / "synthetic-hang.log"
    log.write_text(
        "\n".join(SYNTH_INIT + [wd.format(r=r) for r in (0, 1, 3)] + ["synth-gpu2: [rank2]: step 99"]) + "\n"
    )
    job = Job(
        scheduler=SchedulerKind.SLURM,
        job_id="1",
        nodes=["synth-gpu1", "synth-gpu2"],
        ranks=[RankPlacement(rank=r, host="synth-gpu1" if r < 2 else "synth-gpu2") for r in range(4)],
    )
    c = run_postmortem([LogFiles([log])], job).causes[0]
    assert (c.code, c.rank, c.host) == (F.NCCL_TIMEOUT, 2, "synth-gpu2")
    d = gpu_ref(c)
    assert d is not None and (d.rank, d.bus_id, d.source) == (2, "0000:4c:00.0", GpuSource.NCCL_INIT)


def test_synthetic_xid_names_the_global_rank_when_the_process_first_printed_a_smaller_communicator(
    tmp_path: Path,
) -> None:
    log = tmp_path / "synthetic-tp-first.log"
    log.write_text(
        "\n".join(
            [
                _init("synth-gpu2", 200, 0, 2, 0, "4c000"),  # a 2-rank communicator: its rank 0 is not global rank 0
                *SYNTH_INIT,  # the 4-rank job's: synth-gpu2 pid 200 is global rank 2
            ]
        )
        + "\n"
    )
    xid = (
        "[Fri Mar 21 07:10:00 2025] NVRM: Xid (PCI:0000:4c:00): 79, pid=200, name=python, GPU has fallen off the bus.\n"
    )
    c = run_postmortem([LogFiles([log]), Bundles([_bundle(tmp_path, "synth-gpu2", xid)])]).causes[0]
    assert c.rank == 2 and gpu_ref(c) is not None and gpu_ref(c).kernel_match
