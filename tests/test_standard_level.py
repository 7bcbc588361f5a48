"""``--level standard`` runs the intra-node nccl-tests sweep when ``all_reduce_perf`` can be found.

No GPU here, so two stand-ins, both labelled as such:

* ``tests/fixtures/standin/bin/all_reduce_perf`` (a script, NOT nccl-tests) prints, for ``-g 1``, the text
  captured from the real all_reduce_perf 2.19.6 on an idle H100 VM (``standin/all_reduce_perf_-I1_-J.txt``);
* :func:`fake_nvidia_smi` writes an ``nvidia-smi`` script that prints, for the same arguments, what the real
  one printed on that VM (``fixtures/bundles/h100-idle``): one GPU, so the sweep runs with ``-g 1``.

The sweep itself is a real child process spawned by the one runner. The figures asserted below are read by
eye from the captured text.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from fleetdx.orchestrator.diagnosis import rules_nccl
from fleetdx.orchestrator.diagnosis.base import Fleet
from fleetdx.orchestrator.diagnosis.engine import diagnose, run_rules
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.preflight.run import node_nccl_binary, report_of
from fleetdx.orchestrator.report import RunKind
from fleetdx.probes.bundle import collect, find_raw_file, read_bundle
from fleetdx.probes.catalog import commands
from fleetdx.probes.contracts import Level, RunStatus, Verdict
from fleetdx.probes.facts import node_facts
from fleetdx.probes.runner import SubprocessRunner

FIXTURES = Path(__file__).parent / "fixtures"
STANDIN_BIN = FIXTURES / "standin" / "bin"
STANDIN = STANDIN_BIN / "all_reduce_perf"
H100_IDLE = FIXTURES / "bundles" / "h100-idle"
#: the sweep's file for a one-GPU node: ``all_reduce_perf -b 8 -e 1G -f 2 -g 1`` (probes/commands.py)
SWEEP_FILE = "all_reduce_perf_-b8_-e1G_-f2_-g1.txt"
#: the largest row of the captured run (standin/all_reduce_perf_-I1_-J.txt), out-of-place columns
LARGEST_ROW = "134217728      33554432     float     sum      -1    93.72  1432.1"


def fake_nvidia_smi(directory: Path) -> Path:
    """Write a stand-in ``nvidia-smi`` into ``directory`` (returned): for the arguments of a registered
    command it prints the h100-idle bundle's capture of that command (:func:`fleetdx.probes.bundle.find_raw_file`);
    exit 9 for arguments never captured."""
    captured = {}
    for cmd in commands(Level.QUICK):
        path = find_raw_file(H100_IDLE, cmd.argv) if cmd.argv[0] == "nvidia-smi" else None
        if path is not None:
            captured[" ".join(cmd.argv[1:])] = str(path)
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "nvidia-smi"
    exe.write_text(
        f"#!{sys.executable} -I\n"
        '"""STAND-IN for nvidia-smi (tests only): replays captures of an idle H100 VM."""\n'
        "import sys\n"
        f"CAPTURED = {captured!r}\n"
        "path = CAPTURED.get(' '.join(sys.argv[1:]))\n"
        "if path is None:\n"
        "    sys.exit(9)\n"
        "sys.stdout.write(open(path, encoding='utf-8').read())\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return directory


@pytest.fixture
def smi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH starts with the stand-in nvidia-smi; no NCCL_TESTS_HOME; returns the directory."""
    bin_dir = fake_nvidia_smi(tmp_path / "smi-bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("NCCL_TESTS_HOME", raising=False)
    return bin_dir


def test_binary_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("NCCL_TESTS_HOME", raising=False)
    assert node_nccl_binary(Level.QUICK, str(STANDIN_BIN)) is None  # quick never runs the sweep
    assert node_nccl_binary(Level.STANDARD) is None
    assert node_nccl_binary(Level.STANDARD, str(STANDIN_BIN)) == str(STANDIN)
    monkeypatch.setenv("NCCL_TESTS_HOME", str(STANDIN_BIN))
    assert node_nccl_binary(Level.FULL) == str(STANDIN)
    monkeypatch.delenv("NCCL_TESTS_HOME")
    monkeypatch.setenv("PATH", f"{empty}{os.pathsep}{STANDIN_BIN}")
    assert node_nccl_binary(Level.STANDARD) == str(STANDIN)


@pytest.mark.timeout(60)
def test_standard_collect_runs_the_sweep_and_it_parses(smi_on_path: Path) -> None:
    data = collect(
        SubprocessRunner(),
        Level.STANDARD,
        "h100-standin",
        sysfs_root=None,
        nccl_binary=node_nccl_binary(Level.STANDARD, str(STANDIN_BIN)),
    )
    meta = {c.file: c for c in data.commands}
    assert meta[SWEEP_FILE].status is RunStatus.OK
    assert meta[SWEEP_FILE].argv == [str(STANDIN), "-b", "8", "-e", "1G", "-f", "2", "-g", "1"]
    text = data.files[SWEEP_FILE]
    assert LARGEST_ROW in text and "# Out of bounds values : 0 OK" in text
    facts = node_facts(data)
    assert [f.file for f in facts.parse_failures] == []
    (named,) = facts.nccl_tests
    (run,) = named.report.runs
    assert run.complete and run.ngpus == 1 and run.wrong_total == 0
    top = run.rows[-1]
    assert (top.size, top.out_of_place.time_us, top.out_of_place.algbw_gbps) == (134217728, 93.72, 1432.1)
    fleet = Fleet(nodes=[facts])
    assert run_rules(facts, fleet, rules_nccl.RULES) == []  # a healthy sweep: no NCCL finding
    # the whole node: the only finding is the one command the stand-in has no capture for (the idle VM's
    # bundle holds no --query-compute-apps output, so the stand-in exits 9)
    report = report_of(RunKind.PREFLIGHT, diagnose(fleet), started_at=0.0, level=None, simulated=False)
    assert [(f.code, f.subject) for f in report.findings] == [
        (FindingCode.PROBE_FAILED, "nvidia-smi_query-compute-apps.csv")
    ]
    assert report.verdict is Verdict.WARNING


@pytest.mark.timeout(60)
def test_cli_collect_standard_with_nccl_tests_dir(smi_on_path: Path, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from fleetdx.orchestrator.cli import collect_cmd

    app = typer.Typer()
    collect_cmd.register(app)
    app.command("noop")(lambda: None)  # two commands: typer keeps the "collect" sub-command name
    out = tmp_path / "bundle"
    args = ["collect", "--out", str(out), "--level", "standard", "--nccl-tests-dir", str(STANDIN_BIN)]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.stdout)
    sweep = next(c for c in meta["commands"] if c["file"] == SWEEP_FILE)
    assert (sweep["status"], sweep["argv"][0]) == ("ok", str(STANDIN))
    assert LARGEST_ROW in (out / SWEEP_FILE).read_text()
    assert SWEEP_FILE in read_bundle(out).files


def test_standard_collect_without_the_binary_says_skipped(smi_on_path: Path) -> None:
    data = collect(SubprocessRunner(), Level.STANDARD, "h100-standin", sysfs_root=None, nccl_binary=None)
    (sweep,) = [c for c in data.commands if c.file == SWEEP_FILE]
    assert sweep.status is RunStatus.SKIPPED and "not found" in (sweep.reason or "")
    assert SWEEP_FILE not in data.files
