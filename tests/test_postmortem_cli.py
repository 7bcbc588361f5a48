"""``fleetdx postmortem`` end to end through the CLI on the real job logs: the --json contract, the Nagios exit
code of the verdict, paths taken by kind, the job model, and usage errors (exit 3, one line, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import postmortem_cmd
from fleetdx.probes.contracts import Job, RankPlacement, SchedulerKind
from tests.cliapp import cli_app

FIX = Path(__file__).parent / "fixtures" / "joblogs"
runner = CliRunner()


def _app() -> typer.Typer:
    return cli_app(postmortem_cmd)  # the real root group: usage errors exit 3


app = _app()


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetdx.orchestrator.cli import common

    monkeypatch.setattr(common.console, "width", 300)


def _p(prefix: str) -> str:
    (p,) = FIX.glob(prefix + "_*.log")
    return str(p)


def test_json_names_the_failing_rank_and_host_and_exits_critical() -> None:
    res = runner.invoke(app, ["postmortem", "--logs", _p("22"), "--json"])
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    c = doc["causes"][0]
    assert doc["verdict"] == "CRITICAL" and doc["exit_code"] == 2
    assert (c["code"], c["rank"], (c["nodes"] or [None])[0]) == (
        "NCCL_NETWORK_ERROR",
        12,
        "container-e275-1553839402050-12124-01-000057",
    )
    assert c["evidence"][0] == {
        "file": _p("22"),
        "line": 1,
        "text": "2019-06-02T16:13:44.884Z: [1,12]<stdout>:container-e275-1553839402050-12124-01-000057:815:864 [0] "
        "transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error",
    }


def test_human_output_and_paths_by_kind(tmp_path: Path) -> None:
    bundle = tmp_path / "gpu7"
    bundle.mkdir()
    (bundle / "dmesg.txt").write_text(Path(_p("05")).read_text())
    # --logs takes one file; the other file and the directory follow as paths and are taken by kind
    res = runner.invoke(app, ["postmortem", "--logs", _p("01"), _p("40"), str(bundle)])
    assert res.exit_code == 2, res.output
    assert "1. CRITICAL GPU_HW_FAULT  gpu7  PCI:0000:02:00" in res.stdout
    assert "NCCL_TIMEOUT" in res.stdout and "verdict: CRITICAL (exit 2)" in res.stdout


def test_top_shows_the_most_likely_causes_and_says_how_many_more(tmp_path: Path) -> None:
    """A log with 14 causes (14 hosts' segfaults): the human output shows --top of them and counts the rest;
    --top 0 shows them all; --json has them all whatever --top says."""
    log = tmp_path / "job.out"
    log.write_text("".join(f"srun: error: gpu{i:02d}: task {i}: Segmentation fault (core dumped)\n" for i in range(14)))
    res = runner.invoke(app, ["postmortem", "--logs", str(log), "--no-save"])
    assert res.exit_code == 2, res.output
    assert "\n10. " in res.stdout and "\n11. " not in res.stdout
    assert "(+4 more candidate causes, less likely: --top 0 shows them all" in res.stdout
    every = runner.invoke(app, ["postmortem", "--logs", str(log), "--no-save", "--top", "0"])
    assert "\n14. " in every.stdout and "more candidate causes" not in every.stdout
    doc = json.loads(runner.invoke(app, ["postmortem", "--logs", str(log), "--no-save", "--top", "2", "--json"]).stdout)
    assert len(doc["causes"]) == 14


def test_nothing_found_is_unknown_3(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    log.write_text("step 1 loss 3.2\n")
    res = runner.invoke(app, ["postmortem", "--logs", str(log), "--json"])
    assert res.exit_code == 3
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "UNKNOWN" and doc["causes"][0]["code"] == "UNKNOWN" and doc["missing_evidence"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["postmortem"], "nothing to read"),
        (["postmortem", "--logs", "x.log", "--since", "yesterday"], "not ISO 8601"),
        (["postmortem", "--logs", "x.log", "--since", "2026-01-02", "--until", "2026-01-01"], "before --since"),
        (["postmortem", "--logs", "x.log", "--nodes", "gpu[01-"], "bad hostlist"),
        (["postmortem", "--job", "abc"], "not a Slurm job id"),
    ],
)
def test_usage_errors_exit_3(args: list[str], needle: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 3, res.output
    assert needle in res.output and "Traceback" not in res.output


def test_job_model_gives_window_nodes_and_rank_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    job = Job(
        scheduler=SchedulerKind.SLURM,
        job_id="4711",
        nodes=["n1", "n2"],
        state="FAILED",
        exit_code=1,
        ranks=[RankPlacement(rank=0, host="n1", local_rank=0, gpu="GPU0")],
    )
    import fleetdx.orchestrator.scheduler.job as jobmod

    monkeypatch.setattr(jobmod, "load_slurm_job", lambda job_id: job)
    res = runner.invoke(app, ["postmortem", "--job", "4711", "--logs", _p("08"), "--json"])
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert doc["job"]["job_id"] == "4711"
    c = doc["causes"][0]
    assert (c["code"], c["rank"], (c["nodes"] or [None])[0], c["gpu"]) == ("CUDA_ERROR", 0, "n1", "GPU0")


def test_job_reads_its_epilog_bundles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--job with --bundle-dir: the bundles slurm/epilog.sh kept under DIR/JOBID/HOST are read. n1's bundle is
    the real h100-busy bundle with its kernel log replaced by the real XID 79 capture (joblog fixture 05)."""
    import shutil

    job = Job(scheduler=SchedulerKind.SLURM, job_id="4711", nodes=["n1", "n2"], state="FAILED", exit_code=1)
    import fleetdx.orchestrator.scheduler.job as jobmod

    monkeypatch.setattr(jobmod, "load_slurm_job", lambda job_id: job)
    n1 = tmp_path / "4711" / "n1"
    shutil.copytree(Path(__file__).parent / "fixtures" / "bundles" / "h100-busy", n1)
    (n1 / "meta.json").unlink(missing_ok=True)
    shutil.copy(_p("05"), n1 / "dmesg_nvrm.txt")
    res = runner.invoke(app, ["postmortem", "--job", "4711", "--bundle-dir", str(tmp_path), "--json"])
    doc = json.loads(res.stdout)
    assert any(c["code"] == "GPU_HW_FAULT" and "n1" in c["nodes"] for c in doc["causes"]), doc["causes"]
    none = runner.invoke(app, ["postmortem", "--job", "4711", "--bundle-dir", str(tmp_path / "elsewhere"), "--json"])
    assert any("no epilog bundles of job 4711" in m for m in json.loads(none.stdout)["missing_evidence"])
