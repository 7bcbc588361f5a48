"""The CLI loads a command's module only when that command runs (issue 22: start-up). Real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import typer
import typer.main

from fleetdx.orchestrator.cli import commands

_LOADED = """
import json, sys
from fleetdx.orchestrator.cli.main import main
sys.argv = ["fleetdx", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
with open(sys.stdout.fileno(), "w", closefd=False) as out:
    out.write("\\nLOADED " + json.dumps(sorted(sys.modules)) + "\\n")
"""


def _loaded(*argv: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", _LOADED, *argv], capture_output=True, text=True, timeout=120)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("LOADED "))
    return set(json.loads(line.removeprefix("LOADED ")))


def test_the_table_names_every_command_its_modules_register() -> None:
    seen: dict[str, str] = {}
    for module in commands.modules():
        sub = typer.Typer()
        sub.callback()(lambda: None)
        module.register(sub)
        for name in getattr(typer.main.get_command(sub), "commands", {}):
            seen[name] = module.__name__.rsplit(".", 1)[1]
    assert seen == commands.COMMANDS


def test_a_command_loads_its_own_module_only() -> None:
    cli = {m for m in _loaded("codes", "--json") if m.startswith("fleetdx.orchestrator.cli.") and m.endswith("_cmd")}
    assert cli == {"fleetdx.orchestrator.cli.codes_cmd"}


def test_version_loads_no_command_and_no_heavy_library() -> None:
    loaded = _loaded("--version")
    assert not {m for m in loaded if m.endswith("_cmd")}
    assert not loaded & {"sqlalchemy", "ray", "fastapi", "plotly", "kubernetes", "jinja2", "networkx"}


def test_help_lists_every_command_in_table_order() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fleetdx", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    rows = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("│ ") and len(line.split()) > 2]
    listed = [r for r in rows if r in commands.COMMANDS]
    assert listed == list(commands.COMMANDS)


def test_an_unknown_command_is_a_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "fleetdx", "nosuch"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3 and "No such command 'nosuch'" in proc.stderr


def test_the_prologs_path_loads_no_database_library_and_no_help_renderer(tmp_path: Path) -> None:
    """``preflight --json --spool`` (what slurm/prolog.sh should run) writes its spool file without SQLAlchemy,
    and typer's rich help renderer (rich's markdown, syntax and traceback modules) loads only to show help."""
    env = {**os.environ, "FLEETDX_SPOOL_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", _LOADED, "preflight", "--json", "--spool"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    line = next(x for x in proc.stdout.splitlines() if x.startswith("LOADED "))
    loaded = set(json.loads(line.removeprefix("LOADED ")))
    assert "fleetdx.orchestrator.store.spool" in loaded  # the spool file was written by this path
    assert not loaded & {"sqlalchemy", "alembic", "fleetdx.orchestrator.store.records", "typer.rich_utils", "ray"}
    assert "typer.rich_utils" in _loaded("preflight", "--help")


def test_a_postmortem_of_logs_alone_loads_no_database_library_and_no_bundle_reader(tmp_path: Path) -> None:
    """``postmortem --logs LOG --no-save`` with no store at the URL: no history to read, so no SQLAlchemy; no
    bundle given, so neither the bundle reader nor the pre-flight diagnosis (issue 20: the start-up of a large
    postmortem). With a store there, the history is read (tests/test_postmortem_store.py)."""
    log = tmp_path / "job.out"
    log.write_text("[rank3]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a\n")
    db = tmp_path / "none.db"
    loaded = _loaded("postmortem", "--logs", str(log), "--json", "--no-save", "--db", f"sqlite:///{db}")
    assert "fleetdx.orchestrator.postmortem.correlate" in loaded  # the postmortem ran
    assert not loaded & {"sqlalchemy", "fleetdx.probes.bundle", "fleetdx.orchestrator.diagnosis.engine"}
    assert not db.exists()
