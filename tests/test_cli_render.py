"""Human output prints tool text as text: brackets in a finding ("[receive]", Open MPI's "[host:pid]") were
taken for rich markup and vanished from the table."""

from __future__ import annotations

import pytest

from fleetdx.orchestrator.cli import preflight_cmd
from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import RunKind, assemble_report
from fleetdx.probes.contracts import Severity


def test_brackets_in_messages_are_printed(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight_cmd.console, "width", 400)  # one line per row: the test reads text, not wrapping
    message = "[gpu01:4242] mpirun noticed ... via NET/IB/0/GDRDMA [receive] [bold]not markup[/bold]"
    finding = Finding(
        code=FindingCode.NCCL_TEST_FAILED,
        severity=Severity.CRITICAL,
        nodes=["gpu01"],
        subject="[all_reduce]",
        message=message,
    )
    report = assemble_report(RunKind.ANALYZE, ["gpu01"], [finding], started_at=0.0, unjudged={"gpu01": "[x] y"})
    preflight_cmd._print_report(report, None)
    out = " ".join(capsys.readouterr().out.split())
    for text in ("[gpu01:4242]", "[receive]", "[bold]not", "[all_reduce]", "cannot be judged: [x] y"):
        assert text in out, text


@pytest.mark.parametrize("command", [["preflight"], ["history"], ["k8s", "mark"], ["analyze"]])
def test_help_shows_no_type_for_flags(command: list[str]) -> None:
    """typer 0.2x prints ``<bool>`` in the type column of on/off flags; the root group removes it."""
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "fleetdx", *command, "--help"], capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "TERMINAL_WIDTH": "200"},
    )
    assert res.returncode == 0 and "--json" in res.stdout
    assert "<bool>" not in res.stdout
