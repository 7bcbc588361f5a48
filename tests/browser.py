"""What the headless-Chromium tests share (tests marked ``chromium``): Debian's chromium found or the module
skipped with the reason, the service app served by uvicorn in a thread, and where screenshots are kept."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("FLEETDX_CHROMIUM") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium") or ""
)


def require_chromium() -> Any:
    """Skip the calling module unless Chromium, Playwright and uvicorn are here; Playwright's sync API."""
    if not CHROMIUM or not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium is not installed ({CHROMIUM or 'none on PATH'})", allow_module_level=True)
    pytest.importorskip("uvicorn")
    return pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port in a thread; its base URL (up to 60 s to start)."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@contextmanager
def chromium(sync_api: Any) -> Iterator[Any]:
    """A headless Chromium browser (Playwright driving Debian's chromium: no browser download)."""
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def shots_dir(name: str) -> Path:
    """Where screenshots go: ``$FLEETDX_TEST_ARTIFACTS/<name>`` when set, else a new temporary folder."""
    where = os.environ.get("FLEETDX_TEST_ARTIFACTS")
    if where:
        out = Path(where) / name
        out.mkdir(parents=True, exist_ok=True)
        return out
    return Path(tempfile.mkdtemp(prefix=f"fleetdx-{name}-"))
