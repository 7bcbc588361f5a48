"""``fleetdx watch`` on a job that runs while it watches (issue 24, first done-when), and the file following
under it.

The live job here is **synthetic**: a background thread writes StepTimer records (schema fleetdx.steps/1) for 4
ranks every 0.2 s, as StepTimer would; from step 60 rank 2's data stage takes +40 ms and its peers wait for it
in backward; after step 140 nothing more is written. Timings are generous: the only wall-clock bound asserted
is the issue's (a hang reported within 30 s of the last step), on a loaded 2-core machine.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from fleetdx.orchestrator.watch.follow import Sources, Tail, kind_of
from fleetdx.probes.steptimer import SCHEMA

ROOT = Path(__file__).resolve().parents[1]


class SyntheticJob(threading.Thread):
    """The synthetic live job of the issue (module doc)."""

    def __init__(self, folder: Path, steps: int = 141, onset: int = 60, period_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.folder, self.steps, self.onset, self.period_s = folder, steps, onset, period_s
        self.last_write: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        rng = random.Random(24)
        files = [open(self.folder / f"steps-rank-{r}.jsonl", "a", encoding="utf-8") for r in range(4)]  # noqa: SIM115
        t0 = time.time()
        try:
            for s in range(self.steps):
                if self.stop.is_set():
                    return
                for r, f in enumerate(files):
                    st = {
                        "data": 5 * (1 + rng.gauss(0, 0.05)),
                        "forward": 100 * (1 + rng.gauss(0, 0.03)),
                        "backward": 80 * (1 + rng.gauss(0, 0.03)),
                        "optimizer": 2.0,
                    }
                    if s >= self.onset:
                        st["data" if r == 2 else "backward"] += 40
                    line = {
                        "schema": SCHEMA,
                        "rank": r,
                        "world_size": 4,
                        "host": f"synthetic-node{r}",
                        "step": s,
                        "start_unix_s": round(t0 + s * self.period_s, 6),
                        "step_ms": round(sum(st.values()), 4),
                        "timing": "wall",
                        "stages_ms": {k: round(v, 4) for k, v in st.items()},
                    }
                    f.write(json.dumps(line) + "\n")
                    f.flush()
                self.last_write = time.monotonic()
                time.sleep(self.period_s)
        finally:
            for f in files:
                f.close()


def test_synthetic_live_job_straggler_then_hang(tmp_path: Path) -> None:
    job = SyntheticJob(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    watch = subprocess.Popen(
        [sys.executable, "-m", "fleetdx", "watch", str(tmp_path), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    job.start()
    got: list[tuple[float, dict[str, object]]] = []
    killer = threading.Timer(180, watch.kill)  # a watcher that never reports a hang must not hang the suite
    killer.start()
    try:
        assert watch.stdout is not None
        for line in watch.stdout:
            got.append((time.monotonic(), json.loads(line)))
            if got[-1][1]["code"] == "STEP_HANG":
                break
        watch.send_signal(signal.SIGTERM)  # ends it: the dump collection under way is closed with what came
        rest, err = watch.communicate(timeout=60)
    finally:
        killer.cancel()
        job.stop.set()
    got += [(time.monotonic(), json.loads(x)) for x in rest.splitlines()]
    codes = [f["code"] for _, f in got]
    stragglers = [f for _, f in got if f["code"] == "STEP_STRAGGLER_RANK"]
    assert stragglers, codes
    first = stragglers[0]
    details = first["details"]
    assert isinstance(details, dict)
    assert first["rank"] == 2 and details["stage"] == "data" and details["peers_wait_stage"] == "backward"
    assert 60 <= details["detected_at_step"] <= 70 and details["onset_step"] >= 60
    assert all(f["rank"] == 2 for f in stragglers)  # nothing about a straggler before it, nor about another rank
    hangs = [(t, f) for t, f in got if f["code"] == "STEP_HANG"]
    assert hangs, codes
    assert job.last_write is not None and hangs[0][0] - job.last_write <= 30.0
    hd = hangs[0][1]["details"]
    assert isinstance(hd, dict) and hd["phase"] == "detected" and hd["stopped_first"] == [0, 1, 2, 3]
    # the dump request: no StepTimer answers in a synthetic job, and the watcher says so rather than pretend
    evidence = [f for _, f in hangs[1:]] + [f for _, f in got if f["code"] == "STEP_HANG"][1:]
    assert evidence and evidence[0]["details"]["silent_ranks"] == [0, 1, 2, 3]  # type: ignore[index]
    assert (tmp_path / ".fleetdx-dump-request").is_file()
    assert watch.returncode == 2, err  # Nagios: the worst finding was critical
    assert err == ""  # quiet stderr


# ---- following files


def test_tail_reads_appended_lines_keeps_a_partial_one_and_survives_truncation_and_rotation(tmp_path: Path) -> None:
    p = tmp_path / "job.out"
    p.write_text("a\nb\npart")
    t = Tail(p)
    assert t.poll() == ["a", "b"]
    assert t.poll() == []
    with p.open("a") as f:
        f.write("ial\nc\n")
    assert t.poll() == ["partial", "c"]
    p.write_text("new\n")  # truncated and rewritten (copytruncate)
    assert t.poll() == ["new"] and t.restarts == 1
    p.rename(tmp_path / "job.out.1")  # rotated: a new file under the same name
    p.write_text("rotated 1\nrotated 2\n")
    assert t.poll() == ["rotated 1", "rotated 2"] and t.restarts == 2
    p.unlink()
    assert t.poll() == []  # gone: nothing, no error


def test_a_folder_is_scanned_for_new_files_and_each_kind_is_read_by_its_parser(tmp_path: Path) -> None:
    assert kind_of(tmp_path / "steps-rank-0.jsonl") == "steps"
    assert kind_of(tmp_path / "slurm-12.out") == "log"
    assert kind_of(tmp_path / "dmesg-node1.txt") == "kernel"
    assert kind_of(tmp_path / ".fleetdx-dump-request") is None
    src = Sources([tmp_path])
    assert src.files == {}
    line = {"schema": SCHEMA, "rank": 1, "step": 3, "start_unix_s": 1.0, "step_ms": 10.0, "stages_ms": {"data": 1}}
    (tmp_path / "steps-rank-1.jsonl").write_text(json.dumps(line) + "\nnot json\n")
    (tmp_path / "train.log").write_text(
        "[rank0]: step: 10  loss:  3.2  grad_norm:  0.8  memory: 9.46GiB(64.99%)  tps: 7,282  tflops: 0.52\n"
        "INFO:tensorflow:global step 5: loss = 62.5264 (0.205 sec/step)\n"
        "[rank3]:[E1120 10:15:02.123456 1234 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
        "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
    )
    src.scan()
    steps, log_steps, events = src.poll()
    assert sorted(src.files) == [tmp_path / "steps-rank-1.jsonl", tmp_path / "train.log"]
    assert [(s.rank, s.step, s.step_ms) for s in steps + log_steps] == [(1, 3, 10.0), (None, 5, 205.0)]
    assert src.files[tmp_path / "steps-rank-1.jsonl"].bad_lines == 1
    assert any(e.kind.value == "watchdog-timeout" and e.rank == 3 for e in events)


# ---- the dump request, StepTimer's side (no torch in the process: it says so) and the watcher's


def test_steptimer_answers_a_dump_request_and_says_why_it_has_no_dump(tmp_path: Path) -> None:
    script = f"""
import json, os, sys, time
from pathlib import Path
from fleetdx.probes.steptimer import StepTimer, TRIGGER_NAME
out = Path({str(tmp_path)!r})
(out / TRIGGER_NAME).write_text("{{}}")  # a request older than the timer: never answered
os.utime(out / TRIGGER_NAME, (time.time() - 60, time.time() - 60))
t = StepTimer(out, rank=5, world_size=8, sync="none", dump_poll_s=0.05)
with t.step():
    pass
time.sleep(0.5)
assert not (out / "fleetdx-fr").exists(), "a stale request was answered"
(out / TRIGGER_NAME).write_text(json.dumps({{"request_id": "r1", "dump_dir": str(out / "fr")}}))
deadline = time.time() + 30
while not (out / "fr" / "status-rank-5.json").exists() and time.time() < deadline:
    time.sleep(0.05)
t.close()
print("torch" in sys.modules)
"""
    res = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"  # the thread never imports torch
    status = json.loads((tmp_path / "fr" / "status-rank-5.json").read_text())
    assert status["request_id"] == "r1" and status["dumped"] is False
    assert "torch is not imported" in status["why"]
    assert not list((tmp_path / "fr").glob("nccl_trace_rank_*"))


def test_job_output_lines_become_findings_once_and_a_watch_of_nothing_is_unknown(tmp_path: Path) -> None:
    from fleetdx.orchestrator.watch.run import Watcher, WatchRequest

    out = tmp_path / "job.out"
    out.write_text("")
    emitted: list[str] = []
    now = [0.0]
    w = Watcher(WatchRequest(paths=[out], until_idle_s=5), lambda f: emitted.append(f.code.value), clock=lambda: now[0])
    w.tick()
    line = (
        "[rank3]:[E1120 10:15:02.123456 1234 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
        "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
    )
    with out.open("a") as f:
        f.write(line + line)  # the same event twice: one finding
    now[0] = 1.0
    w.tick()
    assert emitted == ["NCCL_TIMEOUT"]
    assert w.findings[0].rank == 3 and w.findings[0].evidence[0].line == 1
    now[0] = 7.0
    assert w.done()
    assert w.finish().exit_code == 2
    (tmp_path / "empty").mkdir()
    empty = Watcher(WatchRequest(paths=[tmp_path / "empty"], max_s=1), print)
    assert empty.run().exit_code == 3  # nothing read: UNKNOWN, never a clean OK


def test_a_kernel_log_xid_held_for_its_next_line_is_judged_when_the_log_pauses(tmp_path: Path) -> None:
    from fleetdx.orchestrator.watch.run import Watcher, WatchRequest

    src = ROOT / "tests" / "fixtures" / "joblogs" / "05_dmesg-aer-surprise-down-then-xid79_gpu-burn.log"
    log = tmp_path / "dmesg-node7.txt"
    log.write_text(src.read_text())
    w = Watcher(WatchRequest(paths=[tmp_path]), lambda _f: None)
    w.tick()  # the last NVRM lines wait for a next line that may continue the XID message
    w.tick()  # nothing new: the log paused, so they are judged
    xids = [f for f in w.findings if f.evidence and "Xid" in f.evidence[0].text]
    assert [(f.code.value, f.severity.value) for f in xids] == [("GPU_HW_FAULT", "critical")]
    aer = [f.severity.value for f in w.findings if f.evidence and "AER" in f.evidence[0].text]
    assert aer == ["warning", "critical"]  # corrected, then fatal: the worse line of the same key again


def test_a_job_whose_ranks_closed_their_steptimers_ended_and_is_no_hang(tmp_path: Path) -> None:
    from fleetdx.orchestrator.watch.run import Watcher, WatchRequest
    from fleetdx.steps import StepTimer

    for r in range(3):
        with StepTimer(tmp_path, rank=r, world_size=3, sync="none", dump_on_request=False) as t:
            for _ in range(20):
                with t.step(), t.stage("forward"):
                    pass
    assert sorted(p.name for p in tmp_path.glob("*.closed")) == [f"steps-rank-{r}.jsonl.closed" for r in range(3)]
    now = [0.0]
    w = Watcher(WatchRequest(paths=[tmp_path]), lambda _f: None, clock=lambda: now[0])
    w.tick()
    now[0] = 3600.0
    w.tick()
    assert [f.code.value for f in w.findings] == []
    StepTimer(tmp_path, rank=1, world_size=3, sync="none", dump_on_request=False)  # rank 1 runs again, never steps
    assert not (tmp_path / "steps-rank-1.jsonl.closed").exists()
    now[0] = 7200.0
    w.tick()
    assert [f.code.value for f in w.findings] == ["STEP_HANG"]


def test_the_live_table_fits_80_columns_and_bad_options_are_usage_errors() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    fixture = str(ROOT / "tests" / "fixtures" / "traces" / "cpu-gloo-slow-data-rank2")
    res = subprocess.run(
        [sys.executable, "-m", "fleetdx", "watch", fixture, "--until-idle", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert all(len(x.rstrip()) <= 80 for x in lines) and "…" not in res.stdout
    assert lines[1].split() == ["time", "severity", "code", "subject"]
    assert lines[2].split()[1:] == ["warning", "STEP_STRAGGLER_RANK", "rank", "2"]
    message = " ".join(x.strip() for x in lines[3:-1])
    assert "straggler in its data stage" in message and "wait for it in backward" in message
    from typer.testing import CliRunner

    from fleetdx.orchestrator.cli import watch_cmd
    from tests.cliapp import cli_app

    app = cli_app(watch_cmd)
    for bad in (["--until-idle", "5", "--max-s", "5"], ["--interval", "0"], ["--hang-factor", "nan"]):
        r = CliRunner().invoke(app, ["watch", fixture, *bad])
        assert r.exit_code == 3, (bad, r.output)
