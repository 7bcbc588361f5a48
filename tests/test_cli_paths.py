"""Paths as a new user gives them (issue 21, item 12): ``collect --out a/b/c`` creates the missing parents its
help promises; a bundle path that does not exist says so (not "not a bundle directory"); ``postmortem --logs``
naming a missing file is a usage error (exit 3, one line) that stores nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import parse_cmd, postmortem_cmd, preflight_cmd
from fleetdx.probes.bundle import BundleData, check_target, write_bundle
from fleetdx.probes.errors import BundleError
from tests.cliapp import cli_app

runner = CliRunner()


def test_collect_target_with_missing_parents_is_created(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "c"
    check_target(out)  # before: BundleError "<tmp>/a/b: no such directory"
    data = BundleData(host="n1", files={"lscpu.txt": "x\n"})
    write_bundle(data, out)
    assert (out / "lscpu.txt").read_text() == "x\n" and (out / "meta.json").is_file()


def test_collect_target_under_a_file_or_read_only_dir_is_refused_before_collecting(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("keep\n")
    with pytest.raises(BundleError, match="exists and is not a directory"):
        check_target(tmp_path / "afile" / "b" / "c")
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            with pytest.raises(BundleError, match="not writable"):
                check_target(ro / "b" / "c")
        finally:
            ro.chmod(0o755)


@pytest.mark.parametrize(
    "args",
    [["analyze", "{p}"], ["parse", "bundle", "{p}"]],
)
def test_missing_bundle_path_says_does_not_exist(tmp_path: Path, args: list[str]) -> None:
    missing = str(tmp_path / "nonexistent")
    res = runner.invoke(cli_app(preflight_cmd, parse_cmd), [a.format(p=missing) for a in args])
    assert res.exit_code == 3, res.output
    assert f"{missing}: does not exist" in res.stderr and "not a bundle directory" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output


def test_missing_bundle_file_is_not_a_bundle_directory(tmp_path: Path) -> None:
    f = tmp_path / "file.txt"
    f.write_text("x\n")
    res = runner.invoke(cli_app(preflight_cmd), ["analyze", str(f)])
    assert res.exit_code == 3 and "not a bundle directory" in res.stderr


def test_postmortem_missing_logs_is_exit_3_one_line_and_stores_nothing(tmp_path: Path) -> None:
    """Checked first (issue 21 item 12): already a usage error before this round; kept by this test."""
    db = tmp_path / "pm.db"
    missing = str(tmp_path / "nonexistent")
    res = runner.invoke(cli_app(postmortem_cmd), ["postmortem", "--logs", missing, "--db", f"sqlite:///{db}"])
    assert res.exit_code == 3, res.output
    assert res.stdout == "" and "UNKNOWN" not in res.output
    assert len(res.stderr.strip().splitlines()) == 1 and missing in res.stderr
    assert not db.exists()  # nothing stored: the database was never even opened
