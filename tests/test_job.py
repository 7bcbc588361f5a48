"""The job model: Slurm's job descriptions (hand-written fixtures, tests/fixtures/slurm_job/README.md), the
environment inside a Slurm job or a Kubernetes pod, and loading a job through a runner."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetdx.orchestrator.scheduler.job import (
    block_rank_map,
    job_from_env,
    load_slurm_job,
    tasks_per_node,
)
from fleetdx.probes.contracts import RunStatus, SchedulerKind
from fleetdx.probes.errors import ConfigError, ParseError
from fleetdx.probes.parsers.slurm_job import parse_sacct_json, parse_scontrol_job
from fleetdx.probes.runner import RunResult

FIX = Path(__file__).parent / "fixtures" / "slurm_job"


def test_scontrol_running_job() -> None:
    (rec,) = parse_scontrol_job((FIX / "scontrol_show_job_running.txt").read_text())
    assert (rec.job_id, rec.name, rec.user, rec.state) == ("4711", "llama-pretrain", "alice", "RUNNING")
    assert rec.nodelist == "gpu[01-03,07]" and rec.num_nodes == 4 and rec.batch_host == "gpu01"
    assert rec.gpus_per_node == 8  # TresPerNode=gres:gpu:8
    assert rec.command == "/home/alice/train.sh --config llama.yaml"  # a value with spaces
    assert rec.fields["AllocNode:Sid"] == "login1:12345" and rec.fields["TRES"].endswith("gres/gpu=32")
    assert rec.start_time == datetime(2026, 11, 24, 10, 0, 1).timestamp()
    assert (rec.exit_code, rec.signal, rec.partition, rec.account, rec.time_limit) == (0, 0, "gpu", "ml", "1-00:00:00")


def test_scontrol_failed_job_gpus_from_tres() -> None:
    (rec,) = parse_scontrol_job((FIX / "scontrol_show_job_failed.txt").read_text())
    assert (rec.state, rec.exit_code, rec.signal) == ("FAILED", 1, 0)
    assert rec.gpus_per_node == 8  # no TresPerNode: gres/gpu=16 over NumNodes=2
    assert rec.account is None and rec.time_limit == "UNLIMITED"
    assert rec.end_time is not None and rec.start_time is not None
    assert rec.end_time - rec.start_time == 6 * 3600 + 2 * 60 + 11


def test_scontrol_refuses_what_is_not_a_job() -> None:
    with pytest.raises(ParseError, match="a job description"):
        parse_scontrol_job("slurm_load_jobs error: Invalid job id specified\n")
    with pytest.raises(ParseError, match="JobId="):
        parse_scontrol_job("no job here\n")
    with pytest.raises(ParseError, match="ExitCode"):
        parse_scontrol_job("JobId=1 ExitCode=abc")


def test_sacct_2302_shape() -> None:
    (rec,) = parse_sacct_json((FIX / "sacct_2302.json").read_text())
    assert (rec.job_id, rec.state, rec.exit_code, rec.signal) == ("4713", "NODE_FAIL", 0, 9)
    assert (rec.nodelist, rec.gpus_per_node, rec.end_time) == ("gpu[01-02]", 8, 1795021600.0)


def test_sacct_2205_shape() -> None:
    doc = (
        '{"jobs":[{"job_id":7,"nodes":"n1","state":{"current":"TIMEOUT"},"exit_code":{"return_code":0},'
        '"time":{"start":5,"end":9}}]}'
    )
    (rec,) = parse_sacct_json(doc)
    assert (rec.state, rec.start_time, rec.end_time) == ("TIMEOUT", 5.0, 9.0)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_parsers_raise_only_parse_error(text: str) -> None:
    for parse in (parse_scontrol_job, parse_sacct_json):
        try:
            parse(text)
        except ParseError:
            pass
    try:
        parse_scontrol_job("JobId=" + text)
    except ParseError:
        pass


def test_tasks_per_node_and_block_map() -> None:
    assert tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    ranks = block_rank_map(["a", "b"], tasks_per_node("2(x2)"))
    assert [(r.rank, r.host, r.local_rank) for r in ranks] == [(0, "a", 0), (1, "a", 1), (2, "b", 0), (3, "b", 1)]
    with pytest.raises(ConfigError):
        tasks_per_node("2x3")


def test_job_from_slurm_env() -> None:
    env = {
        "SLURM_JOB_ID": "4711",
        "SLURM_JOB_NAME": "train",
        "SLURM_JOB_NODELIST": "gpu[01-02]",
        "SLURM_TASKS_PER_NODE": "8(x2)",
        "SLURM_GPUS_ON_NODE": "8",
        "SLURM_JOB_PARTITION": "gpu",
        "USER": "alice",
    }
    job = job_from_env(env)
    assert job is not None and job.scheduler is SchedulerKind.SLURM
    assert (job.job_id, job.nodes, job.gpus_per_node, job.user) == ("4711", ["gpu01", "gpu02"], 8, "alice")
    assert len(job.ranks) == 16 and job.ranks[9].host == "gpu02" and job.ranks[9].local_rank == 1
    assert job.submit == {"partition": "gpu", "nodes": "2"}
    # cyclic distribution: the map cannot be known from the environment, so none is given
    cyclic = job_from_env({**env, "SLURM_DISTRIBUTION": "cyclic"})
    assert cyclic is not None and cyclic.ranks == []


def test_job_from_kubernetes_env_names_the_node_not_the_pod() -> None:
    job = job_from_env({"FLEETDX_K8S_NODE_NAME": "gke-a3-pool-1", "FLEETDX_K8S_POD_NAME": "preflight-x7k"})
    assert job is not None and job.scheduler is SchedulerKind.KUBERNETES
    assert job.nodes == ["gke-a3-pool-1"] and job.job_id == "preflight-x7k"
    assert job_from_env({"HOME": "/root"}) is None


class ScriptedRunner:
    """A runner that answers each command from a table instead of running it (a stand-in, for the tests)."""

    def __init__(self, answers: dict[str, RunResult]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], timeout_s: float, env: object = None) -> RunResult:
        self.calls.append(list(argv))
        return self.answers[argv[0]]


def test_load_slurm_job_falls_back_to_sacct() -> None:
    gone = RunResult(argv=["scontrol"], status=RunStatus.FAILED, returncode=1,
                     stderr="slurm_load_jobs error: Invalid job id specified\n")
    sacct = RunResult(argv=["sacct"], status=RunStatus.OK, returncode=0, stdout=(FIX / "sacct_2302.json").read_text())
    runner = ScriptedRunner({"scontrol": gone, "sacct": sacct})
    job = load_slurm_job("4713", runner)
    assert (job.state, job.signal, job.nodes) == ("NODE_FAIL", 9, ["gpu01", "gpu02"])
    assert [c[0] for c in runner.calls] == ["scontrol", "sacct"]


def test_load_slurm_job_says_why_it_failed() -> None:
    missing = RunResult(argv=["x"], status=RunStatus.SKIPPED, reason="not found on PATH")
    with pytest.raises(ConfigError, match=r"scontrol: not found on PATH; sacct: not found on PATH"):
        load_slurm_job("1", ScriptedRunner({"scontrol": missing, "sacct": missing}))
    with pytest.raises(ConfigError, match="not a Slurm job id"):
        load_slurm_job("1; rm -rf /", ScriptedRunner({}))


def test_load_slurm_job_from_scontrol_keeps_submit_options() -> None:
    ok = RunResult(argv=["scontrol"], status=RunStatus.OK, returncode=0,
                   stdout=(FIX / "scontrol_show_job_running.txt").read_text())
    job = load_slurm_job("4711", ScriptedRunner({"scontrol": ok}))
    assert job.nodes == ["gpu01", "gpu02", "gpu03", "gpu07"]
    assert job.submit["partition"] == "gpu" and job.submit["nodes"] == "4" and job.submit["gpus-per-node"] == "8"


def test_a_run_keeps_its_job_and_history_filters_by_it(tmp_path: Path) -> None:
    from fleetdx.orchestrator.store import Store
    from tests.store_samples import preflight_run

    job = load_slurm_job("4711", ScriptedRunner({"scontrol": RunResult(
        argv=["scontrol"], status=RunStatus.OK, returncode=0,
        stdout=(FIX / "scontrol_show_job_running.txt").read_text())}))
    with Store.open(f"sqlite:///{tmp_path / 'f.db'}") as store:
        store.save_report(preflight_run("r-job", 100.0).model_copy(update={"job": job}))
        store.save_report(preflight_run("r-nojob", 200.0))
        assert store.get_run("r-job").job == job
        assert [r.run_id for r in store.list_runs(job_id="4711")] == ["r-job"]
        assert [r.run_id for r in store.list_runs()] == ["r-nojob", "r-job"]
        host = preflight_run("x", 0).nodes[0].host
        assert [e.run_id for e in store.node_history(host, job_id="4711")] == ["r-job"]
        assert store.node_history(host, job_id="9999") == []


def test_history_cli_filters_by_job(tmp_path: Path) -> None:
    import json

    import typer
    from typer.testing import CliRunner

    from fleetdx.orchestrator.cli import db_cmd
    from fleetdx.orchestrator.store import Store
    from tests.store_samples import preflight_run

    url = f"sqlite:///{tmp_path / 'f.db'}"
    job = job_from_env({"SLURM_JOB_ID": "4711", "SLURM_JOB_NODELIST": "h100-vm-idle"})
    with Store.open(url) as store:
        store.save_report(preflight_run("r-job", 100.0).model_copy(update={"job": job}))
        store.save_report(preflight_run("r-other", 200.0))
    app = typer.Typer()
    db_cmd.register(app)
    runner = CliRunner()
    runs = runner.invoke(app, ["history", "--job", "4711", "--json", "--db", url])
    assert runs.exit_code == 0 and [r["run_id"] for r in json.loads(runs.output)] == ["r-job"]
    node = runner.invoke(app, ["history", "h100-vm-idle", "--job", "4711", "--json", "--db", url])
    assert [e["run_id"] for e in json.loads(node.output)["entries"]] == ["r-job"]
    none = runner.invoke(app, ["history", "--db", url])
    assert none.exit_code == 3 and "give a HOST" in none.output
