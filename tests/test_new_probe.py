"""Adding a probe takes a parser module, one catalog row and one NodeFacts field, nothing else.

The test copies the package to a temporary directory, adds a real probe there -- ``cat /proc/loadavg``, parsed
into a small model -- by writing exactly those three things, and runs the copy's CLI in subprocesses:
``collect`` runs the new command, ``parse loadavg`` and ``parse bundle`` read it, ``analyze`` and a simulated
``preflight`` (local Ray nodes replaying the collected bundle) list it among the node's probes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PARSER = '''"""Parser for /proc/loadavg (proc(5)): the 1, 5 and 15 minute load averages."""

from __future__ import annotations

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError


class LoadAvg(Contract):
    one: float
    five: float
    fifteen: float


def parse_loadavg(text: str) -> LoadAvg:
    parts = text.split()
    try:
        return LoadAvg(one=float(parts[0]), five=float(parts[1]), fifteen=float(parts[2]))
    except (IndexError, ValueError):
        raise ParseError("loadavg", 1, "three load averages", text[:80]) from None
'''

ROW = (
    '    ProbeSpec("proc_loadavg.txt", ("cat", "/proc/loadavg"), _Q, timeout_s=5, '
    'parser=Parser("loadavg", parse_loadavg), fact="loadavg"),\n'
)


def _add_probe(pkg: Path) -> None:
    """Write the parser, the catalog row (and its import) and the facts field (and its import)."""
    (pkg / "probes" / "parsers" / "loadavg.py").write_text(PARSER)
    catalog = pkg / "probes" / "catalog.py"
    text = catalog.read_text()
    anchor = "    ProbeSpec(UNAME_FILE,"
    assert anchor in text
    text = text.replace(anchor, ROW + anchor, 1)
    text = text.replace(
        "from fleetdx.probes.parsers.lscpu", "from fleetdx.probes.parsers.loadavg import parse_loadavg\n"
        "from fleetdx.probes.parsers.lscpu", 1
    )
    catalog.write_text(text)
    facts = pkg / "probes" / "facts.py"
    text = facts.read_text()
    anchor = "    xids: XidLog | None = None\n"
    assert anchor in text
    text = text.replace(anchor, anchor + "    loadavg: LoadAvg | None = None\n", 1)
    text = text.replace(
        "from fleetdx.probes.parsers.lscpu", "from fleetdx.probes.parsers.loadavg import LoadAvg\n"
        "from fleetdx.probes.parsers.lscpu", 1
    )
    facts.write_text(text)


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("newprobe")
    for name in ("fleetdx", "probes", "topology", "orchestrator"):
        shutil.copytree(ROOT / name, root / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    _add_probe(root)
    return root


def fleetdx(copy: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy), "FLEETDX_DB_URL": f"sqlite:///{copy}/fleetdx.db"}
    return subprocess.run(
        [sys.executable, "-m", "fleetdx", *args], cwd=copy, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def bundle(copy: Path) -> Path:
    out = copy / "bundle"
    res = fleetdx(copy, "collect", "--out", str(out), "--host", "newprobe-node", "--json")
    assert res.returncode == 0, res.stderr
    return out


def test_the_copy_runs_its_own_code(copy: Path) -> None:
    res = fleetdx(copy, "parse", "--help")
    assert res.returncode == 0 and "loadavg" in res.stdout


def test_collect_runs_the_new_command(bundle: Path) -> None:
    meta = json.loads((bundle / "meta.json").read_text())
    (entry,) = [c for c in meta["commands"] if c["file"] == "proc_loadavg.txt"]
    assert entry["status"] == "ok" and entry["argv"] == ["cat", "/proc/loadavg"]
    assert len((bundle / "proc_loadavg.txt").read_text().split()) == 5


def test_parse_kind_and_parse_bundle_read_it(copy: Path, bundle: Path) -> None:
    res = fleetdx(copy, "parse", "loadavg", str(bundle / "proc_loadavg.txt"), "--json")
    assert res.returncode == 0, res.stderr
    assert set(json.loads(res.stdout)) == {"one", "five", "fifteen"}
    res = fleetdx(copy, "parse", "bundle", str(bundle), "--json")
    facts = json.loads(res.stdout)
    assert facts["loadavg"]["fifteen"] >= 0 and facts["sources"]["loadavg"] == "proc_loadavg.txt"


def test_analyze_lists_it_among_the_node_probes(copy: Path, bundle: Path) -> None:
    res = fleetdx(copy, "analyze", str(bundle), "--json")
    report = json.loads(res.stdout)
    (node,) = report["nodes"]
    assert {"name": "proc_loadavg.txt", "status": "ok"}.items() <= next(
        p for p in node["probes"] if p["name"] == "proc_loadavg.txt"
    ).items()


@pytest.mark.slow
@pytest.mark.ray
def test_simulated_preflight_replays_it(copy: Path, bundle: Path) -> None:
    res = fleetdx(copy, "preflight", "--simulate", str(bundle), "--no-save", "--json", timeout=240)
    assert res.returncode in (0, 1, 2, 3), res.stderr
    report = json.loads(res.stdout)
    assert report["simulated"] is True
    (node,) = report["nodes"]
    (probe,) = [p for p in node["probes"] if p["name"] == "proc_loadavg.txt"]
    assert probe["status"] == "ok"  # replayed from the bundle through the catalog row's argv
