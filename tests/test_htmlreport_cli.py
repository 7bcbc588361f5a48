"""``--html OUT`` of ``fleetdx postmortem`` and ``fleetdx steps`` through the CLI, on real inputs: the page is
written next to the usual output (the JSON unchanged on stdout, the exit code the verdict's), and a path that
cannot be written is one line on stderr and exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from tests.cliapp import cli_app
from tests.htmlreport_samples import STEP_TRACES

JOBLOGS = Path(__file__).parent / "fixtures" / "joblogs"
runner = CliRunner()


def _app(module_name: str) -> typer.Typer:
    import importlib

    return cli_app(importlib.import_module(f"fleetdx.orchestrator.cli.{module_name}"))


def _log(prefix: str) -> str:
    (p,) = JOBLOGS.glob(prefix + "_*.log")
    return str(p)


def test_postmortem_html(tmp_path: Path) -> None:
    out = tmp_path / "pm.html"
    log = _log("22")
    res = runner.invoke(_app("postmortem_cmd"), ["postmortem", "--logs", log, "--json", "--html", str(out)])
    data = json.loads(res.stdout)  # stdout is still only the JSON
    assert res.exit_code == data["exit_code"] == 2
    page = out.read_text(encoding="utf-8")
    first = data["causes"][0]
    assert page.index('id="cause-1"') < page.index(first["code"]) < page.index('id="timeline"')
    assert f"<code>{log}</code>" in page  # the inputs at the foot

    res = runner.invoke(_app("postmortem_cmd"), ["postmortem", "--logs", log, "--html", str(out.with_suffix(".2"))])
    assert res.exit_code == 2
    assert f"HTML report: {out.with_suffix('.2')}" in res.stdout.replace("\n", "")


def test_postmortem_html_unwritable(tmp_path: Path) -> None:
    res = runner.invoke(
        _app("postmortem_cmd"), ["postmortem", "--logs", _log("22"), "--html", str(tmp_path / "no" / "x.html")]
    )
    assert res.exit_code == 3
    assert res.stderr.strip().startswith("error:") and "cannot write" in res.stderr
    assert "Traceback" not in res.output


def test_steps_html(tmp_path: Path) -> None:
    out = tmp_path / "steps.html"
    res = runner.invoke(_app("steps_cmd"), ["steps", str(STEP_TRACES), "--json", "--html", str(out)])
    data = json.loads(res.stdout)
    assert res.exit_code == 1  # a straggler: a warning
    page = out.read_text(encoding="utf-8")
    assert data["findings"][0]["code"] in page
    assert page.index('id="finding-1"') < page.index('id="stage-bars"') < page.index('id="step-series"')


def test_steps_html_unwritable(tmp_path: Path) -> None:
    res = runner.invoke(_app("steps_cmd"), ["steps", str(STEP_TRACES), "--html", str(tmp_path)])
    assert res.exit_code == 3
    assert "is a folder" in res.stderr and "Traceback" not in res.output
