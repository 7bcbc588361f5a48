"""Per-rank binding and the advise output."""

from __future__ import annotations

from fleetdx.topology.binding import advise, cpu_list, cpu_mask
from tests.topology_util import make_topo, uniform

CPU0 = list(range(0, 32)) + list(range(64, 96))
CPU1 = list(range(32, 64)) + list(range(96, 128))


def test_cpu_list_and_mask() -> None:
    assert cpu_list([5, 0, 1, 2]) == "0-2,5"
    assert cpu_list(CPU0) == "0-31,64-95"
    assert cpu_list([]) == ""
    assert cpu_mask([0, 1, 4]) == "0x13"


def test_advise_binds_each_rank_to_its_gpu_numa_node_and_rail() -> None:
    topo = make_topo(
        uniform(4, "NV4"),
        nic_cols=["PIX SYS", "PIX SYS", "SYS PIX", "SYS PIX"],
        nic_names=["mlx5_0", "mlx5_1"],
        cpus=[CPU0, CPU0, CPU1, CPU1],
        numa=[[0], [0], [1], [1]],
    )
    adv = advise(topo, 4)
    assert adv.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"] and adv.min_link == "NV4"
    assert [(r.local_rank, r.gpu, r.numa_node, r.nic) for r in adv.ranks] == [
        (0, "GPU0", 0, "mlx5_0"),
        (1, "GPU1", 0, "mlx5_0"),
        (2, "GPU2", 1, "mlx5_1"),
        (3, "GPU3", 1, "mlx5_1"),
    ]
    assert adv.ranks[2].cpus == CPU1
    assert adv.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert adv.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert adv.env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1"
    assert adv.rank_env[3] == {"UCX_NET_DEVICES": "mlx5_1:1"}
    assert "# local rank 2: numactl --cpunodebind=1 --membind=1 -- <command>" in adv.commands
    assert any(c.startswith("srun --ntasks-per-node=4 --cpu-bind=mask_cpu:") for c in adv.commands)
    assert adv.warnings == []


def test_advise_two_of_four_picks_the_pair_sharing_a_nic() -> None:
    topo = make_topo(
        uniform(4, "NV4"),
        nic_cols=["SYS", "SYS", "PIX", "PIX"],
        nic_names=["mlx5_0"],
        cpus=[CPU0, CPU0, CPU1, CPU1],
    )
    adv = advise(topo, 2)
    assert adv.gpus == ["GPU2", "GPU3"]
    assert adv.env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert adv.ranks[0].numa_node is None  # no NUMA Affinity column: bind by CPU list
    assert "# local rank 0: numactl --physcpubind=32-63,96-127 -- <command>" in adv.commands


def test_advise_warns_when_affinity_is_empty_and_has_no_nic_lines_without_nics() -> None:
    topo = make_topo(uniform(2, "NV4"), cpus=[[], []], cpu_raw=["", ""])
    adv = advise(topo, 2)
    assert "NCCL_IB_HCA" not in adv.env
    assert adv.rank_env == [{}, {}]
    assert len(adv.warnings) == 2 and "empty" in adv.warnings[0]
    assert not any(c.startswith("srun") or "numactl" in c for c in adv.commands)
