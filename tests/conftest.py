"""Shared test configuration: fixture paths and the GPU skip."""

from __future__ import annotations

import shutil
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
