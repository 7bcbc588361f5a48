"""A node's slim install (issue 22): ``pip install fleetdx`` without extras runs the node-side jobs, and a command
that needs an extra says which one in one line, exit 3. The extras are made unimportable in a real subprocess
(``sys.modules[name] = None``: what an install without them raises), so this machine's full install stands in
for a slim one; named as such."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fleetdx.orchestrator.cli.common import EXTRAS

LOGS = Path(__file__).parent / "fixtures" / "joblogs"

_SLIM = f"""
import sys
for m in {sorted(EXTRAS)!r}:
    sys.modules[m] = None  # as if not installed: import raises ModuleNotFoundError
from fleetdx.orchestrator.cli.main import main
sys.argv = ["fleetdx", *sys.argv[1:]]
main()
"""


def _slim(*argv: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(tmp), "PATH": "/usr/bin:/bin", "FLEETDX_SPOOL_DIR": str(tmp / "spool")}
    return subprocess.run(
        [sys.executable, "-c", _SLIM, *argv], capture_output=True, text=True, timeout=300, env=env, cwd=tmp
    )


def test_local_preflight_and_postmortem_need_no_extra(tmp_path: Path) -> None:
    pf = _slim("preflight", "--json", "--db", f"sqlite:///{tmp_path / 'x.db'}", tmp=tmp_path)
    assert pf.returncode in (0, 1, 2, 3) and json.loads(pf.stdout)["kind"] == "preflight", pf.stderr[-1500:]
    assert "extra" not in pf.stderr
    log = next(LOGS.glob("01_*"))
    pm = _slim("postmortem", "--logs", str(log), "--no-save", "--json", tmp=tmp_path)
    assert pm.returncode == 2 and json.loads(pm.stdout)["findings"][0]["code"] == "NCCL_TIMEOUT", pm.stderr[-1500:]


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["serve"], "server"),
        (["preflight", "--nodes", "a,b", "--no-save"], "ray"),
        (["postmortem", "--logs", str(next(LOGS.glob("01_*"))), "--no-save", "--html", "pm.html"], "html"),
    ],
)
def test_a_command_of_an_extra_names_it(argv: list[str], extra: str, tmp_path: Path) -> None:
    proc = _slim(*argv, tmp=tmp_path)
    assert proc.returncode == 3
    assert f"needs fleetdx's {extra} extra" in proc.stderr and f"pip install 'fleetdx[{extra}]'" in proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


def test_every_extra_named_is_one_pyproject_declares() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    doc = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text(encoding="utf-8"))
    declared = doc["project"]["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(declared)
    base = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in doc["project"]["dependencies"]}
    assert base and not base & {m.replace("_", "-") for m in EXTRAS}  # none of them in the base install
