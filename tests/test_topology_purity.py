"""topology/ is pure: no I/O, processes, Ray or database; probes/ never imports topology/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_IN_TOPOLOGY = {
    "orchestrator",
    "ray",
    "sqlalchemy",
    "subprocess",
    "os",
    "socket",
    "shutil",
    "pathlib",
    "io",
}
FORBIDDEN_CALLS = {"open", "input", "print", "exec", "eval"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def test_topology_imports_nothing_impure() -> None:
    files = sorted((ROOT / "topology").glob("*.py"))
    assert len(files) >= 8
    for f in files:
        bad = _imports(f) & FORBIDDEN_IN_TOPOLOGY
        assert not bad, f"{f.name} imports {bad}"
        assert not (_calls(f) & FORBIDDEN_CALLS), f"{f.name} calls {_calls(f) & FORBIDDEN_CALLS}"


def test_probes_never_imports_topology_or_orchestrator() -> None:
    for f in sorted((ROOT / "probes").rglob("*.py")):
        assert not (_imports(f) & {"topology", "orchestrator"}), f
