"""The GPU facts of a job log (``JobLog.gpus``): NCCL's communicator init lines, ``LOCAL_RANK`` and
``CUDA_VISIBLE_DEVICES``. Real lines: the NCCL_DEBUG=INFO nccl-tests captures of tests/fixtures/nccl/ (sources in
/work/shared/fixtures/SOURCES-nccl.md), whose own ``#  Rank r ... on HOST device d [bus]`` header says the same
thing a second way; lines named synthetic are made here in the shapes of those real ones."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetdx.probes.parsers.joblog import GpuSource, nccl_bus_id, parse_joblog
from fleetdx.probes.parsers.nccl_tests import parse_nccl_tests
from fleetdx.probes.parsers.smi_values import bus_key

NCCL = Path(__file__).parent / "fixtures" / "nccl"
HANG_4NODE = NCCL / "28_all_reduce_A100x8_4node_IB_CollNet_SHARP_hang_no_results.txt"
EFA_TAGGED = NCCL / "04_all_reduce_A100x16_p4d_2node_EFA_ncclinfo_tagged_oldfmt.txt"


def test_nccl_bus_id_decodes_int64_bus_ids() -> None:
    # NCCL's int64ToBusId: domain<<20 | bus<<12 | device<<4 | function
    assert nccl_bus_id("4c000") == "0000:4c:00.0"
    assert nccl_bus_id("201c0") == "0000:20:1c.0"
    assert nccl_bus_id("60") == "0000:00:06.0"
    assert nccl_bus_id("10000000") == "0100:00:00.0"
    assert nccl_bus_id("zz") is None and nccl_bus_id("f" * 16) is None
    assert nccl_bus_id("8") is None and nccl_bus_id("200") is None  # function 8, device 32: not PCI


def test_init_lines_of_a_4_node_job_give_every_rank_s_cuda_device_nvml_index_and_bus() -> None:
    text = HANG_4NODE.read_text()
    log = parse_joblog(text, HANG_4NODE.name)
    inits = [g for g in log.gpus if g.source is GpuSource.NCCL_INIT]
    # read off lines 76-83: "gpu40:2899:2929 [0] NCCL INFO ncclCommInitRank comm 0x5289720 rank 4 nranks 8
    # cudaDev 0 nvmlDev 0 busId 4c000 ..."
    first = inits[0]
    assert (first.line, first.host, first.pid, first.comm_rank, first.nranks) == (76, "gpu40", 2899, 4, 8)
    assert (first.index, first.physical_index, first.bus_id, first.rank) == (0, 0, "0000:4c:00.0", None)
    assert sorted(g.comm_rank for g in inits if g.comm_rank is not None) == list(range(8))
    # nccl-tests' own header of the same run ("#  Rank  4 Group  0 Pid   2899 on      gpu40 device  0
    # [0000:4c:00] ...") names the same host, pid, device and bus for every rank
    (run,) = parse_nccl_tests(text).runs
    header = {d.rank: (d.host, d.pid, d.device, bus_key(d.bus_id)) for d in run.devices}
    assert len(header) == 8
    for g in inits:
        assert g.comm_rank is not None and g.bus_id is not None
        assert header[g.comm_rank] == (g.host, g.pid, g.index, bus_key(g.bus_id))


def test_init_lines_under_open_mpi_rank_tags_carry_the_global_rank() -> None:
    log = parse_joblog(EFA_TAGGED.read_text(), EFA_TAGGED.name)
    inits = {g.rank: g for g in log.gpus if g.source is GpuSource.NCCL_INIT}
    assert sorted(inits) == list(range(16))
    # "[1,10]<stdout>:nccl-tests-efa-16-worker-1:27:68 [2] NCCL INFO comm 0x7f8ec8000f60 rank 10 nranks 16
    # cudaDev 2 busId 201c0 - Init COMPLETE" (an older NCCL: no nvmlDev)
    g = inits[10]
    assert (g.host, g.pid, g.index, g.physical_index, g.bus_id) == (
        "nccl-tests-efa-16-worker-1",
        27,
        2,
        None,
        "0000:20:1c.0",
    )
    assert inits[0].bus_id == "0000:10:1c.0" and inits[0].host == "nccl-tests-efa-16-worker-0"


def test_synthetic_local_rank_and_cuda_visible_devices_lines() -> None:
    log = parse_joblog(
        "\n".join(
            [
                "gpu7: [rank9]: RANK=9 LOCAL_RANK=1 WORLD_SIZE=16",  # synthetic
                "gpu7: [rank9]: CUDA_VISIBLE_DEVICES=4,5,6,7",  # synthetic
                "CUDA_VISIBLE_DEVICES: 'GPU-1a2b,GPU-3c4d'",  # synthetic, no rank or host
                "RANK=3 local_rank: 2",  # synthetic: the rank only from RANK=
                "local_rank: 2",  # synthetic: no rank: not a fact about any rank
                "epoch 3 rank: 5 local_rank=1",  # synthetic: lower-case "rank:" is not read as the rank
            ]
        ),
        "synthetic.log",
    )
    facts = [(g.source, g.rank, g.host, g.local_rank, g.visible_devices, g.line) for g in log.gpus]
    assert facts == [
        (GpuSource.LOCAL_RANK, 9, "gpu7", 1, None, 1),
        (GpuSource.CUDA_VISIBLE_DEVICES, 9, "gpu7", None, "4,5,6,7", 2),
        (GpuSource.CUDA_VISIBLE_DEVICES, None, None, None, "GPU-1a2b,GPU-3c4d", 3),
        (GpuSource.LOCAL_RANK, 3, None, 2, None, 4),
    ]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=80),
            st.builds(
                lambda a, b: a + b,
                st.sampled_from(
                    [
                        "cudaDev ",
                        "rank 1 nranks 8 cudaDev ",
                        "h:1:2 [0] NCCL INFO comm 0x1 rank 3 nranks 4 cudaDev 1 nvmlDev 9 busId ",
                        "LOCAL_RANK=",
                        "local_rank: ",
                        "CUDA_VISIBLE_DEVICES=",
                        "[rank2]: RANK=",
                    ]
                ),
                st.text(max_size=40),
            ),
        ),
        max_size=12,
    )
)
def test_fuzzed_gpu_lines_never_raise(lines: list[str]) -> None:
    text = "\n".join(line.replace("\x00", "") for line in lines)
    log = parse_joblog(text, "fuzz.log")
    for g in log.gpus:
        assert g.bus_id is None or bus_key(g.bus_id) is not None
