"""Human output on an 80-column terminal (issue 21, item 11): ``fleetdx steps`` cut the step and p95 figures to
``105…``, ``topo show`` cut every header to ``G…``/``N…``, and ``--help`` squeezed its help column to a word per
line. At 80 columns tables now change layout (short headers with a legend, fewer columns per table) rather than
cut a figure or a name."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperOption
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import common, conventions, steps_cmd, topo_cmd
from fleetdx.orchestrator.cli.main import _register, app
from tests.cliapp import cli_app

FIX = Path(__file__).parent / "fixtures"
runner = CliRunner()


@pytest.fixture
def width_80(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer import rich_utils

    monkeypatch.setattr(common.console, "width", 80)
    monkeypatch.setattr(rich_utils, "MAX_WIDTH", 80)


@pytest.mark.parametrize(
    "trace", ["cpu-gloo-slow-data-rank2", "h100-nccl1-slow-data", "hta-a100-16rank", "h100-gloo4-slow-data-rank2"]
)
def test_steps_figures_are_whole_at_80_columns(width_80: None, trace: str) -> None:
    path = str(FIX / "traces" / trace)
    app1 = cli_app(steps_cmd)
    doc = json.loads(runner.invoke(app1, ["steps", path, "--json", "-j", "1"]).stdout)
    res = runner.invoke(app1, ["steps", path, "-j", "1"])
    assert res.exit_code in (0, 1), res.output
    table_lines = [x for x in res.stdout.splitlines() if x.startswith(("┃", "│"))]
    assert table_lines and all(len(x) <= 80 for x in table_lines)
    assert "…" not in res.stdout
    for r in doc["ranks"]:
        stages = [v for v in r["stages_ms"].values() if v > 0]  # a stage of 0 ms on every rank is not shown
        for figure in (r["step_time_ms"]["median"], r["step_time_ms"]["p95"], *stages):
            assert f"{figure:.1f}" in res.stdout, (r["rank"], figure)


@pytest.mark.parametrize("topo", sorted(p.name for p in (FIX / "topo").glob("[0-7]*.txt")))
def test_topo_show_headers_are_whole_at_80_columns(width_80: None, topo: str) -> None:
    res = runner.invoke(cli_app(topo_cmd), ["topo", "show", str(FIX / "topo" / topo)])
    assert res.exit_code in (0, 1, 2), res.output
    matrix = res.stdout.split("\nNearest NIC")[0].split("\nGPU pairs crossing")[0]
    assert "…" not in matrix
    assert all(len(x.rstrip()) <= 80 for x in matrix.splitlines())
    doc = json.loads(runner.invoke(cli_app(topo_cmd), ["topo", "show", str(FIX / "topo" / topo), "--json"]).stdout)
    for gpu in doc["gpus"]:  # every GPU and NIC is named in full (a header, or the short layout's legend)
        assert re.search(rf"\b({gpu}|G{gpu.removeprefix('GPU')})\b", matrix), gpu
    for nic in doc["nics"]:
        assert nic in matrix, nic


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    subs = getattr(command, "commands", None)
    if subs is None:
        return [(path, command)]
    return [x for name, sub in subs.items() for x in _commands(sub, (*path, name))]


def _all_commands() -> list[tuple[tuple[str, ...], Any]]:
    _register()
    root = typer.main.get_command(app)
    conventions.apply(root)
    return _commands(root)


@pytest.mark.parametrize("path", [p for p, _ in _all_commands()], ids=" ".join)
def test_help_keeps_a_wide_help_column_at_80_columns(width_80: None, path: tuple[str, ...]) -> None:
    """Each option's help starts within the first 45 columns of its row (before: the name columns took 57 and
    the help text went to a word or two per line), and nothing is cut with an ellipsis."""
    (command,) = [c for p, c in _all_commands() if p == path]
    res = runner.invoke(app, [*path, "--help"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert "…" not in res.stdout and all(len(x) <= 80 for x in lines)
    assert not any(re.match(r"│ (\* +)?, ", x) for x in lines)  # an argument's row starts with its name
    for p in command.params:
        if not isinstance(p, TyperOption) or p.hidden or not p.help:
            continue
        name = conventions.option_name(p)
        (row,) = [x for x in lines if re.match(rf"│ (\* +)?{re.escape(name)}\b", x.replace("│    ", "│ "))][:1] or [
            ""
        ]
        first_word = p.help.split()[0].strip("`")
        at = row.find(first_word, row.find(name) + len(name))
        assert 0 < at <= 45, (name, row)


def test_codes_meanings_are_readable_at_80_columns(width_80: None) -> None:
    """``fleetdx codes`` squeezed each meaning to two words a line; at 80 columns each code is now a block."""
    from fleetdx.orchestrator.cli import codes_cmd
    from fleetdx.orchestrator.judgement.catalog import catalog

    res = runner.invoke(cli_app(codes_cmd), ["codes"])
    assert res.exit_code == 0, res.output
    lines = [" ".join(x.split()) for x in res.stdout.splitlines()]
    assert all(len(x) <= 80 for x in res.stdout.splitlines()) and "…" not in res.stdout
    for spec in catalog().codes:
        assert any(x.startswith(spec.code.value) for x in lines), spec.code
        first_words = " ".join(spec.description.split()[:3])
        assert any(first_words in x for x in lines), (spec.code, first_words)
