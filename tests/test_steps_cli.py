"""``fleetdx steps`` end to end (the installed command, in a subprocess): the JSON shape of issue 13, exit
codes, a clear message without traceback for inputs that cannot be decomposed, the baseline comparison, and the
store history of a straggler's host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from fleetdx.orchestrator.judgement import Finding, FindingCode
from fleetdx.orchestrator.report import RunKind, assemble_report
from fleetdx.orchestrator.store.store import Store
from fleetdx.probes.contracts import Severity

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
    envelope = {"schema_version", "kind", "verdict", "exit_code", "job", "findings", "missing_evidence"}
    assert set(doc) == envelope | {"ranks", "baseline", "mfu"} and doc["job"] is None and doc["baseline"] is None
    assert doc["verdict"] == "WARNING" and doc["exit_code"] == 1
    assert [x["rank"] for x in doc["ranks"]] == [0, 1, 2, 3]
    assert set(doc["ranks"][0]) == {
        "rank",
        "host",
        "steps",
        "step_time_ms",
        "stages_ms",
        "temporal_breakdown_pct",
        "comm_exposed_pct",
        "mfu",
        "kernel_classes",
    }
    (f,) = doc["findings"]
    assert (f["code"], f["subject"], f["nodes"], f["details"]["stage"]) == (
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
    assert doc["findings"] == [] and doc["job"]["job_id"] == "4242"
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
    # ... but not rank 2's own: the per-rank comparison names it (issue 21, item 15)
    top = b["rank_changes"][0]
    assert (top["rank"], top["stage"]) == (2, "data") and top["current_ms"] > 50 and top["significant"]
    human = _run(str(FIX / "cpu-gloo-slow-data-rank2"), "--baseline", str(FIX / "cpu-gloo-clean"))
    assert "against the baseline" in human.stdout and "goodput" in human.stdout
    assert "job medians hide changes on single ranks (rank 2 data)" in " ".join(human.stdout.split())
    assert "changed on single ranks" in human.stdout


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
    assert f["details"]["host_findings"] == ["GPU_CLOCKS_THROTTLED: GPU0 clocks throttled: HW slowdown"]


def test_help_teaches() -> None:
    r = subprocess.run(
        [FLEETDX, "steps", "--help"], capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"}
    )
    assert r.returncode == 0 and "--baseline" in r.stdout and "prof.step()" in r.stdout and "Exit" in r.stdout


# ------------------------------------------------------------------ step times printed in training logs

STEPLOGS = Path(__file__).parent / "fixtures" / "steplogs"


def _titan_lines(rank: int, step_s: list[float]) -> list[str]:
    """Synthesised torchtitan step lines of one rank (the format of tests/fixtures/steplogs/torchtitan-*), one
    per step, stamped ``step_s`` apart."""
    t = datetime(2026, 5, 18, 16, 0, 0, tzinfo=timezone.utc).timestamp()
    out = []
    for i, dt in enumerate([0.0, *step_s]):
        t += dt
        stamp = datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        out.append(f"[rank{rank}]:[titan] {stamp} - root - INFO - step: {i + 1:2}  loss:  3.1  tps: 7,300")
    return out


def test_a_real_megatron_log_gives_step_times_with_stages_unknown() -> None:
    r = _run(str(STEPLOGS / "megatron_epfllm-megatron-llm-11.log"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {"ranks", "findings", "job", "verdict"} <= set(doc) and doc["findings"] == [] and doc["verdict"] == "OK"
    (rank,) = doc["ranks"]
    # iterations 122-125: 86545.2, 87871.6, 89474.8, 89075.2 ms; the median of four is the mean of the middle two
    assert rank["rank"] == -1 and rank["steps"] == 4 and rank["step_time_ms"]["median"] == 88473.4
    assert rank["stages_ms"] == {"unknown": 88473.4}
    assert rank["temporal_breakdown_pct"] is None and rank["comm_exposed_pct"] is None
    human = _run(str(STEPLOGS / "megatron_epfllm-megatron-llm-11.log"))
    assert "stages unknown" in human.stdout and "rank unknown" in human.stdout and human.returncode == 0


def test_a_log_without_step_lines_is_a_clear_unknown() -> None:
    r = _run(str(STEPLOGS / "deepspeed-throughput-only_deepspeed-1825.log"))
    assert r.returncode == 3 and r.stdout == ""
    assert "nothing could be decomposed" in r.stderr and "step lines of Megatron-LM" in r.stderr
    assert "Traceback" not in r.stderr


def test_synthesised_interleaved_log_names_the_slow_rank_at_step_level(tmp_path: Path) -> None:
    lines = []
    for r in range(4):
        lines += _titan_lines(r, [1.6 if r == 2 else 1.0 + 0.01 * (i % 3) for i in range(12)])
    log = tmp_path / "train-synthesised.log"
    log.write_text("\n".join(lines) + "\n")
    r = _run(str(log), "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 1, 2, 3]
    assert [x["step_time_ms"]["median"] for x in doc["ranks"]] == [1010.0, 1010.0, 1600.0, 1010.0]
    (f,) = doc["findings"]
    assert (f["code"], f["subject"], f["details"]["stage"]) == ("STEP_STRAGGLER_RANK", "rank 2", "unknown")
    assert not any("grad_sync" in k for k in f["details"]) and "no stages" in f["message"]


def test_synthesised_spiky_log_is_bursty_and_per_rank_files_take_their_rank_from_the_name(tmp_path: Path) -> None:
    for rank in (0, 1):
        steps = [0.1] * 20 + [0.4] * 3 if rank == 1 else [0.1] * 23
        body = [ln.split(":", 1)[1] for ln in _titan_lines(rank, steps)]  # no rank prefix: the name tells
        (tmp_path / f"rank-{rank}.log").write_text("\n".join(body) + "\n")
    r = _run(str(tmp_path), "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert [(x["rank"], x["steps"]) for x in doc["ranks"]] == [(0, 23), (1, 23)]
    (f,) = doc["findings"]
    assert (f["code"], f["subject"]) == ("STEP_BURSTY", "rank 1")
