"""``collect``: live on this machine (no GPU), with stand-in tools on PATH (real child processes), and
replayed
from a captured bundle."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from fleetdx.probes.bundle import collect, read_bundle, write_bundle
from fleetdx.probes.catalog import commands
from fleetdx.probes.contracts import Level, RunStatus
from fleetdx.probes.facts import node_facts
from fleetdx.probes.replay import ReplayRunner
from fleetdx.probes.runner import SubprocessRunner
from fleetdx.probes.sysfs import SysfsSource, read_infiniband, read_numa, read_pci

FIX = Path(__file__).parent / "fixtures"
IDLE = FIX / "hosts" / "h100-vm-idle"
pytestmark = pytest.mark.timeout(120)


QUICK = list(commands(Level.QUICK))


def _tool(bindir: Path, name: str, script: str) -> Path:
    """An executable shell script ``name`` in ``bindir``."""
    bindir.mkdir(exist_ok=True)
    p = bindir / name
    p.write_text("#!/bin/sh\n" + script)
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return p


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this test is for a machine without a GPU")
@pytest.mark.skipif(shutil.which("lscpu") is None, reason="needs lscpu")
def test_live_quick_collect_without_gpu(tmp_path: Path) -> None:
    data = collect(SubprocessRunner(), Level.QUICK, host="this-node")
    by_file = {c.file: c for c in data.commands}
    assert set(by_file) == {c.file for c in QUICK} | {s.value for s in SysfsSource}
    for c in QUICK:
        if c.argv[0] == "nvidia-smi":
            assert by_file[c.file].status is RunStatus.SKIPPED
            assert "nvidia-smi: not found" in (by_file[c.file].reason or "")
            assert c.file not in data.files
    assert by_file["lscpu_-J.json"].status is RunStatus.OK
    assert by_file[SysfsSource.NUMA.value].status is RunStatus.OK
    out = write_bundle(data, tmp_path / "bundle")
    facts = node_facts(read_bundle(out))
    assert facts.host == "this-node" and not facts.replayed
    assert facts.cpu is not None and facts.cpu.cpus == os.cpu_count()
    assert facts.numa is not None
    assert sum(len(n.cpus) for n in facts.numa.nodes) == os.cpu_count()
    assert facts.topo is None and facts.smi is None


def test_dmesg_lines_filtered_and_not_permitted_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = tmp_path / "bin"
    _tool(
        bindir,
        "dmesg",
        (
            "echo '[    1.0] usb 1-1: new device'\n"
            "echo '[    2.0] NVRM: Xid (PCI:0000:1b:00): 79, pid=0, GPU has fallen off the bus.'\n"
            "echo '[    3.0] pcieport 0000:00:01.0: AER: Corrected error received'\n"
            "echo '[    4.0] EXT4-fs (sda1): mounted'\n"
        ),
    )
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    data = collect(SubprocessRunner(), Level.QUICK, host="n", sysfs_root=None)
    assert data.files["dmesg_nvrm.txt"] == (
        "[    2.0] NVRM: Xid (PCI:0000:1b:00): 79, pid=0, GPU has fallen off the bus.\n"
        "[    3.0] pcieport 0000:00:01.0: AER: Corrected error received\n"
    )
    assert all(data.meta_for(s.value).status is RunStatus.SKIPPED for s in SysfsSource)  # type: ignore[union-attr]

    _tool(bindir, "dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n")
    data = collect(SubprocessRunner(), Level.QUICK, host="n", sysfs_root=None)
    meta = data.meta_for("dmesg_nvrm.txt")
    assert meta is not None and meta.status is RunStatus.SKIPPED
    assert "Operation not permitted" in (meta.reason or "")
    assert "dmesg_nvrm.txt" not in data.files


def test_failed_command_keeps_output_and_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    _tool(
        bindir,
        "numactl",
        "echo 'available: 1 nodes (0)'\necho 'libnuma: Warning: /sys not mounted' >&2\nexit 1\n",
    )
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    data = collect(SubprocessRunner(), Level.QUICK, host="n", sysfs_root=None)
    meta = data.meta_for("numactl_-H.txt")
    assert meta is not None
    assert (meta.status, meta.returncode, meta.reason) == (RunStatus.FAILED, 1, "exit code 1")
    assert meta.stderr_tail == "libnuma: Warning: /sys not mounted\n"
    assert data.files["numactl_-H.txt"] == "available: 1 nodes (0)\n"


def test_standard_level_microbench_skip_exit_code(tmp_path: Path) -> None:
    # stands in for the interpreter: `python -m fleetdx.probes.microbench` on a node without CUDA exits 4
    fake_python = _tool(
        tmp_path / "bin",
        "python-nocuda",
        'echo \'{"status": "skipped", "reason": "no CUDA device"}\'\nexit 4\n',
    )
    data = collect(SubprocessRunner(), Level.STANDARD, host="n", sysfs_root=None, python=str(fake_python))
    meta = data.meta_for("torch_microbench.json")
    assert meta is not None and meta.status is RunStatus.SKIPPED and meta.reason == "no CUDA device"
    assert meta.argv == [str(fake_python), "-m", "fleetdx.probes.microbench"]
    assert "torch_microbench.json" not in data.files
    if shutil.which("nvidia-smi") is None:
        sweep = data.meta_for("all_reduce_perf.txt")
        assert sweep is not None and sweep.status is RunStatus.SKIPPED
        assert sweep.reason == "no GPU listed by nvidia-smi -L"


def test_replayed_collect_reproduces_the_captured_bundle(tmp_path: Path) -> None:
    data = collect(
        ReplayRunner(IDLE),
        Level.STANDARD,
        host="h100-vm-idle",
        sysfs_root=None,
        nccl_binary="/opt/nccl-tests/build/all_reduce_perf",
        python="/usr/bin/python3",
    )
    assert data.replayed
    for c in QUICK:
        if (IDLE / c.file).exists() and c.file != "dmesg_nvrm.txt":
            assert data.files[c.file] == (IDLE / c.file).read_text(), c.file
    # dmesg_nvrm.txt holds only NVRM lines already: the filter keeps all of them
    assert data.files["dmesg_nvrm.txt"] == (IDLE / "dmesg_nvrm.txt").read_text()
    assert data.files["torch_microbench.json"] == (IDLE / "torch_microbench.json").read_text()
    # one GPU in nvidia-smi -L -> the sweep asks for -g 1; the capture has no such file
    sweep = data.meta_for("all_reduce_perf_-b8_-e1G_-f2_-g1.txt")
    assert sweep is not None and sweep.argv[-2:] == ["-g", "1"]
    assert sweep.status is RunStatus.SKIPPED and "not in bundle" in (sweep.reason or "")
    assert data.meta_for("numactl_-H.txt").status is RunStatus.OK  # type: ignore[union-attr]
    assert data.meta_for("ibstat.txt").status is RunStatus.SKIPPED  # type: ignore[union-attr]
    facts = node_facts(read_bundle(write_bundle(data, tmp_path / "b")))
    assert facts.replayed
    assert facts.topo is not None and facts.topo.gpu_names == ["GPU0"]
    assert facts.microbench[0].gemm_fp32_tflops == pytest.approx(51.17160799714658)


# --- sysfs --------------------------------------------------------------------------------------------------


def _write(p: Path, text: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_sysfs_collectors_on_a_fake_tree(tmp_path: Path) -> None:
    gpu = tmp_path / "sys/bus/pci/devices/0000:1b:00.0"
    for attr, v in {
        "vendor": "0x10de",
        "device": "0x2330",
        "class": "0x030200",
        "current_link_speed": "16.0 GT/s PCIe",
        "current_link_width": "8",
        "max_link_speed": "32.0 GT/s PCIe",
        "max_link_width": "16",
        "numa_node": "0",
    }.items():
        _write(gpu / attr, v + "\n")
    _write(tmp_path / "sys/bus/pci/devices/0000:00:1f.0/vendor", "0x8086\n")  # not a GPU or NIC
    _write(tmp_path / "sys/bus/pci/devices/0000:00:1f.0/class", "0x060100\n")
    ib = tmp_path / "sys/class/infiniband/mlx5_0"
    _write(ib / "fw_ver", "28.39.1002\n")
    _write(ib / "ports/1/state", "1: DOWN\n")
    _write(ib / "ports/1/phys_state", "3: Disabled\n")
    _write(ib / "ports/1/rate", "40 Gb/sec (4X QDR)\n")
    _write(ib / "ports/1/link_layer", "InfiniBand\n")
    _write(tmp_path / "sys/devices/system/node/node0/cpulist", "0-3\n")
    _write(tmp_path / "sys/devices/system/node/node0/distance", "10\n")
    _write(
        tmp_path / "sys/devices/system/node/node0/meminfo",
        "Node 0 MemTotal:        8192000 kB\nNode 0 MemFree:         4096000 kB\nNode 0 MemUsed: 1 kB\n",
    )

    pci = read_pci(tmp_path).text
    assert pci is not None
    assert "/sys/bus/pci/devices/0000:1b:00.0/current_link_width:8\n" in pci
    assert "/sys/bus/pci/devices/0000:1b:00.0/max_link_speed:32.0 GT/s PCIe\n" in pci
    assert "0000:00:1f.0" not in pci

    from fleetdx.probes.parsers.ibstat import PhysState, PortState, parse_ibstat
    from fleetdx.probes.parsers.numactl import parse_numactl

    port = parse_ibstat(read_infiniband(tmp_path).text or "").ca("mlx5_0").ports[0]
    assert (port.state, port.phys_state, port.rate_gbps) == (PortState.DOWN, PhysState.DISABLED, 40.0)
    numa = parse_numactl(read_numa(tmp_path).text or "")
    assert numa.nodes[0].cpus == [0, 1, 2, 3]
    assert (numa.nodes[0].size_mb, numa.nodes[0].free_mb) == (8000, 4000)

    empty = tmp_path / "empty"
    empty.mkdir()
    for got in (read_pci(empty), read_infiniband(empty), read_numa(empty)):
        assert got.text is None and got.reason


@pytest.mark.skipif(sys.platform != "linux", reason="needs Linux sysfs")
def test_sysfs_numa_of_this_machine_parses() -> None:
    from fleetdx.probes.parsers.numactl import parse_numactl

    got = read_numa(Path("/"))
    assert got.text is not None
    numa = parse_numactl(got.text)
    assert sum(len(n.cpus) for n in numa.nodes) == os.cpu_count()


def test_sysfs_collector_os_error_is_recorded_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fleetdx.probes.bundle as bundle_mod
    from fleetdx.probes import sysfs

    def unlistable(root: Path) -> sysfs.SysfsText:
        raise PermissionError(13, "Permission denied", str(root / "sys/class/infiniband"))

    monkeypatch.setattr(bundle_mod, "COLLECTORS", (unlistable, sysfs.read_numa))
    monkeypatch.setitem(bundle_mod.COLLECTOR_SOURCES, unlistable, SysfsSource.INFINIBAND)
    data = collect(SubprocessRunner(), Level.QUICK, host="n", sysfs_root=tmp_path)
    meta = data.meta_for(SysfsSource.INFINIBAND.value)
    assert meta is not None and meta.status is RunStatus.FAILED
    assert meta.reason is not None and "Permission denied" in meta.reason
    assert SysfsSource.INFINIBAND.value not in data.files


def test_collect_out_naming_a_file_is_refused_before_collecting(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from fleetdx.orchestrator.cli import collect_cmd
    from fleetdx.orchestrator.cli.main import NagiosGroup

    app = typer.Typer(cls=NagiosGroup)
    collect_cmd.register(app)
    app.command("noop")(lambda: None)
    target = tmp_path / "afile"
    target.write_text("keep me\n")
    r = CliRunner().invoke(app, ["collect", "--out", str(target)])
    # before: an internal FileExistsError after the probes ran
    assert r.exit_code == 3 and "exists and is not a directory" in r.stderr and "Traceback" not in r.output
    assert target.read_text() == "keep me\n"


@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid")
@pytest.mark.parametrize("cgroups", [True, False], ids=["cgroup", "token"])
def test_a_tool_that_leaves_a_setsid_child_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cgroups: bool
) -> None:
    # issue 21 item 2: a stand-in nvidia-smi that starts a detached grandchild on every call (own session, output
    # elsewhere) and returns once it has detached (7 were left running after one collect); the bundle's meta
    # names what the runner killed
    import psutil

    from fleetdx.probes import runner as runner_mod

    monkeypatch.setattr(runner_mod._Cgroup, "_usable", None if cgroups else False)
    probe = runner_mod._Cgroup.make() if cgroups else None
    if cgroups and probe is None:
        pytest.skip("no writable cgroup v2 hierarchy here")
    if probe is not None:
        probe.kill()
    bindir = tmp_path / "bin"
    pids = tmp_path / "pids"
    pids.mkdir()
    script = (
        f"f={pids}/$$\n"
        'setsid sh -c "echo \\$\\$ > $f.tmp && mv $f.tmp $f; exec sleep 3599.31" >/dev/null 2>&1 </dev/null &\n'
        'while [ ! -s "$f" ]; do sleep 0.01; done\n'
        "exit 0\n"
    )
    _tool(bindir, "nvidia-smi", script)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    data = collect(SubprocessRunner(), Level.QUICK, host="n", sysfs_root=None)
    started = [int(p.read_text()) for p in pids.iterdir()]
    smi = [c for c in data.commands if c.argv[:1] == ["nvidia-smi"]]
    assert len(started) == len(smi) >= 5
    for pid in started:
        try:
            proc = psutil.Process(pid)
            assert proc.status() == psutil.STATUS_ZOMBIE or "3599.31" not in " ".join(proc.cmdline()), pid
        except psutil.NoSuchProcess:
            pass
    assert all(len(c.left_behind) == 1 and c.left_behind[0].startswith("pid ") for c in smi), smi
