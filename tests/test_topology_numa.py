"""NUMA facts from numactl -H beside topo -m: della-i16g1, whose topo -m (fixture 13) and numactl -H
(tests/fixtures/topology/numactl-H_01_...) were captured on the same node."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import topo_cmd
from fleetdx.probes.parsers.numactl import NumaNode, NumaTopology, parse_numactl
from fleetdx.probes.parsers.topo import TopoGpu, parse_topo
from fleetdx.topology.analyses import numa_node_of
from fleetdx.topology.binding import advise
from fleetdx.topology.node_graph import build_node_graph
from tests.topology_util import make_topo, uniform

FIX = Path(__file__).parent / "fixtures"
TOPO = FIX / "topo" / "13_princeton-della-a100-sxm4_4gpu-1nic_nv4_tabs.txt"
NUMA = FIX / "topology" / "numactl-H_01_princeton-della-i16g1_2node_distance32.txt"


def test_numactl_agrees_with_the_numa_affinity_column() -> None:
    topo = parse_topo(TOPO.read_text())
    numa = parse_numactl(NUMA.read_text())
    from_matrix = [numa_node_of(g) for g in topo.gpus]
    assert from_matrix == [0, 0, 1, 1]  # NUMA Affinity column of fixture 13
    stripped = [g.model_copy(update={"numa_affinity": None}) for g in topo.gpus]
    assert [numa_node_of(g) for g in stripped] == [None] * 4
    assert [numa_node_of(g, numa) for g in stripped] == [0, 0, 1, 1]  # CPUs 0-23 on node 0, 24-47 on node 1


def test_node_graph_carries_numa_distances() -> None:
    topo = parse_topo(TOPO.read_text())
    g = build_node_graph(topo, numa=parse_numactl(NUMA.read_text()))
    assert g.edges["NUMA0", "NUMA1"]["distance"] == 32
    assert g.nodes["NUMA1"]["cpus"] == tuple(range(24, 48))
    assert g.has_edge("GPU2", "NUMA1") and g.has_edge("mlx5_0", "NUMA0")


def test_grace_style_numa_list_is_resolved_by_numactl() -> None:
    cpus = [list(range(0, 72))] * 2 + [list(range(72, 144))] * 2
    lists = [[0, *range(2, 18)]] * 2 + [[1, *range(18, 34)]] * 2
    topo = make_topo(uniform(4, "NV18"), cpus=cpus, numa=lists)  # type: ignore[arg-type]
    numa = NumaTopology(
        nodes=[NumaNode(node=0, cpus=list(range(72))), NumaNode(node=1, cpus=list(range(72, 144)))]
        + [NumaNode(node=i) for i in range(2, 34)]  # GPU-memory nodes hold no CPU
    )
    assert [r.numa_node for r in advise(topo, 4).ranks] == [None] * 4
    assert [r.numa_node for r in advise(topo, 4, numa=numa).ranks] == [0, 0, 1, 1]
    spread = TopoGpu(name="GPU9", cpu_affinity=[0, 100])
    assert numa_node_of(spread, numa) is None  # CPUs on two nodes: no single node


def test_cli_advise_reads_numactl(tmp_path: Path) -> None:
    app = typer.Typer()
    topo_cmd.register(app)

    @app.callback()
    def _root() -> None:
        """test root"""

    r = CliRunner().invoke(
        app, ["topo", "advise", str(TOPO), "--gpus", "2", "--numactl", str(NUMA), "--json"]
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["gpus"] == ["GPU0", "GPU1"]  # NV4 everywhere; GPU0/1 reach mlx5_0 at NODE, GPU2/3 only at SYS
    assert [x["numa_node"] for x in data["ranks"]] == [0, 0]
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "nvidia-smi_topo_-m.txt").write_bytes(TOPO.read_bytes())
    (bundle / "numactl_-H.txt").write_text("garbage\n")
    r = CliRunner().invoke(app, ["topo", "advise", str(bundle), "--gpus", "2"])
    assert (
        r.exit_code == 0 and "numactl_-H.txt" in r.output
    )  # the bundle's bad file: a warning, no NUMA facts
    r = CliRunner().invoke(
        app, ["topo", "advise", str(TOPO), "--gpus", "2", "--numactl", str(bundle / "numactl_-H.txt")]
    )
    assert (
        r.exit_code == 3 and "Traceback" not in r.output
    )  # a --numactl file that does not parse is an error
