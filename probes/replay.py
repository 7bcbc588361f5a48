"""The replay twin of :class:`fleetdx.probes.runner.SubprocessRunner`: answers commands from a bundle's raw
files instead of running them (simulated nodes, tests). Its results say ``replayed``."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from fleetdx.probes.bundle import find_raw_file
from fleetdx.probes.contracts import RunStatus
from fleetdx.probes.rawfile import RawFileError, read_raw
from fleetdx.probes.runner import RunResult


class ReplayRunner:
    """Answers commands from a bundle's raw files instead of running them (simulated nodes, tests).

    A command whose file is absent from the bundle is ``skipped`` with reason ``not in bundle``. Results are
    flagged ``replayed=True`` so reports can say the data was replayed, not measured.
    """

    def __init__(self, bundle_dir: Path) -> None:
        self.bundle_dir = Path(bundle_dir)

    def run(
        self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None
    ) -> RunResult:
        argv = [str(a) for a in argv]
        path = find_raw_file(self.bundle_dir, argv)
        if path is None:
            return RunResult(argv=argv, status=RunStatus.SKIPPED, reason="not in bundle (replay)", replayed=True)
        try:
            text = read_raw(path)
        except RawFileError as e:
            return RunResult(argv=argv, status=RunStatus.FAILED, reason=f"replay: {e}", replayed=True)
        return RunResult(
            argv=argv, status=RunStatus.OK, returncode=0, stdout=text, replayed=True, started_at=time.time()
        )
