"""NCCL's RAS status report (tests/fixtures/nccl_ras: the samples of NCCL's own RAS documentation and a real
healthy report of a 256-GPU job): the job summary, the communicator groups, the error and warning entries and the
unresponsive processes a hang's evidence names."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.nccl_ras import parse_nccl_ras, unresponsive

FIX = Path(__file__).parent / "fixtures" / "nccl_ras"


def test_a_real_healthy_report() -> None:
    rep = parse_nccl_ras((FIX / "nccl1730_healthy.txt").read_text())
    assert rep.nccl_version == "2.26.2" and (rep.nodes, rep.processes, rep.gpus) == (32, 256, 256)
    (g,) = rep.groups
    assert (g.ranks_per_comm, g.status, g.errors) == (256, "RUNNING", "OK")
    assert rep.healthy and rep.problems == [] and unresponsive(rep) == []


def test_a_stopped_process_is_named_with_its_rank_and_the_timeouts_are_warnings() -> None:
    rep = parse_nccl_ras((FIX / "ras_rst_incomplete.txt").read_text())
    assert not rep.healthy and rep.groups[0].errors == "INCOMPLETE" and rep.groups[0].ranks_per_node == "7-8"
    kinds = [(p.severity, p.kind, p.comm) for p in rep.problems]
    assert kinds == [("error", "INCOMPLETE", None), ("error", "INCOMPLETE", "0-0"), ("warning", "TIMEOUT", None)]
    assert rep.problems[1].comm_hash == "cf264af53edbe986" and rep.problems[1].missing_ranks == [21]
    procs = unresponsive(rep)
    assert [(p.pid, p.host, p.gpu) for p in procs if p.pid] == [(3487984, "172.16.64.213", "5")]
    assert [p.rank for p in procs if p.pid is None] == [21]  # the rank, its process not said beside it


def test_a_dead_process_and_the_json_form() -> None:
    dead = parse_nccl_ras((FIX / "ras_rst_dead.txt").read_text())
    assert [p.kind for p in dead.problems] == ["DEAD", "INCOMPLETE"]
    assert dead.problems[0].lines[0].startswith("1 job process is considered dead")
    js = parse_nccl_ras((FIX / "ras_rst_json_missing_rank.json").read_text())
    assert js.format == "json" and js.nccl_version == "2.29.1"
    (p,) = unresponsive(js)
    assert (p.rank, p.host, p.pid, p.gpu) == (1, "172.16.64.245", 1524345, "1")


def test_a_mismatch_is_a_warning_naming_the_ranks_behind() -> None:
    rep = parse_nccl_ras((FIX / "ras_rst_mismatch_warning.txt").read_text())
    (w,) = rep.problems
    assert (w.severity, w.kind, w.comm) == ("warning", "MISMATCH", "0-0")
    assert [p.rank for p in w.processes] == [0, 2, 3, 4, 5, 7] and w.processes[0].host == "172.16.64.210"
    assert rep.healthy and unresponsive(rep) == []  # warnings name no unresponsive process


def test_not_a_report() -> None:
    with pytest.raises(ParseError):
        parse_nccl_ras("ERROR: Unknown command STATS\n")
    with pytest.raises(ParseError):
        parse_nccl_ras('{"nccl_version": "2.28.7"}')


def test_a_hostile_line_is_linear() -> None:
    import time

    text = "Errors\n======\n\nDEAD\n  Rank 1 has " + "x" * 1_000_000 + " -- GPU 0 managed\n"
    t = time.process_time()
    parse_nccl_ras(text)
    assert time.process_time() - t < 2.0


class _ReplayRas:
    """A runner REPLAYING a RAS report of NCCL's documentation for ``ncclras`` (no job runs here); it keeps the
    argv it was asked to run."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.argv: list[str] = []

    def run(self, argv, timeout_s, env=None):  # type: ignore[no-untyped-def]
        from fleetdx.probes.contracts import RunStatus
        from fleetdx.probes.runner import RunResult

        self.argv = list(argv)
        return RunResult(argv=list(argv), status=RunStatus.OK, returncode=0, stdout=self.text, replayed=True)


def _hung_watch(tmp_path: Path, runner: object, **req: object) -> tuple[list[str], list[object]]:
    """A 2-rank job that steps 20 times then stops, watched past its hang threshold; the notes and findings."""
    from fleetdx.orchestrator.watch.run import Watcher, WatchRequest
    from fleetdx.steps import StepTimer

    timers = [StepTimer(tmp_path, rank=r, world_size=2, sync="none", dump_on_request=False) for r in range(2)]
    for n in range(20):
        for t in timers:
            with t.step(n), t.stage("forward"):
                pass
    for t in timers:  # flushed, not closed: the job is still running
        t._file.flush()  # type: ignore[union-attr]
    notes: list[str] = []
    now = [0.0]
    w = Watcher(
        WatchRequest(paths=[tmp_path], dump=False, **req),  # type: ignore[arg-type]
        lambda _f: None,
        lambda _k, m: notes.append(m),
        clock=lambda: now[0],
        runner=runner,  # type: ignore[arg-type]
    )
    w.tick()
    now[0] = 600.0
    w.tick()
    return notes, list(w.findings)


def test_a_hang_queries_nccl_ras_and_names_the_dead_process(tmp_path: Path) -> None:
    runner = _ReplayRas((FIX / "ras_rst_dead.txt").read_text())
    notes, findings = _hung_watch(tmp_path, runner, ras_host="node-07")
    assert runner.argv == ["ncclras", "-t", "10", "-h", "node-07"]
    ras = [f for f in findings if f.details.get("phase") == "ras"]  # type: ignore[attr-defined]
    assert len(ras) == 1 and ras[0].code.value == "STEP_HANG"  # type: ignore[attr-defined]
    assert "pid 3487984 on 172.16.64.213, GPU 5" in ras[0].message and ras[0].nodes == ["172.16.64.213"]  # type: ignore[attr-defined]
    assert "missing ranks [21]" in ras[0].message  # type: ignore[attr-defined]
    assert any(n == "NCCL RAS: 1 unresponsive process(es), missing ranks [21]" for n in notes), notes


def test_without_ncclras_the_hang_says_why_ras_was_not_queried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetdx.probes.runner import SubprocessRunner

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    notes, findings = _hung_watch(tmp_path, SubprocessRunner())
    assert [f.code.value for f in findings] == ["STEP_HANG"]  # type: ignore[attr-defined]
    assert any(n.startswith("NCCL RAS not queried: ncclras -t 10") for n in notes), notes
    notes, _ = _hung_watch(tmp_path / "b", _ReplayRas(""), ras=False)
    assert not any("RAS" in n for n in notes)
