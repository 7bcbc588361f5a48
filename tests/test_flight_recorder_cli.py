"""``fleetdx postmortem --fr DIR`` through the CLI on the real gloo dumps of tests/fixtures/flight_recorder: the
Flight Recorder's cause in the --json contract, the host from the logs' rank -> host map, the exit code, and a
folder that holds no dumps (missing evidence, never a crash)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import postmortem_cmd
from fleetdx.probes.contracts import Job, RankPlacement, SchedulerKind
from tests.cliapp import cli_app

FIX = Path(__file__).parent / "fixtures" / "flight_recorder"
runner = CliRunner()


def _app() -> typer.Typer:
    return cli_app(postmortem_cmd)


app = _app()


def _run(*args: str) -> tuple[int, dict[str, Any]]:
    res = runner.invoke(app, ["postmortem", *args, "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_fr_alone_names_the_rank_that_hung() -> None:
    code, doc = _run("--fr", str(FIX / "gloo_rank3_skips_allreduce" / "pickle"))
    assert code == 2 and doc["verdict"] == "CRITICAL"
    first = doc["causes"][0]
    assert (first["code"], first["rank"], (first["nodes"] or [None])[0]) == ("NCCL_TIMEOUT", 3, None)
    assert first["evidence"][0]["file"].endswith("nccl_trace_rank_3") and first["evidence"][0]["line"] == 4
    assert [t["kind"] for t in doc["timeline"]] == ["flight-recorder", "flight-recorder"]


def test_fr_with_logs_gets_the_host(tmp_path: Path) -> None:
    """A synthesised job log (host-prefixed torchrun-style lines, no failure in them) gives the rank -> host map."""
    log = tmp_path / "synth_job.log"
    log.write_text("".join(f"sim{r + 1}: [rank{r}]: step 4 loss 0.5\n" for r in range(4)))
    code, doc = _run("--fr", str(FIX / "gloo_rank3_skips_allreduce" / "json"), "--logs", str(log))
    assert code == 2
    first = doc["causes"][0]
    assert (first["rank"], (first["nodes"] or [None])[0], first["nodes"]) == (3, "sim4", ["sim4"])


def test_fr_desync_is_a_config_error() -> None:
    code, doc = _run("--fr", str(FIX / "gloo_rank2_wrong_dtype" / "json"))
    assert code == 2 and doc["causes"][0]["code"] == "CONFIG_ERROR" and doc["causes"][0]["rank"] == 2


def test_fr_without_divergence_is_unknown_with_the_reason() -> None:
    code, doc = _run("--fr", str(FIX / "gloo_rank3_exits_early" / "pickle"))
    assert code == 3 and doc["causes"][0]["code"] == "UNKNOWN"
    assert any("no rank is missing from a collective" in m for m in doc["missing_evidence"])


def test_fr_folder_without_dumps_is_missing_evidence(tmp_path: Path) -> None:
    code, doc = _run("--fr", str(tmp_path))
    assert code == 3
    assert any(
        "Flight Recorder dumps not read" in m and "no Flight Recorder dump" in m for m in doc["missing_evidence"]
    )


def test_job_model_gives_world_size_and_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job model (stand-in for scontrol, monkeypatched) with 4 ranks on sim1..sim4: the rank that exited
    without a dump is named as the member that left none; the hung rank gets its host from the job."""
    job = Job(
        scheduler=SchedulerKind.SLURM,
        job_id="77",
        nodes=["sim1", "sim2", "sim3", "sim4"],
        state="FAILED",
        exit_code=1,
        ranks=[RankPlacement(rank=r, host=f"sim{r + 1}") for r in range(4)],
    )
    import fleetdx.orchestrator.scheduler.job as jobmod

    monkeypatch.setattr(jobmod, "load_slurm_job", lambda job_id: job)
    code, doc = _run("--job", "77", "--fr", str(FIX / "gloo_rank3_exits_early" / "json"))
    assert code == 3
    assert any("no readable dump from ranks [3]" in m for m in doc["missing_evidence"])
    assert any("members [3] left no dump" in m for m in doc["missing_evidence"])
    code, doc = _run("--job", "77", "--fr", str(FIX / "gloo_rank3_skips_allreduce" / "json"))
    assert code == 2 and (doc["causes"][0]["rank"], doc["findings"][0]["nodes"][0]) == (3, "sim4")


def test_fr_jobs_reaches_the_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    """--fr-jobs N is the number of processes analyze_dir reads the dumps in; without it, None (the CPUs)."""
    from fleetdx.orchestrator.postmortem import flight

    seen: list[int | None] = []
    real = flight.analyze_dir

    def spy(folder: Path, prefix: str | None = None, **kw: Any) -> flight.FrAnalysis:
        seen.append(kw.get("jobs"))
        return real(folder, prefix, **kw)

    monkeypatch.setattr(flight, "analyze_dir", spy)
    folder = str(FIX / "gloo_rank3_skips_allreduce" / "pickle")
    code, doc = _run("--fr", folder, "--fr-jobs", "3")
    code_default, doc_default = _run("--fr", folder)
    assert seen == [3, None] and code == code_default == 2
    assert doc["causes"] == doc_default["causes"]
    assert runner.invoke(app, ["postmortem", "--fr", folder, "--fr-jobs", "0"]).exit_code == 3
