"""Shared test configuration: fixture paths, the GPU skip, and the code catalog's bookkeeping: every finding a
test makes in this process is checked against its catalog row (a severity the row does not list fails the test
that made it), and a run of the whole suite fails when a catalog row was never emitted by any test (issue 19)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def _has_cuda() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


#: (code, severity) of every finding fleetdx's rules emitted in this test process
EMITTED: set[tuple[str, str]] = set()
#: modules whose findings are not emissions: tests, and the store and placement, which rebuild stored findings
REBUILDERS = ("tests", "fleetdx.orchestrator.store", "fleetdx.orchestrator.placement")


def pytest_configure(config: pytest.Config) -> None:
    from fleetdx.orchestrator.judgement.catalog import spec
    from fleetdx.orchestrator.judgement.findings import Finding

    made = Finding.__init__

    def recording_init(self: Finding, /, **data: object) -> None:
        made(self, **data)
        if sys._getframe(1).f_globals.get("__name__", "").startswith(REBUILDERS):
            return  # made up by a test (random, synthetic) or rebuilt from stored rows: not emitted here
        row = spec(self.code)
        assert self.severity in row.severities, (
            f"{self.code.value} emitted at {self.severity.value}; codes.yaml lists {[s.value for s in row.severities]}"
        )
        EMITTED.add((self.code.value, self.severity.value))

    Finding.__init__ = recording_init  # type: ignore[method-assign]


def _whole_suite(config: pytest.Config) -> bool:
    """True when this run is the README's test command: every test file, no selection by keyword or marker."""
    args = [a for a in config.args if a not in ("tests", "tests/", str(Path(__file__).parent))]
    return not args and not config.getoption("keyword") and not config.getoption("markexpr")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _whole_suite(session.config):
        return
    from fleetdx.orchestrator.judgement.catalog import catalog

    never = [r.code.value for r in catalog().codes if not any(c == r.code.value for c, _ in EMITTED)]
    if never:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        msg = f"code catalog: rows never emitted by any test: {', '.join(never)} (add a test, or drop the row)"
        if tr is not None:
            tr.write_line(msg, red=True)
        if exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if gpu_items and not _has_cuda():
        skip = pytest.mark.skip(reason="no NVIDIA GPU with CUDA on this machine")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True)
def _private_default_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands run by tests without ``--db`` (preflight, postmortem) save into a throwaway SQLite file, never
    into the user's default database; a test that wants another store sets ``FLEETDX_DB_URL`` itself."""
    import os

    if "FLEETDX_DB_URL" not in os.environ:
        monkeypatch.setenv("FLEETDX_DB_URL", f"sqlite:///{tmp_path_factory.mktemp('store')}/fleetdx.db")
