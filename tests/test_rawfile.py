"""Raw outputs are read under fixed rules: regular files only, a size limit per kind, bounded memory; a bad
input is one clear error line, never a hang, a MemoryError or a traceback."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetdx.orchestrator.cli.main import _register as register_commands
from fleetdx.orchestrator.cli.main import app
from fleetdx.probes.bundle import read_bundle
from fleetdx.probes.facts import node_facts
from fleetdx.probes.rawfile import RawFileError, read_raw

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"
XID_LINE = "[ 1234.567890] NVRM: Xid (PCI:0000:07:00): 79, pid=0, GPU has fallen off the bus.\n"

register_commands()


def parse(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, ["parse", *args])
    return r.exit_code, r.stdout, r.stderr


def test_fifo_is_refused_at_once_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(RawFileError, match="FIFO"):
        read_raw(fifo)
    code, out, err = parse("topo", str(fifo))
    assert time.monotonic() - t0 < 10 and code != 0 and "FIFO" in err and "Traceback" not in err


def test_dev_zero_is_refused_not_slurped() -> None:
    with pytest.raises(RawFileError, match="character device"):
        read_raw(Path("/dev/zero"))
    code, _, err = parse("topo", "/dev/zero")
    assert code != 0 and "not a regular file" in err


def test_symlink_loop_is_a_clear_error(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(RawFileError, match="symlink loop"):
        read_raw(loop)
    code, _, err = parse("nccl-tests", str(loop))
    assert code != 0 and "symlink loop" in err and "Traceback" not in err


def test_over_the_limit_is_refused_with_the_way_out(tmp_path: Path) -> None:
    big = tmp_path / "all_reduce_perf.txt"
    big.write_bytes(b"#  size count\n" * (2 * 1024 * 1024))  # 28 MiB > the 16 MiB default
    code, _, err = parse("nccl-tests", str(big))
    assert code != 0 and "--max-bytes" in err
    code, _, err = parse("nccl-tests", str(big), "--max-bytes", str(64 * 1024 * 1024))
    assert "--max-bytes" not in err  # read, then judged by the parser itself


def test_a_huge_kernel_log_is_streamed_keeping_only_xid_lines(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    noise = b"[ 1.0] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n" * 4096
    with open(log, "wb") as f:
        for _ in range(200):  # ~55 MB of noise, one XID in the middle
            f.write(noise)
        f.write(XID_LINE.encode())
        for _ in range(200):
            f.write(noise)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    text = read_raw(log, keep=lambda line: "NVRM" in line)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert text == XID_LINE
    assert grown_mb < 50  # streamed: not the 110 MB file in memory
    code, out, err = parse("xid", str(log), "--json")
    assert code == 0, err
    assert '"code": 79' in out


def test_unreadable_bundle_entries_are_reported_as_evidence_not_skipped(tmp_path: Path) -> None:
    bundle = tmp_path / "node01"
    bundle.mkdir()
    for f in (BUNDLES / "h100-idle").iterdir():
        (bundle / f.name).write_bytes(f.read_bytes())
    (bundle / "loop.txt").symlink_to(bundle / "loop.txt")
    os.mkfifo(bundle / "pipe.txt")
    (bundle / "subdir").mkdir()
    data = read_bundle(bundle)
    assert set(data.unreadable) == {"loop.txt", "pipe.txt", "subdir"}
    assert "symlink loop" in data.unreadable["loop.txt"] and "FIFO" in data.unreadable["pipe.txt"]
    facts = node_facts(data)
    assert facts.smi is not None  # the readable evidence is still read
    r = CliRunner().invoke(app, ["analyze", str(bundle), "--json"])
    assert "Traceback" not in r.stderr
    assert '"subject": "pipe.txt"' in r.stdout and "could not be read" in r.stdout
