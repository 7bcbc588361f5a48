"""Bundles on disk, bundle -> NodeFacts, and the IB_PORT_DOWN rule."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.rules_node import RULES, ib_port_down
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.probes.bundle import BundleData, CommandMeta, ProbeSource, find_raw_file, read_bundle, write_bundle
from fleetdx.probes.catalog import rows_reading
from fleetdx.probes.contracts import RunStatus, Severity
from fleetdx.probes.errors import BundleError
from fleetdx.probes.facts import node_facts

FIX = Path(__file__).parent / "fixtures"
IDLE = FIX / "hosts" / "h100-vm-idle"
IBSTAT = FIX / "host" / "ibstat_01_h100-node_8x-cx7-ib-400_4x-cx6dx-eth_some-down_gpud-testdata.txt"


def _bundle(tmp_path: Path, files: dict[str, str], commands: list[CommandMeta] | None = None) -> BundleData:
    data = BundleData(
        host="n1", files=files, commands=commands or [CommandMeta(file=f, status=RunStatus.OK) for f in files]
    )
    return read_bundle(write_bundle(data, tmp_path / "b"))


# --- on disk ------------------------------------------------------------------------------------------------


def test_write_then_read_keeps_bytes_and_meta(tmp_path: Path) -> None:
    topo = (IDLE / "nvidia-smi_topo_-m.txt").read_text()
    assert "\x1b[4m" in topo  # real ESC codes survive the round trip
    ib = IBSTAT.read_text()
    data = BundleData(
        host="gpu-a1",
        files={"nvidia-smi_topo_-m.txt": topo, "ibstat.txt": ib},
        commands=[
            CommandMeta(
                file="nvidia-smi_topo_-m.txt",
                argv=["nvidia-smi", "topo", "-m"],
                status=RunStatus.OK,
                returncode=0,
                duration_s=0.05,
            ),
            CommandMeta(file="ibstat.txt", argv=["ibstat"], status=RunStatus.OK, returncode=0),
            CommandMeta(
                file="numactl_-H.txt",
                argv=["numactl", "-H"],
                status=RunStatus.SKIPPED,
                reason="numactl: not found on PATH",
            ),
        ],
    )
    out = write_bundle(data, tmp_path / "bundle")
    assert sorted(p.name for p in out.iterdir()) == ["ibstat.txt", "meta.json", "nvidia-smi_topo_-m.txt"]
    assert (out / "ibstat.txt").read_bytes() == IBSTAT.read_bytes()
    back = read_bundle(out)
    assert back == data
    assert back.meta_for("numactl_-H.txt").reason == "numactl: not found on PATH"  # type: ignore[union-attr]


def test_read_bundle_without_meta_uses_dir_name_and_marks_files_ok() -> None:
    b = read_bundle(IDLE)
    assert b.host == "h100-vm-idle"
    assert b.created_at is None
    assert "nvidia-smi_-q_-x.xml" in b.files
    assert b.files["uname_-a.txt"] == (IDLE / "uname_-a.txt").read_text()
    assert all(c.status is RunStatus.OK and c.source is ProbeSource.FILE for c in b.commands)
    assert len(b.commands) == len(b.files) == len(list(IDLE.iterdir()))


def test_read_bundle_errors(tmp_path: Path) -> None:
    with pytest.raises(BundleError):
        read_bundle(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BundleError):
        read_bundle(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "meta.json").write_text('{"host": 3}')
    with pytest.raises(BundleError, match="invalid meta.json"):
        read_bundle(bad)


def test_write_bundle_refuses_non_empty_dir_and_replace_removes_only_the_old_bundle(tmp_path: Path) -> None:
    d = tmp_path / "b"
    first = BundleData(
        host="h",
        files={"nvidia-smi_topo_-m.txt": "old", "numactl_-H.txt": "old"},
        commands=[
            CommandMeta(file="nvidia-smi_topo_-m.txt", status=RunStatus.OK),
            CommandMeta(file="numactl_-H.txt", status=RunStatus.OK),
        ],
    )
    write_bundle(first, d)
    (d / "notes.md").write_text("kept")
    second = BundleData(
        host="h",
        files={"numactl_-H.txt": "new"},
        commands=[
            CommandMeta(file="numactl_-H.txt", status=RunStatus.OK),
            CommandMeta(file="nvidia-smi_topo_-m.txt", status=RunStatus.SKIPPED, reason="gone"),
        ],
    )
    with pytest.raises(BundleError, match="not empty"):
        write_bundle(second, d)
    write_bundle(second, d, replace=True)
    assert sorted(p.name for p in d.iterdir()) == ["meta.json", "notes.md", "numactl_-H.txt"]
    assert (d / "numactl_-H.txt").read_text() == "new"
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.txt").write_text("not a bundle")
    with pytest.raises(BundleError, match="no fleetdx meta.json"):
        write_bundle(second, other, replace=True)
    assert (other / "x.txt").read_text() == "not a bundle"


@pytest.mark.parametrize("name", ["meta.json", "../x.txt", "a/b.txt", ""])
def test_write_bundle_refuses_bad_file_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(BundleError):
        write_bundle(BundleData(host="h", files={name: "x"}), tmp_path / "b")


def test_find_raw_file(tmp_path: Path) -> None:
    d = tmp_path / "b"
    shutil.copytree(IDLE, d)
    assert find_raw_file(d, ["nvidia-smi", "topo", "-m"]) == d / "nvidia-smi_topo_-m.txt"
    assert find_raw_file(d, ["lscpu", "-J"]) == d / "lscpu_-J.json"
    assert find_raw_file(d, ["uname", "-a"]) == d / "uname_-a.txt"
    assert find_raw_file(d, ["/usr/bin/python3", "-m", "fleetdx.probes.microbench"]) == d / "torch_microbench.json"
    assert (
        find_raw_file(d, ["all_reduce_perf", "-b", "8", "-e", "512M", "-f", "2", "-g", "1"])
        == d / "all_reduce_perf_-b8_-e512M_-f2_-g1.txt"
    )
    assert find_raw_file(d, ["numactl", "--hardware"]) is None
    # meta.json names a file for an argv the registry does not know
    write_bundle(
        BundleData(
            host="h",
            files={"custom.out": "x"},
            commands=[CommandMeta(file="custom.out", argv=["mytool", "--all"], status=RunStatus.OK)],
        ),
        tmp_path / "c",
    )
    assert find_raw_file(tmp_path / "c", ["mytool", "--all"]) == tmp_path / "c" / "custom.out"


# --- facts --------------------------------------------------------------------------------------------------


def test_classify_file_names() -> None:
    def kinds(name: str) -> list[str]:
        return [s.parser.kind for s in rows_reading(name) if s.parser is not None]

    assert [(s.parser.kind if s.parser else None, s.fact) for s in rows_reading("nvidia-smi_topo_-m.txt")] == [
        ("topo", "topo")
    ]
    assert kinds("all_reduce_perf_-b8_-e1G_-f2_-g8.txt") == ["nccl-tests"]
    assert kinds("all_reduce_perf_NCCL_DEBUG_INFO.txt") == ["nccl-tests", "nccl-log"]
    assert kinds("all_reduce_perf_-h.txt") == []  # help text is not a measurement
    assert kinds("uname_-a.txt") == []
    assert kinds("nccl_topo_dump.xml") == []


def test_node_facts_of_the_captured_h100_bundle() -> None:
    f = node_facts(read_bundle(IDLE))
    assert f.host == "h100-vm-idle"
    assert f.cpu is not None and f.cpu.cpus == 16 and f.cpu.model_name == "Intel(R) Xeon(R) Processor"
    assert f.numa is not None and f.numa.nodes[0].cpus == list(range(16))
    assert f.topo is not None and f.topo.gpu_names == ["GPU0"]
    assert len(f.microbench) == 1
    assert f.microbench[0].gemm_bf16_tflops == pytest.approx(772.6498220375818)
    assert f.microbench[0].d2d_gbps == pytest.approx(2992.0577041260194)
    assert f.microbench[0].gpu_name == "NVIDIA H100 80GB HBM3"
    files = {t.file for t in f.nccl_tests}
    assert "all_reduce_perf_-b8_-e512M_-f2_-g1.txt" in files
    assert "all_reduce_perf_-h.txt" not in files
    assert f.ib is None  # no InfiniBand on the VM
    assert {p.name for p in f.probes} == {p.name for p in IDLE.iterdir()}


def test_node_facts_turns_bad_content_into_parse_failures(tmp_path: Path) -> None:
    b = _bundle(
        tmp_path,
        {
            "lscpu_-J.json": '{"lscpu": [',
            "numactl_-H.txt": "\x00\x01garbage\n",
            "ibstat.txt": "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Sleepy\n",
            "uname_-a.txt": "Linux n1 6.1.0 x86_64 GNU/Linux\n",
        },
    )
    f = node_facts(b)
    assert f.cpu is None and f.numa is None and f.ib is None
    assert sorted((p.file, p.kind) for p in f.parse_failures) == [
        ("ibstat.txt", "ibstat"),
        ("lscpu_-J.json", "lscpu"),
        ("numactl_-H.txt", "numactl"),
    ]
    ib_fail = next(p for p in f.parse_failures if p.kind == "ibstat")
    assert ib_fail.line == 3 and "Sleepy" in ib_fail.message


def test_node_facts_does_not_parse_output_of_failed_commands(tmp_path: Path) -> None:
    b = _bundle(
        tmp_path,
        {"numactl_-H.txt": "partial"},
        [
            CommandMeta(
                file="numactl_-H.txt",
                argv=["numactl", "-H"],
                status=RunStatus.FAILED,
                returncode=1,
                reason="exit code 1",
            )
        ],
    )
    f = node_facts(b)
    assert f.numa is None and f.parse_failures == []
    assert f.probes[0].status is RunStatus.FAILED and f.probes[0].error == "exit code 1"


def test_node_facts_prefers_lscpu_json_then_numactl_over_sysfs(tmp_path: Path) -> None:
    b = _bundle(
        tmp_path,
        {
            "lscpu_-J.json": (IDLE / "lscpu_-J.json").read_text(),
            "lscpu.txt": "Architecture: aarch64\nCPU(s): 2\n",
            "numactl_-H.txt": (IDLE / "numactl_-H.txt").read_text(),
            "sysfs_numa.txt": "/sys/devices/system/node/node0/cpulist:0-1\n",
        },
    )
    f = node_facts(b)
    assert f.cpu is not None and f.cpu.architecture == "x86_64"
    assert f.numa is not None and f.numa.nodes[0].cpus == list(range(16))


# --- IB_PORT_DOWN -------------------------------------------------------------------------------------------


def _ib_findings(tmp_path: Path, name: str, text: str) -> list:  # type: ignore[type-arg]
    facts = node_facts(_bundle(tmp_path, {name: text}))
    assert facts.ib is not None
    return ib_port_down(facts, Fleet(nodes=[facts]))


def test_ib_port_down_is_registered() -> None:
    assert ib_port_down in RULES


def test_disabled_roce_ports_of_the_fixture_are_not_findings(tmp_path: Path) -> None:
    # mlx5_2/7/8 are Ethernet, Down, physical state Disabled (administratively off); all IB ports are Active
    assert _ib_findings(tmp_path, "ibstat.txt", IBSTAT.read_text()) == []


def test_ib_port_not_active_is_critical_with_evidence(tmp_path: Path) -> None:
    text = IBSTAT.read_text().replace(
        "CA 'mlx5_3'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n"
        "\tHardware version: 0\n\tNode GUID: 0x946dae0300cde728\n\tSystem image GUID: 0x946dae0300cde728\n"
        "\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp",
        "CA 'mlx5_3'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n"
        "\tHardware version: 0\n\tNode GUID: 0x946dae0300cde728\n\tSystem image GUID: 0x946dae0300cde728\n"
        "\tPort 1:\n\t\tState: Down\n\t\tPhysical state: Polling",
    )
    assert text != IBSTAT.read_text()
    (finding,) = _ib_findings(tmp_path, "ibstat.txt", text)
    assert finding.code is FindingCode.IB_PORT_DOWN
    assert finding.severity is Severity.CRITICAL
    assert finding.node == "n1"
    assert finding.subject == "mlx5_3/1"
    assert finding.details["state"] == "Down"
    assert finding.details["phys_state"] == "Polling"
    assert finding.details["rate_gbps"] == 400
    assert finding.details["file"] == "ibstat.txt"


def test_sysfs_init_ib_port_critical_and_polling_roce_warning(tmp_path: Path) -> None:
    text = (
        "/sys/class/infiniband/mlx5_0/ports/1/state:2: INIT\n"
        "/sys/class/infiniband/mlx5_0/ports/1/phys_state:5: LinkUp\n"
        "/sys/class/infiniband/mlx5_0/ports/1/link_layer:InfiniBand\n"
        "/sys/class/infiniband/mlx5_1/ports/1/state:1: DOWN\n"
        "/sys/class/infiniband/mlx5_1/ports/1/phys_state:2: Polling\n"
        "/sys/class/infiniband/mlx5_1/ports/1/link_layer:Ethernet\n"
        "/sys/class/infiniband/mlx5_2/ports/1/state:4: ACTIVE\n"
        "/sys/class/infiniband/mlx5_2/ports/1/link_layer:InfiniBand\n"
    )
    found = {f.subject: f.severity for f in _ib_findings(tmp_path, "sysfs_infiniband.txt", text)}
    assert found == {"mlx5_0/1": Severity.CRITICAL, "mlx5_1/1": Severity.WARNING}


def test_ib_evidence_names_the_file_that_parsed_not_the_first_present(tmp_path: Path) -> None:
    # ibstat was skipped (not installed), so the IB facts come from the sysfs dump of the same node
    text = (
        "/sys/class/infiniband/mlx5_0/ports/1/state:1: DOWN\n"
        "/sys/class/infiniband/mlx5_0/ports/1/phys_state:3: Disabled\n"
        "/sys/class/infiniband/mlx5_0/ports/1/link_layer:InfiniBand\n"
    )
    data = _bundle(
        tmp_path,
        {"sysfs_infiniband.txt": text},
        [
            CommandMeta(file="ibstat.txt", argv=["ibstat"], status=RunStatus.SKIPPED, reason="ibstat: not found"),
            CommandMeta(file="sysfs_infiniband.txt", status=RunStatus.OK),
        ],
    )
    facts = node_facts(data)
    assert facts.sources["ib"] == "sysfs_infiniband.txt"
    (finding,) = ib_port_down(facts, Fleet(nodes=[facts]))
    assert finding.subject == "mlx5_0/1"
    assert finding.details["file"] == "sysfs_infiniband.txt"


def test_no_ib_facts_no_finding() -> None:
    f = node_facts(read_bundle(IDLE))
    assert ib_port_down(f, Fleet(nodes=[f])) == []


# --- registries ---------------------------------------------------------------------------------------------


def test_every_catalog_file_is_read_by_its_own_row_and_every_parsed_row_fills_a_facts_field() -> None:
    from fleetdx.probes.catalog import CATALOG, nccl_sweep_probe
    from fleetdx.probes.facts import NodeFacts

    for spec in [*(s for s in CATALOG if s.match is None), nccl_sweep_probe("all_reduce_perf", 8)]:
        rows = rows_reading(spec.file)
        assert [(r.parser, r.fact) for r in rows] == [(spec.parser, spec.fact)], spec.file
    for spec in CATALOG:
        assert (spec.parser is None) == (spec.fact is None), spec.file
        assert spec.fact is None or spec.fact in NodeFacts.model_fields, spec.fact
    assert [s.parser.kind for s in rows_reading("sysfs_infiniband.txt") if s.parser] == ["ibstat"]
    assert [s.parser.kind for s in rows_reading("sysfs_numa.txt") if s.parser] == ["numactl"]


@pytest.mark.parametrize("bundle", ["h100-vm-idle", "h100-vm-busy"])
def test_every_captured_host_file_parses(bundle: str) -> None:
    f = node_facts(read_bundle(FIX / "hosts" / bundle))
    assert f.parse_failures == []
    assert f.smi is not None and f.query_gpu is not None
