"""Issue 20: the postmortem job (``run_postmortem_request``), a job the scheduler has forgotten, the epilog
bundles' findings among the causes, folders given to --logs, paths that do not exist, ``history --job``.

The job's log is tests/fixtures/joblogs_catalog/synthetic_srun-l_rank2-oom-first_ranks0-1-watchdog.log (the
shape tests/test_postmortem_slurm_forgotten.py's real Slurm job prints); the epilog bundles are the real
tests/fixtures/bundles/h100-busy (a foreign process on GPU0) and h100-idle, kept as BUNDLE_DIR/17/HOST/ as
slurm/epilog.sh keeps them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import db_cmd, postmortem_cmd
from fleetdx.orchestrator.judgement import FindingCode as F
from fleetdx.orchestrator.postmortem.job import PostmortemRequest, log_files, run_postmortem_request
from fleetdx.orchestrator.scheduler import job as jobmod
from fleetdx.probes.errors import ConfigError
from tests.cliapp import cli_app

CAT = Path(__file__).parent / "fixtures" / "joblogs_catalog"
SRUN = CAT / "synthetic_srun-l_rank2-oom-first_ranks0-1-watchdog.log"
BUNDLES = Path(__file__).parent / "fixtures" / "bundles"
runner = CliRunner()


def _app() -> typer.Typer:
    return cli_app(postmortem_cmd, db_cmd)


@pytest.fixture
def forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    def gone(job_id: str) -> None:
        raise jobmod.JobNotFoundError(f"Slurm job {job_id} not found (scontrol: Invalid job id specified)")

    monkeypatch.setattr(jobmod, "load_slurm_job", gone)


@pytest.fixture
def bundle_dir(tmp_path: Path) -> Path:
    root = tmp_path / "bundles"
    for host, src in (("sim1", "h100-idle"), ("sim2", "h100-idle"), ("sim3", "h100-busy")):
        shutil.copytree(BUNDLES / src, root / "17" / host)
    return root


@pytest.mark.usefixtures("forgotten")
def test_forgotten_job_is_judged_from_its_logs_and_epilog_bundles(tmp_path: Path, bundle_dir: Path) -> None:
    db = f"sqlite:///{tmp_path / 'pm.db'}"
    args = ["postmortem", "--job", "17", "--logs", str(SRUN), "--bundle-dir", str(bundle_dir), "--db", db, "--json"]
    res = runner.invoke(_app(), args)
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert any(m.startswith("job record unavailable") for m in doc["missing_evidence"])
    first = doc["findings"][0]
    assert (first["code"], first["rank"], first["nodes"][0]) == ("OOM_GPU", 2, "sim3")
    timeout = next(c for c in doc["findings"] if c["code"] == "NCCL_TIMEOUT")
    assert (timeout["rank"], timeout["nodes"][0]) == (2, "sim3")
    foreign = [c for c in doc["findings"] if c["code"] == "GPU_FOREIGN_PROCESS"]
    assert foreign and all(c["nodes"][0] == "sim3" for c in foreign)
    assert doc["job"]["job_id"] == "17"
    # the postmortem is filed under the job, and history --job lists it beside the job's runs
    hist = runner.invoke(_app(), ["history", "--job", "17", "--db", db])
    assert hist.exit_code == 0, hist.output
    assert "no stored runs of job 17" in hist.output and "1 newest postmortems" in hist.output
    assert "OOM_GPU" in hist.output and "CRITICAL" in hist.output


def test_request_runs_without_the_cli(bundle_dir: Path) -> None:
    req = PostmortemRequest(logs=[SRUN], bundles=[bundle_dir / "17" / "sim3"], history=False, save=False)
    report = run_postmortem_request(req, use_store=False)
    assert [c.code for c in report.findings][:1] == [F.OOM_GPU]
    assert any(c.code is F.GPU_FOREIGN_PROCESS and c.host == "sim3" for c in report.findings)
    assert report.exit_code == 2


def test_a_folder_given_to_logs_reads_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(SRUN, folder / "sub" / "slurm-17.out")
    (folder / ".hidden").write_text("nothing\n")
    assert log_files([folder]) == [folder / "sub" / "slurm-17.out"]
    report = run_postmortem_request(PostmortemRequest(logs=[folder]), use_store=False)
    assert report.findings[0].code is F.OOM_GPU and report.findings[0].host == "sim3"


def test_a_path_that_does_not_exist_is_a_usage_error_and_nothing_is_stored(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        run_postmortem_request(PostmortemRequest(logs=[tmp_path / "nope.log"]), use_store=False)
    db = tmp_path / "pm.db"
    res = runner.invoke(_app(), ["postmortem", "--logs", str(tmp_path / "nope.log"), "--db", f"sqlite:///{db}"])
    assert res.exit_code == 3 and len(res.output.strip().splitlines()) == 1 and "nope.log" in res.output
    assert not db.exists()


def test_bad_since_is_exit_3_not_2() -> None:
    res = runner.invoke(_app(), ["postmortem", "--logs", str(SRUN), "--since", "yesterday", "--no-save"])
    assert res.exit_code == 3 and "not ISO 8601" in res.output


@pytest.mark.usefixtures("forgotten")
def test_forgotten_job_without_any_log_is_unknown(tmp_path: Path) -> None:
    report = run_postmortem_request(PostmortemRequest(job_id="17", bundle_dir=tmp_path), use_store=False)
    assert report.exit_code == 3 and report.findings[0].code is F.UNKNOWN
    assert any(m.startswith("job record unavailable") for m in report.missing_evidence)
