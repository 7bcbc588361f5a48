"""slurm/preflight.sbatch's resubmit and its no-verdict path on a real Slurm 22.05 (tests/slurmcluster.py: four
nodes sim1..sim4, two declared GPUs each), without Ray: ``fleetdx`` here is a STAND-IN that judges the
allocation CRITICAL on its last node (it writes that node to ``--exclude-file`` and exits 2; no probe runs), so
what is tested is the script's own part. The real pre-flight through the same script is
tests/test_slurm_preflight.py.

* A job submitted with every option this cluster accepts is resubmitted with the same options: the two jobs'
  ``scontrol show job`` records agree field by field (except what names the job itself, its nodes and times).
  Not recorded by Slurm, so carried by ``FLEETDX_SBATCH_ARGS``: ``--signal``. A running job's
  ``--dependency`` is satisfied (``Dependency=(null)``), nothing to carry. ``--qos`` is accepted but not
  recorded on this cluster (no accounting: ``QOS=(null)`` in both records).
* An array task is resubmitted as a one-task array of its own index.
* fleetdx missing: the job says so in its output with a WARNING line, and trains (fail-open by design); with
  ``FLEETDX_ON_ERROR=closed`` it exits 3 without training.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurmcluster import ROOT, SlurmCluster, slurm_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(900)]

SBATCH = ROOT / "slurm" / "preflight.sbatch"
JOB_S = 300

_STANDIN = """#!/bin/bash
# STAND-IN fleetdx written by tests/test_slurm_resubmit.py: judges the allocation CRITICAL on its last node
# (no probe runs); only `preflight --exclude-file F` is understood
prev=
for a in "$@"; do [[ "$prev" == --exclude-file ]] && out=$a; prev=$a; done
scontrol show hostnames "$SLURM_JOB_NODELIST" | tail -n1 > "$out"
echo '{"stand_in": "critical on the last node"}'
exit 2
"""

#: fields of `scontrol show job` that name the job itself, its placement or its times (they differ by nature)
_OWN = {
    "JobId", "ArrayJobId", "ArrayTaskId", "Priority", "JobState", "Reason", "Restarts", "ExitCode", "RunTime",
    "SubmitTime", "EligibleTime", "AccrueTime", "StartTime", "EndTime", "LastSchedEval", "AllocNode:Sid",
    "NodeList", "BatchHost", "ExcNodeList", "StdOut", "StdErr", "SuspendTime", "SecsPreSuspend", "Dependency",
    "PreemptEligibleTime", "PreemptTime", "ResizeTime",
    "Scheduler",  # which of slurmctld's passes started the job (Main or Backfill), not an option of it
}  # fmt: skip


def _record(c: SlurmCluster, job: str) -> dict[str, str]:
    """``scontrol show job -o JOB`` as a dict; a value runs up to the next `` Key=`` (names and comments may
    hold spaces)."""
    text = c.run("scontrol", "show", "job", "-o", job).stdout.strip()
    keys = list(re.finditer(r"(?:^| )([A-Za-z][A-Za-z/:_]*)=", text))
    ends = [n.start() for n in keys[1:]] + [len(text)]
    return {m.group(1): text[m.end() : end].strip() for m, end in zip(keys, ends, strict=True)}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    w = tmp_path_factory.mktemp("slurm-resubmit")
    standin = w / "bin" / "fleetdx"
    standin.parent.mkdir()
    standin.write_text(_STANDIN)
    standin.chmod(0o755)
    return w


@pytest.fixture(scope="module")
def cluster(work: Path) -> Iterator[SlurmCluster]:
    with slurm_cluster(nodes=4, gpus=2) as c:
        c.run("scontrol", "update", "NodeName=sim[1-4]", "AvailableFeatures=ib", "ActiveFeatures=ib")
        yield c


def _resubmitted(c: SlurmCluster, out: Path, first: str) -> str:
    assert c.wait_job(first, JOB_S) == "FAILED"
    log = out.read_text()
    print(f"--- job {first}:\n{log}")
    m = re.search(r"Submitted batch job (\d+)", log)
    assert m, log
    return m.group(1)


def test_resubmit_keeps_every_option_slurm_records(cluster: SlurmCluster, work: Path) -> None:
    c = cluster
    run = work / "all"
    run.mkdir()
    c.run(
        "scontrol", "create", "reservation", "ReservationName=fdxres", f"Users={getpass.getuser()}",
        "Nodes=ALL", "StartTime=now", "Duration=120", "Flags=IGNORE_JOBS",
    )  # fmt: skip
    try:
        _all_options(c, work, run)
    finally:
        c.run("scontrol", "delete", "ReservationName=fdxres", check=False)


def _all_options(c: SlurmCluster, work: Path, run: Path) -> None:
    before = c.run("sbatch", "--parsable", "--reservation=fdxres", "-o", "/dev/null", "--wrap", "true").stdout.strip()
    c.env.update(FLEETDX=str(work / "bin" / "fleetdx"), FLEETDX_SBATCH_ARGS="--signal=B:USR1@60")
    submit = [
        "sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "--cpus-per-task=2", "--mem-per-cpu=100",
        "--signal=B:USR1@60", "--exclusive", "--gpus=2", "--gpus-per-task=1", f"--dependency=afterany:{before}",
        "--mail-type=END,FAIL", "--mail-user=ops@example.org", "--account=acct1", "--qos=normal",
        "--reservation=fdxres", "--constraint=ib", "--time=10", "--time-min=5", "--nice=5", "--no-requeue",
        "--comment=two words", "--job-name=my train", f"--chdir={run}", "-o", f"{run}/slurm-%j.out",
        str(SBATCH), "true",
    ]  # fmt: skip
    first = c.run(*submit).stdout.strip()
    second = _resubmitted(c, run / f"slurm-{first}.out", first)
    assert c.wait_job(second, JOB_S) == "FAILED"  # the stand-in judges it CRITICAL too; no retry left
    log2 = (run / f"slurm-{second}.out").read_text()
    print(f"--- job {second}:\n{log2}")
    assert "no retry left" in log2
    r1, r2 = _record(c, first), _record(c, second)
    print(f"first: {r1}\nsecond: {r2}")
    assert r1["CPUs/Task"] == "2" and r1["MinMemoryCPU"] == "100M" and r1["OverSubscribe"] == "NO"
    assert r1["TresPerJob"] == "gres:gpu:2" and r1["TresPerTask"] == "gres:gpu:1"
    assert (r1["JobName"], r1["Comment"], r1["Account"], r1["Features"]) == ("my train", "two words", "acct1", "ib")
    assert (r1["Reservation"], r1["MailType"], r1["MailUser"]) == ("fdxres", "END,FAIL", "ops@example.org")
    assert (r1["Nice"], r1["Requeue"], r1["TimeMin"]) == ("5", "0", "00:05:00")
    differ = {k: (r1.get(k), r2.get(k)) for k in sorted((set(r1) | set(r2)) - _OWN) if r1.get(k) != r2.get(k)}
    assert differ == {}
    last = c.run("scontrol", "show", "hostnames", r1["NodeList"]).stdout.split()[-1]
    assert r2["ExcNodeList"] == last and last not in c.run("scontrol", "show", "hostnames", r2["NodeList"]).stdout
    assert r2["StdOut"] == f"{run}/slurm-{second}.out"
    assert "--signal=B:USR1@60" in log2 or "--signal=B:USR1@60" in (run / f"slurm-{first}.out").read_text()


def test_an_array_task_is_resubmitted_as_its_own_index(cluster: SlurmCluster, work: Path) -> None:
    c = cluster
    run = work / "array"
    run.mkdir()
    c.env.update(FLEETDX=str(work / "bin" / "fleetdx"), FLEETDX_SBATCH_ARGS="")
    out = f"{run}/slurm-%A_%a.out"
    array = c.run("sbatch", "--parsable", "-N2", "--array=5", f"--chdir={run}", "-o", out, str(SBATCH), "true").stdout
    array = array.strip()
    task = f"{array}_5"
    second = _resubmitted(c, run / f"slurm-{array}_5.out", task)
    assert c.wait_job(second, JOB_S) == "FAILED"
    r2 = _record(c, second)
    assert (r2["ArrayJobId"], r2["ArrayTaskId"]) == (second, "5")
    assert r2["StdOut"] == f"{run}/slurm-{second}_5.out"


@pytest.mark.parametrize("mode", ["open", "closed"])
def test_fleetdx_missing_warns_in_the_job_output(cluster: SlurmCluster, work: Path, mode: str) -> None:
    c = cluster
    run = work / f"missing-{mode}"
    run.mkdir()
    c.env.update(FLEETDX="/nonexistent/fleetdx", FLEETDX_ON_ERROR=mode)
    try:
        job = c.run(
            "sbatch", "--parsable", "-N1", f"--chdir={run}", "-o", f"{run}/slurm-%j.out", str(SBATCH),
            "echo", "trained",
        ).stdout.strip()  # fmt: skip
        state = c.wait_job(job, JOB_S)
    finally:
        del c.env["FLEETDX_ON_ERROR"]
    log = (run / f"slurm-{job}.out").read_text()
    print(log)
    assert "report:" not in log  # no report was written: none is named
    warning = "fleetdx preflight: WARNING: no verdict on this allocation (FLEETDX=/nonexistent/fleetdx: command "
    warning += "not found)"
    if mode == "open":
        assert (state, c.job_field(job, "ExitCode")) == ("COMPLETED", "0:0")
        assert f"{warning}: training anyway (fail-open by design; FLEETDX_ON_ERROR=closed refuses instead)" in log
        assert "trained" in log.splitlines()
    else:
        assert (state, c.job_field(job, "ExitCode")) == ("FAILED", "3:0")
        assert f"{warning}: not training (FLEETDX_ON_ERROR=closed)" in log
        assert "trained" not in log.splitlines()
