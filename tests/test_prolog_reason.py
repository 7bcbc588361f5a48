"""slurm/prolog.sh's drain reason and log lines, run as slurmd would run it but without a cluster (issue 21 item 9):
``fleetdx`` is a STAND-IN that prints a given report and exits with a given verdict, ``scontrol`` a STAND-IN that
records its arguments. The whole path on a real Slurm is tests/test_slurm_prolog.py.

* The reason reads "fleetdx preflight: CODE[ subject] (message); report PATH" (was "fleetdx: GPU_COUNT_MISMATCH
  node"), at most 255 bytes (what Slurm's accounting keeps of a node event's reason), the message cut first.
* prolog.log names a report only when one was written and is not empty.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from tests.slurmcluster import ROOT

HOST = socket.gethostname().split(".", 1)[0]


def _prolog(tmp_path: Path, report: dict[str, object] | None, verdict: int) -> tuple[str, str, Path]:
    """Run the prolog once for job 7; return (the drain reason given to scontrol or "", prolog.log, report)."""
    d, bin_dir, logs = tmp_path / "slurm.d", tmp_path / "bin", tmp_path / "log"
    d.mkdir()
    bin_dir.mkdir()
    shutil.copy2(ROOT / "slurm" / "prolog.sh", d / "prolog.sh")
    fleetdx = bin_dir / "fleetdx"
    body = json.dumps(report) if report is not None else ""
    fleetdx.write_text(
        f"#!{sys.executable}\n# STAND-IN fleetdx: prints a fixed report, exits {verdict}\n"
        f"import sys\nsys.stdout.write({body!r})\nsys.exit({verdict})\n"
    )
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(
        f'#!/bin/bash\n# STAND-IN scontrol: records its arguments\nprintf "%s\\n" "$@" > {tmp_path}/args\n'
    )
    for f in (fleetdx, scontrol):
        f.chmod(0o755)
    (d / "fleetdx-slurm.conf").write_text(
        f"FLEETDX={fleetdx}\nFLEETDX_PATH={bin_dir}:/usr/bin:/bin\nFLEETDX_LOG_DIR={logs}\nFLEETDX_PROLOG_BUDGET_S=60\n"
    )
    env = {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": HOST}  # slurmd gives a prolog no PATH
    subprocess.run(["/bin/bash", str(d / "prolog.sh")], env=env, timeout=120, check=False)
    args = (tmp_path / "args").read_text().splitlines() if (tmp_path / "args").exists() else []
    reason = next((a.removeprefix("Reason=") for a in args if a.startswith("Reason=")), "")
    return reason, (logs / "prolog.log").read_text(), logs / f"prolog-7-{HOST}.json"


def _finding(code: str, subject: str, message: str) -> dict[str, object]:
    return {"severity": "critical", "code": code, "subject": subject, "message": message, "nodes": [HOST]}


def test_the_drain_reason_reads_as_a_sentence_with_the_report(tmp_path: Path) -> None:
    found = _finding("GPU_COUNT_MISMATCH", "node", "7 GPUs visible, 8 expected (--gpus-per-node)")
    reason, log, report = _prolog(tmp_path, {"findings": [found]}, 2)
    assert reason == f"fleetdx preflight: GPU_COUNT_MISMATCH (7 GPUs visible, 8 expected); report {report}"
    assert "CRITICAL in " in log and f"GPU_COUNT_MISMATCH (7 GPUs visible, 8 expected); report {report}" in log


def test_a_long_message_is_cut_to_slurm_s_reason_length(tmp_path: Path) -> None:
    found = _finding("GPU_FOREIGN_PROCESS", "GPU0", "pid 1 (x) holds GPU0 with " + "é" * 400)
    reason, _, report = _prolog(tmp_path, {"findings": [found]}, 2)
    assert len(reason.encode()) <= 255
    assert reason.startswith("fleetdx preflight: GPU_FOREIGN_PROCESS GPU0 (pid 1 (x) holds GPU0 with éé")
    assert reason.endswith(f"...); report {report}")


def test_no_report_is_named_when_none_was_written(tmp_path: Path) -> None:
    reason, log, report = _prolog(tmp_path, None, 2)  # CRITICAL, but the report is empty
    assert reason == "fleetdx preflight: CRITICAL"
    assert "report" not in log and not report.exists()
    assert os.path.isdir(tmp_path / "log")


def test_exit_1_without_a_warning_report_is_no_verdict(tmp_path: Path) -> None:
    """Python exits 1 on an unhandled exception, and Ray's core library ends the process with 1 too: an exit 1
    whose report does not say WARNING is no verdict (fail-open by default: logged so, the job starts)."""
    reason, log, report = _prolog(tmp_path, None, 1)
    assert reason == "" and "no verdict (fleetdx exit 1 without a WARNING report" in log and "fail-open" in log
    assert "WARNING in" not in log and not report.exists()


def test_exit_1_with_its_warning_report_is_a_warning(tmp_path: Path) -> None:
    reason, log, report = _prolog(tmp_path, {"exit_code": 1, "verdict": "WARNING", "findings": []}, 1)
    assert reason == "" and "WARNING in " in log and f"(report {report})" in log and "no verdict" not in log
