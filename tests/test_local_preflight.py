"""The local fast path: a pre-flight of this machine alone runs in-process, without Ray, and is judged as a
Ray fan-out's result is; a hung or crashing collection becomes a finding within the deadline."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fleetdx.orchestrator.cluster.fanout import OutcomeKind
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.preflight import run as run_mod
from fleetdx.orchestrator.preflight.job import only_this_host
from fleetdx.orchestrator.preflight.run import NodeJob, collect_here, run_local_preflight
from fleetdx.probes.contracts import Level, Verdict

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"


def test_only_this_host_decides_the_local_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("FLEETDX_K8S_NODE_NAME", raising=False)
    me = socket.gethostname()
    assert only_this_host(None, Level.QUICK, None, os.environ) == me
    assert only_this_host([me], Level.STANDARD, None, os.environ) == me
    assert only_this_host([me], Level.FULL, None, os.environ) is None  # cross-node step: Ray
    assert only_this_host(["other-node"], Level.QUICK, None, os.environ) is None
    assert only_this_host([me, "other-node"], Level.QUICK, None, os.environ) is None
    assert only_this_host(None, Level.QUICK, "10.0.0.1:6379", os.environ) is None  # a named cluster is used
    assert only_this_host(None, Level.QUICK, "local", os.environ) is None  # a private local Ray, asked for
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert only_this_host(None, Level.QUICK, None, os.environ) is None
    monkeypatch.delenv("RAY_ADDRESS")
    monkeypatch.setenv("FLEETDX_K8S_NODE_NAME", "gke-a3-pool-1")  # the Kubernetes node, not the pod
    assert only_this_host(None, Level.QUICK, None, os.environ) == "gke-a3-pool-1"


def test_local_replay_is_judged_like_the_fan_out() -> None:
    """A replayed real bundle (the busy H100: another process holds GPU0) through the local path."""
    job = NodeJob(host="h100-vm-busy", level=Level.QUICK, bundle_dir=BUNDLES / "h100-busy")
    result = run_local_preflight(job, run_timeout_s=60)
    assert result.report.nodes[0].host == "h100-vm-busy"
    assert FindingCode.GPU_FOREIGN_PROCESS in {f.code for f in result.report.findings}
    assert result.report.verdict is Verdict.CRITICAL and result.report.exclude == "h100-vm-busy"


def test_a_hung_collection_is_unreachable_within_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    monkeypatch.setattr(run_mod, "collect_on_node", lambda job: release.wait(30))
    t0 = time.monotonic()
    outcome = collect_here(NodeJob(host="me", level=Level.QUICK), run_timeout_s=0.5)
    release.set()
    assert outcome.kind is OutcomeKind.UNREACHABLE and "did not finish within 0.5 s" in (outcome.error or "")
    assert time.monotonic() - t0 < 20  # bounded by the deadline, not by the hung work (generous under load)


def test_a_crashing_collection_is_a_failed_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(job: NodeJob) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(run_mod, "collect_on_node", boom)
    result = run_local_preflight(NodeJob(host="me", level=Level.QUICK), run_timeout_s=10)
    (f,) = result.report.findings
    assert f.code is FindingCode.PROBE_FAILED and "No space left on device" in f.message
    assert result.report.verdict is Verdict.UNKNOWN  # a failed probe never reads as healthy


def test_full_level_is_not_local() -> None:
    with pytest.raises(ValueError, match="full"):
        run_local_preflight(NodeJob(host="me", level=Level.FULL), run_timeout_s=10)


def test_the_readme_command_does_not_start_ray(tmp_path: Path) -> None:
    """``fleetdx preflight`` on this machine (no GPU here: UNKNOWN, exit 3) runs without importing Ray."""
    code = (
        "import sys, runpy; sys.argv = ['fleetdx', 'preflight', '--json', '--no-save']\n"
        "try:\n    runpy.run_module('fleetdx', run_name='__main__')\n"
        "except SystemExit as e:\n    print('RAY' if 'ray' in sys.modules else 'NORAY', e.code, file=sys.stderr)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    report = json.loads(proc.stdout)
    assert report["nodes"][0]["host"] == socket.gethostname() and report["exit_code"] == 3
    assert proc.stderr.strip().splitlines()[-1] == "NORAY 3"


_SPOOL_RUN = """
import json, sys
from fleetdx.orchestrator.cli.main import main
sys.argv = ["fleetdx", "preflight", "--json", "--spool"]
try:
    main()
except SystemExit as e:
    code = e.code
with open(sys.stderr.fileno(), "w", closefd=False) as err:
    err.write("\\nEXIT %s SQLALCHEMY %s\\n" % (code, "sqlalchemy" in sys.modules))
"""


def test_spool_delivers_a_prolog_report_without_a_database_library(tmp_path: Path) -> None:
    # issue 22: a prolog's pre-flight loads no database library; the spool file it leaves loads later
    env = {**os.environ, "FLEETDX_SPOOL_DIR": str(tmp_path / "spool"), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", _SPOOL_RUN], capture_output=True, text=True, env=env, timeout=300)
    tail = proc.stderr.strip().splitlines()[-1]
    assert tail.split()[0] == "EXIT" and tail.endswith("SQLALCHEMY False"), proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    (spooled,) = (tmp_path / "spool").iterdir()
    assert "report spooled to" in proc.stderr and report["run_id"] in spooled.name
    db = f"sqlite:///{tmp_path / 'x.db'}"
    load = subprocess.run(
        [sys.executable, "-m", "fleetdx", "db", "import", str(spooled), "--db", db],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert load.returncode == 0, load.stderr
    hist = subprocess.run(
        [sys.executable, "-m", "fleetdx", "history", socket.gethostname(), "--db", db, "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert report["run_id"] in hist.stdout


def test_spool_excludes_the_other_deliveries() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fleetdx", "preflight", "--spool", "--no-save"], capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 3 and "--spool excludes" in proc.stderr
