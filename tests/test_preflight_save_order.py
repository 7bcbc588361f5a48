"""``fleetdx preflight`` writes the exclude file and prints the verdict before it saves the report: a slow or
unreachable database must not delay what the job script acts on. The save still happens before the exit, and
its line is still printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from fleetdx.orchestrator.cli import preflight_cmd
from fleetdx.orchestrator.preflight.run import PreflightResult, analyze_bundles
from fleetdx.orchestrator.store import SaveOutcome

BUNDLES = Path(__file__).parent / "fixtures" / "bundles"


@pytest.mark.parametrize("as_json", [True, False])
def test_verdict_and_exclude_file_come_before_the_save(
    as_json: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = analyze_bundles([BUNDLES / "h100-busy", BUNDLES / "h100-idle"])
    exclude = tmp_path / "bad-nodes.txt"
    seen: dict[str, str] = {}

    def save(r: PreflightResult) -> SaveOutcome:
        assert r is result
        seen["exclude"] = exclude.read_text()
        seen["stdout"] = capsys.readouterr().out
        return SaveOutcome(saved=True, database="sqlite:///test.db")

    with pytest.raises(typer.Exit) as exited:
        preflight_cmd._finish(result, as_json, exclude, save)
    assert exited.value.exit_code == 2
    assert seen["exclude"] == "h100-busy\n"
    if as_json:
        assert json.loads(seen["stdout"])["verdict"] == "CRITICAL"
    else:
        assert "verdict: CRITICAL (exit 2)" in seen["stdout"]
    after = capsys.readouterr()
    assert "report saved to sqlite:///test.db" in (after.err if as_json else after.out)
    if as_json:
        assert after.out == ""
