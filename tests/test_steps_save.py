"""``fleetdx steps --save``: the analysis kept in the store, where ``fleetdx report --job`` finds it; a store that
cannot be written costs the keeping (one line on stderr), never the analysis or its exit code."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fleetdx.orchestrator.cli import report_cmd, steps_cmd
from fleetdx.orchestrator.steps.contracts import StepsReport
from fleetdx.orchestrator.store import Store
from tests.cliapp import cli_app

APP = cli_app(steps_cmd, report_cmd)
#: a real 4-rank gloo DDP capture whose rank 2 waits 60 ms per batch for data (tests/fixtures/traces/README.md)
SLOW_DATA = Path(__file__).parent / "fixtures" / "traces" / "cpu-gloo-slow-data-rank2"


def test_saved_analysis_is_in_the_job_report(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    res = CliRunner().invoke(APP, ["steps", str(SLOW_DATA), "--job", "55", "--save", "--db", db, "--json"])
    assert res.exit_code == 1, res.output  # the straggler is a warning
    assert json.loads(res.stdout)["findings"][0]["code"] == "STEP_STRAGGLER_RANK"
    assert "kept in" in res.stderr
    with Store.open(db) as store:
        (record,) = store.list_step_analyses(job_id="55")
        stored = store.get_step_analysis(record.analysis_id, StepsReport)
    assert record.ranks == 4 and stored.findings[0].code.value == "STEP_STRAGGLER_RANK"
    job = CliRunner().invoke(APP, ["report", "--job", "55", "--db", db, "--json"])
    assert job.exit_code == 1 and record.analysis_id in job.stdout


def test_a_store_that_cannot_be_written_costs_only_the_keeping(tmp_path: Path) -> None:
    db = "postgresql://fleetdx:x@127.0.0.1:1/none"  # nothing listens on port 1
    res = CliRunner().invoke(APP, ["steps", str(SLOW_DATA), "--save", "--db", db, "--json"])
    assert res.exit_code == 1 and "not kept" in res.stderr
    assert json.loads(res.stdout)["findings"][0]["code"] == "STEP_STRAGGLER_RANK"
