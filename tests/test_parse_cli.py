"""``fleetdx parse`` and ``fleetdx collect`` through typer's test runner, and once as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import collect_cmd, parse_cmd
from tests.cliapp import cli_app

FIX = Path(__file__).parent / "fixtures"
HOST = FIX / "host"
IDLE = FIX / "hosts" / "h100-vm-idle"
NUMA = HOST / "numactl-H_02_princeton-adroit-h11g2_2node_interleaved-cpus.txt"
IBSTAT = HOST / "ibstat_01_h100-node_8x-cx7-ib-400_4x-cx6dx-eth_some-down_gpud-testdata.txt"
LSCPU = HOST / "lscpu_01_princeton-della-k18g3_8x-h100-node_xeon8468_interleaved-numa.txt"


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Human tables are checked for whole cells: give them a wide terminal."""
    from fleetdx.orchestrator.cli import common

    monkeypatch.setattr(common.console, "width", 200)


def _app() -> typer.Typer:
    return cli_app(parse_cmd, collect_cmd)  # the real root group: usage errors exit 3


def invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(_app(), list(args))
    return res.exit_code, res.stdout, res.stderr


def test_parse_numactl_json_is_the_model_dump() -> None:
    code, out, _ = invoke("parse", "numactl", str(NUMA), "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["nodes"][1]["cpus"] == list(range(1, 48, 2))
    assert doc["nodes"][0]["size_mb"] == 515192
    assert doc["distances"] == [[10, 20], [20, 10]]
    assert doc["source_format"] == "numactl"


def test_parse_ibstat_and_lscpu_json() -> None:
    code, out, _ = invoke("parse", "ibstat", str(IBSTAT), "--json")
    assert code == 0
    cas = json.loads(out)["cas"]
    assert cas[4]["name"] == "mlx5_2" and cas[4]["ports"][0]["state"] == "Down"
    code, out, _ = invoke("parse", "lscpu", str(LSCPU), "--json")
    assert code == 0
    assert json.loads(out)["model_name"] == "Intel(R) Xeon(R) Platinum 8468"


def test_parse_human_output_is_a_table() -> None:
    code, out, _ = invoke("parse", "numactl", str(NUMA))
    assert code == 0
    assert "515192" in out and "507630" in out
    code, out, _ = invoke("parse", "ibstat", str(IBSTAT))
    assert code == 0
    assert "mlx5_11" in out and "Disabled" in out and "MT4125" in out


def test_parse_topo_human_matrix() -> None:
    code, out, _ = invoke("parse", "topo", str(IDLE / "nvidia-smi_topo_-m.txt"))
    assert code == 0
    assert "GPU0" in out and "0-15" in out


def test_parse_error_is_one_stderr_line_and_exit_3(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("available: two nodes\n")
    code, out, err = invoke("parse", "numactl", str(bad))
    assert code == 3
    assert out == ""
    assert err.strip().count("\n") == 0
    assert "numactl: line 1: expected" in err


def test_parse_missing_file_and_directory_exit_3(tmp_path: Path) -> None:
    code, _, err = invoke("parse", "lscpu", str(tmp_path / "nope.txt"))
    assert code == 3 and "no such file" in err
    code, _, err = invoke("parse", "lscpu", str(tmp_path))
    assert code == 3 and "a directory" in err


def test_parse_unknown_kind_is_a_usage_error() -> None:
    code, _, _ = invoke("parse", "dcgm", str(NUMA))
    assert code == 3


def test_parse_bundle_of_the_captured_h100() -> None:
    code, out, _ = invoke("parse", "bundle", str(IDLE), "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["host"] == "h100-vm-idle"
    assert doc["cpu"]["cpus"] == 16
    assert doc["numa"]["nodes"][0]["size_mb"] == 8411
    code, out, _ = invoke("parse", "bundle", str(IDLE))
    assert code == 0
    assert "lscpu_-J.json" in out and "Intel(R) Xeon(R) Processor" in out


def test_parse_bundle_of_a_non_bundle_exits_3(tmp_path: Path) -> None:
    code, _, err = invoke("parse", "bundle", str(tmp_path / "none"))
    assert code == 3 and "does not exist" in err


@pytest.mark.timeout(120)
def test_collect_then_parse_bundle_as_real_processes(tmp_path: Path) -> None:
    """The done-when of the issue: ``fleetdx collect`` on this machine writes a bundle that ``fleetdx parse
    bundle`` reads back with real CPU/NUMA facts."""
    cli = [sys.executable, "-m", "fleetdx.orchestrator.cli.main"]
    out = tmp_path / "bundle"
    done = subprocess.run(
        [*cli, "collect", "--out", str(out), "--host", "node-x", "--json"],
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr
    meta = json.loads(done.stdout)
    assert meta["host"] == "node-x" and meta["level"] == "quick"
    assert (out / "meta.json").is_file() and (out / "lscpu_-J.json").is_file()
    done = subprocess.run(
        [*cli, "parse", "bundle", str(out), "--json"], capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["host"] == "node-x"
    assert facts["cpu"]["cpus"] >= 1
    assert facts["numa"] is not None and facts["numa"]["nodes"]


KIND_FILES = {
    "topo": IDLE / "nvidia-smi_topo_-m.txt",
    "p2p": IDLE / "nvidia-smi_topo_-p2p_r.txt",
    "smi-xml": IDLE / "nvidia-smi_-q_-x.xml",
    "smi-csv": IDLE / "nvidia-smi_query-gpu.csv",
    "nccl-tests": IDLE / "all_reduce_perf_-b8_-e512M_-f2_-g1.txt",
    "nccl-log": IDLE / "nccl_debug_info_1rank.txt",
    "numactl": IDLE / "numactl_-H.txt",
    "lscpu": IDLE / "lscpu_-J.json",
    "ibstat": IBSTAT,
    "xid": IDLE / "dmesg_nvrm.txt",
    "microbench": IDLE / "torch_microbench.json",
    "perfquery": FIX / "ib" / "perfquery_x_0x506b4b03005c2740.txt",
    "ibdiagnet": FIX / "ib" / "ibdiagnet_logParserTask.txt",
    "dcgm-diag": FIX / "dcgm" / "diag_r2_4.4.1_pcie_fail_dcgm_issue254.txt",
    "dcgm-health": FIX / "dcgm" / "health_c_reconstructed_from_dcgm_healthtests.txt",
    # the sysfs counter dump the collector wrote from prometheus/node_exporter's real tree (its golden's lines)
    "ib-counters": FIX / "ib" / "golden" / "node_exporter_sys_infiniband.json",
}


def _input(kind: str, tmp_path: Path) -> Path:
    """The file ``fleetdx parse KIND`` reads for ``kind``: as listed, but the counter dump is made from its
    golden's lines (the collector's output on the real tree, tests/test_ib_counters.py)."""
    path = KIND_FILES[kind]
    if kind != "ib-counters":
        return path
    dump = tmp_path / "sysfs_infiniband_counters.txt"
    dump.write_text("\n".join(json.loads(path.read_text())["lines"]) + "\n")
    return dump


def test_every_kind_is_covered_here() -> None:
    assert set(KIND_FILES) == {k.value for k in parse_cmd.ParseTarget} - {"bundle"}


@pytest.mark.parametrize("kind", sorted(KIND_FILES))
def test_every_kind_json_is_exactly_the_parser_model_dump(kind: str, tmp_path: Path) -> None:

    from fleetdx.probes.catalog import parser_named

    path = _input(kind, tmp_path)
    code, out, err = invoke("parse", kind, str(path), "--json")
    assert code == 0, err
    expected = parser_named(kind).parse(path.read_text(encoding="utf-8", errors="replace"))
    assert json.loads(out) == json.loads(expected.model_dump_json())
    code, out, err = invoke("parse", kind, str(path))
    assert code == 0, err
    assert out.strip()


def test_nccl_tests_human_rows_table() -> None:
    code, out, _ = invoke("parse", "nccl-tests", str(KIND_FILES["nccl-tests"]))
    assert code == 0
    # first and last rows of the capture: 8 B (2 floats) and 536870912 B (134217728 floats)
    assert "536870912" in out and "134217728" in out
    assert "all_reduce" in out
