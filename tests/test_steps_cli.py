"""``fleetdx steps`` end to end (the installed command, in a subprocess): the JSON shape of issue 13, exit
codes, a clear message without traceback for inputs that cannot be decomposed, the baseline comparison, and the
store history of a straggler's host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fleetdx.orchestrator.report import RunKind, assemble_report
from fleetdx.orchestrator.store.store import Store
from fleetdx.probes.contracts import Finding, FindingCode, Severity

FIX = Path(__file__).parent / "fixtures" / "traces"
FLEETDX = str(Path(sys.executable).parent / "fleetdx")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FLEETDX, "steps", *args], capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )


def test_json_shape_and_straggler_exit_code() -> None:
    r = _run(str(FIX / "cpu-gloo-slow-data-rank2"), "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) == {"ranks", "findings", "job"} and doc["job"] is None
    assert [x["rank"] for x in doc["ranks"]] == [0, 1, 2, 3]
    assert set(doc["ranks"][0]) == {
        "rank",
        "host",
        "steps",
        "step_time_ms",
        "stages_ms",
        "temporal_breakdown_pct",
        "comm_exposed_pct",
    }
    (f,) = doc["findings"]
    assert (f["code"], f["subject"], f["nodes"], f["evidence"]["stage"]) == (
        "STEP_STRAGGLER_RANK",
        "rank 2",
        ["vm"],
        "data",
    )
    assert r.stderr == ""


def test_clean_run_exits_0_and_gpu_trace_reports_hta_shares() -> None:
    r = _run(str(FIX / "cpu-gloo-clean"), "--json", "--job", "4242")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["findings"] == [] and doc["job"] == {"id": "4242"}
    g = _run(str(FIX / "hta-sampled-128rank"), "--json")
    tb = json.loads(g.stdout)["ranks"][1]["temporal_breakdown_pct"]
    assert tb == {"idle": 54.72, "compute": 22.57, "non_compute": 22.72}  # HTA's figures for rank 1


def test_undecomposable_input_is_a_clear_unknown(tmp_path: Path) -> None:
    bad = tmp_path / "rank-0.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}')
    r = _run(str(bad))
    assert r.returncode == 3
    assert "no ProfilerStep#N span" in r.stderr and "Traceback" not in r.stderr + r.stdout
    junk = tmp_path / "rank-1.json.gz"
    junk.write_bytes(b"\x1f\x8b\x08\x00not gzip at all")
    r = _run(str(junk))
    assert r.returncode == 3 and "kineto" in r.stderr and "Traceback" not in r.stderr
    r = _run(str(tmp_path / "missing"))
    assert r.returncode == 3 and "no such file or folder" in r.stderr


def test_one_bad_rank_among_good_ones_is_named_and_the_rest_reported(tmp_path: Path) -> None:
    for p in sorted((FIX / "cpu-gloo-clean").glob("rank-*.json.gz"))[:3]:
        (tmp_path / p.name).write_bytes(p.read_bytes())
    (tmp_path / "rank-3.json.gz").write_bytes(b"{not json")
    r = _run(str(tmp_path), "--json")
    assert r.returncode == 3
    assert [x["rank"] for x in json.loads(r.stdout)["ranks"]] == [0, 1, 2]
    assert "rank-3.json.gz" in r.stderr and "Traceback" not in r.stderr


def test_baseline_reports_stage_changes_with_noise() -> None:
    r = _run(str(FIX / "cpu-gloo-slow-data-rank2"), "--baseline", str(FIX / "cpu-gloo-clean"), "--json")
    doc = json.loads(r.stdout)
    b = doc["baseline"]
    data = next(c for c in b["stages"] if c["stage"] == "data")
    # the slow rank's 60 ms sleep moves the job's median data stage little (3 of 4 ranks are fast) ...
    assert data["baseline_ms"] < 1
    assert set(b["step"]) == {
        "stage",
        "baseline_ms",
        "current_ms",
        "change_ms",
        "change_pct",
        "noise_ms",
        "significant",
    }
    assert b["goodput_change_pct"] is not None
    human = _run(str(FIX / "cpu-gloo-slow-data-rank2"), "--baseline", str(FIX / "cpu-gloo-clean"))
    assert "against the baseline" in human.stdout and "goodput" in human.stdout


def test_history_ties_the_straggler_to_its_host_findings(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleetdx.db'}"
    with Store.open(url) as store:
        throttled = Finding(
            code=FindingCode.GPU_CLOCKS_THROTTLED,
            severity=Severity.WARNING,
            nodes=["vm"],
            subject="GPU0",
            message="GPU0 clocks throttled: HW slowdown",
        )
        store.save_report(assemble_report(RunKind.PREFLIGHT, ["vm"], [throttled], started_at=1.0e9))
    r = _run(str(FIX / "cpu-gloo-slow-data-rank2"), "--json", "--history", "--db", url)
    (f,) = json.loads(r.stdout)["findings"]
    assert f["evidence"]["host_findings"] == ["GPU_CLOCKS_THROTTLED: GPU0 clocks throttled: HW slowdown"]


def test_help_teaches() -> None:
    r = subprocess.run(
        [FLEETDX, "steps", "--help"], capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"}
    )
    assert r.returncode == 0 and "--baseline" in r.stdout and "prof.step()" in r.stdout and "Exit" in r.stdout
