"""``fleetdx topo`` commands through typer's test runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import topo_cmd

FIX = Path(__file__).parent / "fixtures"
A100 = FIX / "topo" / "03_hgx-a100-sxm4-80g_8gpu-3nic_bond-nic_gpu-numa-id.txt"
H100 = FIX / "topo" / "06_aws-p5-h100_8gpu-0nic_nv18.txt"
CONF = FIX / "topology" / "tree_3level.conf"
SMI_XML = FIX / "topology" / "h100-vm-idle_nvidia-smi_-q_-x.xml"


@pytest.fixture
def run() -> object:
    app = typer.Typer()
    topo_cmd.register(app)

    @app.callback()
    def _root() -> None:
        """test root"""

    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def _needs_parser(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not present (the topo parser work copies tests/fixtures/topo/)")
    try:
        topo_cmd.parse_topo(path.read_text())
    except NotImplementedError:
        pytest.skip("parse_topo is not implemented yet")


def test_show_json_shape(run) -> None:  # type: ignore[no-untyped-def]
    _needs_parser(A100)
    r = run("topo", "show", str(A100), "--json", "--host", "a100-1")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["gpus"] == [f"GPU{i}" for i in range(8)]
    assert data["nics"] == ["mlx5_0", "mlx5_3", "mlx5_bond_0"]
    assert data["nearest_nic"]["GPU0"] == {"nics": ["mlx5_0"], "link": "PXB"}
    assert data["nearest_nic"]["GPU7"] == {"nics": ["mlx5_3", "mlx5_bond_0"], "link": "NODE"}
    f = next(x for x in data["findings"] if x["code"] == "TOPO_NIC_OVERSUBSCRIBED")
    assert f["severity"] == "warning" and f["subject"] == "mlx5_0" and f["nodes"] == ["a100-1"]
    assert set(f) >= {"code", "severity", "subject", "message", "evidence"}


def test_show_no_nic_gives_empty_nearest_and_renders(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _needs_parser(H100)
    r = run("topo", "show", str(H100), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["nearest_nic"] == {}
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    shutil.copy(H100, bundle / "nvidia-smi_topo_-m.txt")
    r = run("topo", "show", str(bundle))
    assert r.exit_code == 0 and "NV18" in r.stdout and "No topology findings" in r.stdout


def test_show_nominal_bandwidth_from_gpu_model_or_bundle_xml(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = run("topo", "show", str(A100), "--json", "--gpu-model", "NVIDIA A100-SXM4-80GB")
    data = json.loads(r.stdout)
    assert data["generation"] == "ampere-ga100"
    assert data["nominal_gbps"] == {"NV12": 300.0, "PXB": 31.5, "NODE": 31.5, "SYS": 31.5}
    bundle = tmp_path / "b"
    bundle.mkdir()
    shutil.copy(H100, bundle / "nvidia-smi_topo_-m.txt")
    (bundle / "nvidia-smi_-q_-x.xml").write_bytes(SMI_XML.read_bytes())
    data = json.loads(run("topo", "show", str(bundle), "--json").stdout)
    assert data["gpu_model"] == "NVIDIA H100 80GB HBM3"  # <product_name> of the captured -q -x
    assert data["nominal_gbps"] == {"NV18": 450.0}


def test_advise_json_shape(run) -> None:  # type: ignore[no-untyped-def]
    _needs_parser(A100)
    r = run("topo", "advise", str(A100), "--gpus", "4", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["min_link"] == "NV12" and len(data["gpus"]) == 4
    assert data["ranks"][0] == {
        "local_rank": 0,
        "gpu": data["gpus"][0],
        "cpus": data["ranks"][0]["cpus"],
        "numa_node": data["ranks"][0]["numa_node"],
        "nic": data["ranks"][0]["nic"],
        "nic_link": data["ranks"][0]["nic_link"],
    }
    assert data["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(g.removeprefix("GPU") for g in data["gpus"])
    r = run("topo", "advise", str(A100), "--gpus", "4")
    assert r.exit_code == 0 and "export CUDA_VISIBLE_DEVICES=" in r.stdout


def test_bad_inputs_exit_3_without_traceback(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = run("topo", "show", str(tmp_path / "missing.txt"))
    assert r.exit_code == 3 and "Traceback" not in r.output
    r = run("topo", "show", str(tmp_path))  # a directory without the topo file
    assert r.exit_code == 3 and "nvidia-smi_topo_-m.txt" in r.output
    _needs_parser(H100)
    r = run("topo", "advise", str(H100), "--gpus", "9")
    assert r.exit_code == 3 and "cannot choose 9 GPUs" in r.output


def test_cluster_and_slurm_conf(run) -> None:  # type: ignore[no-untyped-def]
    r = run(
        "topo", "cluster", "--topology-conf", str(CONF), "--node-count", "6", "--exclude", "gpu[02,10]", "--json"
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["switch"] == "spine1" and data["switch_hops"] == 3 and len(data["nodes"]) == 6
    r = run("topo", "cluster", "--topology-conf", str(CONF), "--node-count", "3", "--exclude", "gpu01")
    assert r.exit_code == 0 and r.stdout.splitlines()[0] == "gpu[02-04]"
    r = run("topo", "cluster", "--topology-conf", str(CONF), "--node-count", "99")
    assert r.exit_code == 3 and "no switch has 99 free nodes" in r.output
    r = run("topo", "cluster", "--topology-conf", str(CONF), "--node-count", "2", "--exclude", "gpu[1-")
    assert r.exit_code == 3 and "bad hostlist" in r.output
    r = run("topo", "cluster", "--topology-conf", str(FIX / "topology" / "switchmap.yaml"), "--node-count", "5")
    assert r.exit_code == 0 and "spine1" in r.stdout
    r = run("topo", "slurm-conf", str(FIX / "topology" / "switchmap.yaml"))
    assert r.exit_code == 0 and r.stdout == (FIX / "topology" / "switchmap.expected.conf").read_text()
