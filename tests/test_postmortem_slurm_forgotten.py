"""Issue 20, "Done when": a postmortem of a job Slurm has already forgotten, on a real Slurm 22.05
(tests/slurmcluster.py: three slurmd on this machine, sim1..sim3, each with its own hostname; no accounting).

The job: ``srun -l`` runs one task per node of a small STAND-IN training program (no GPU, no torch: it prints
the lines a real run prints, in torch's and NCCL's own words). Rank 2 (task 2, on sim3) fails first: a Python
traceback ending in torch's CUDA caching allocator out-of-memory error (the wording of PyTorch 2.3+, naming
another process holding memory on the GPU), exit 1; srun reports ``srun: error: sim3: task 2: Exited with exit
code 1``. Only once both are in the job's output do ranks 0 and 1 print ProcessGroupNCCL's watchdog timeout
lines (the shape of torch 2.4-2.6, as in tests/fixtures/joblogs/01 and 02) and abort, as torch does.

Each node's epilog is slurm/epilog.sh, installed as an administrator would (tests/slurmreplay.py): it keeps a
``fleetdx collect`` bundle of the node under the job id. The node's ``nvidia-smi`` is a STAND-IN REPLAYING real
bundles: sim3 replays the busy H100 (a foreign process on GPU0), the others the idle one.

Then Slurm forgets the job (``MinJobAge=5``; slurmctld purges about once a minute): ``scontrol show job`` says
``Invalid job id specified``. ``fleetdx postmortem --job ID --logs OUTPUT --bundle-dir BUNDLES --json`` must still
read the logs and the epilog bundles of that id, name rank 2 and its host sim3, say the job record is unavailable
in missing_evidence, and exit 2 (CRITICAL). The epilog bundle's finding (the foreign process on sim3) joins the
causes (issue 20, item 5).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.slurmcluster import SlurmCluster, slurm_cluster, wait_for
from tests.slurmreplay import install_node_scripts, write_replay_bin

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(900)]

FAILING_RANK, FAILING_HOST = 2, "sim3"
#: bounds (s): the job run, ended and purged; the bundles after that (the epilogs end before the purge); the postmortem
FORGET_S, EPILOG_S, POSTMORTEM_S = 420, 60, 180

#: the STAND-IN training program (synthesised; the printed lines are real message shapes, see the module doc)
PROGRAM = r'''
"""STAND-IN training program of tests/test_postmortem_slurm_forgotten.py: prints what a real run prints."""
import os, resource, sys, time
from pathlib import Path

rank = int(os.environ["SLURM_PROCID"])
output = Path(sys.argv[1])
print(f"rank {rank}/3 on local GPU {os.environ.get('CUDA_VISIBLE_DEVICES', '')}: step 410 loss 2.3187", flush=True)
if rank == 2:
    sys.stderr.write(
        "Traceback (most recent call last):\n"
        '  File "/home/ml/llm/train.py", line 212, in <module>\n'
        "    main()\n"
        '  File "/home/ml/llm/train.py", line 188, in main\n'
        "    loss = model(**batch).loss\n"
        '  File "/home/ml/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1553, in _call_impl\n'
        "    return forward_call(*args, **kwargs)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 1.06 GiB is free. Process 48213 has 38.50 GiB memory in use. Including non-PyTorch "
        "memory, this process has 39.52 GiB memory in use. Of the allocated memory 36.91 GiB is allocated by "
        "PyTorch, and 1.12 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
        "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
        "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n"
    )
    sys.stderr.flush()
    sys.exit(1)
# the others wait in the all-reduce rank 2 never reaches: until rank 2's error and srun's report of its exit
# are both in the job's output (srun may write its line before the task's own lines arrive), bounded
deadline = time.monotonic() + 180
while time.monotonic() < deadline:
    text = output.read_text(errors="replace")
    if "task 2: Exited with exit code 1" in text and "2: torch.OutOfMemoryError" in text:
        break
    time.sleep(0.5)
stamp = time.strftime("%m%d %H:%M:%S") + ".%06d" % (time.time_ns() // 1000 % 1_000_000)
work = "WorkNCCL(SeqNum=412, OpType=ALLREDUCE, NumelIn=25165824, NumelOut=25165824, Timeout(ms)=600000)"
p = f"[rank{rank}]:[E{stamp} ProcessGroupNCCL.cpp"
sys.stderr.write(
    f"{p}:616] [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for 600031 milliseconds "
    "before timing out.\n"
    f"{p}:1785] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by "
    "watchdog at work: 412, last enqueued NCCL work: 412, last completed NCCL work: 411.\n"
    f"{p}:630] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of "
    "CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n"
    f"{p}:636] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.\n"
    f"{p}:1595] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with "
    f"exception: [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for 600031 milliseconds "
    "before timing out.\n"
    "terminate called after throwing an instance of 'c10::DistBackendError'\n"
)
sys.stderr.flush()
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
os.abort()
'''


@dataclass
class Forgotten:
    job_id: str
    log: Path
    bundles: Path
    states: list[str]
    result: subprocess.CompletedProcess[str]

    def doc(self) -> dict[str, Any]:
        assert self.result.stdout.strip(), f"no JSON on stdout; stderr: {self.result.stderr}\n{self.context()}"
        doc: dict[str, Any] = json.loads(self.result.stdout)
        return doc

    def context(self) -> str:
        return (
            f"job {self.job_id} (states seen {self.states}); exit {self.result.returncode}; "
            f"stderr: {self.result.stderr.strip()}\n--- job output:\n{self.log.read_text()}"
        )


def _wait_forgotten(c: SlurmCluster, job_id: str) -> list[str]:
    """Wait (bounded) until slurmctld has purged ``job_id``; return the job states seen on the way."""
    states: list[str] = []
    errors: list[str] = []

    def forgotten() -> bool:
        try:
            if not c.job_known(job_id):
                return True
            res = c.run("scontrol", "show", "job", "-o", job_id, check=False, timeout=30)
        except (AssertionError, subprocess.TimeoutExpired) as e:  # a busy slurmctld: ask again
            errors.append(str(e).strip())
            return False
        state = next((w.split("=", 1)[1] for w in res.stdout.split() if w.startswith("JobState=")), "")
        if state and (not states or states[-1] != state):
            states.append(state)
        return False

    try:
        wait_for(forgotten, FORGET_S, f"Slurm to forget job {job_id} (MinJobAge=5)", every_s=1.0)
    except AssertionError as e:
        raise AssertionError(f"{e}; states seen {states}; scontrol errors {errors[-3:]}") from None
    return states


@pytest.fixture(scope="module")
def forgotten(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forgotten]:
    work = tmp_path_factory.mktemp("slurm-forgotten")
    work.chmod(0o777)
    scripts = install_node_scripts(work, write_replay_bin(work, [FAILING_HOST]))
    (work / "prog.py").write_text(PROGRAM)
    script = work / "job.sh"
    output = work / "slurm-%j.out"
    script.write_text(f"#!/bin/bash\nsrun -l {sys.executable} {work / 'prog.py'} {work}/slurm-$SLURM_JOB_ID.out\n")
    extra = f"Epilog={scripts / 'epilog.sh'}\nPrologEpilogTimeout=300\n"
    with slurm_cluster(nodes=3, gpus=1, extra_conf=extra, min_job_age_s=5) as c:
        sub = c.run(
            "sbatch", "--parsable", "-N3", "--ntasks-per-node=1", "--gpus-per-node=1", "-o", str(output), str(script)
        )
        job_id = sub.stdout.strip().split(";")[0]
        log = work / f"slurm-{job_id}.out"
        t0 = time.monotonic()
        states = _wait_forgotten(c, job_id)
        print(f"job {job_id} forgotten after {time.monotonic() - t0:.0f} s; states seen {states}")
        # the epilogs ran before the job's record could go (the job is COMPLETING until they end)
        folder = work / "bundles" / job_id
        metas = [folder / n / "meta.json" for n in c.nodes]
        wait_for(lambda: all(m.is_file() for m in metas), EPILOG_S, f"the epilog's bundles of job {job_id}")
        db = f"sqlite:///{work / 'fleetdx.db'}"
        argv = [
            sys.executable,
            "-m",
            "fleetdx",
            "postmortem",
            "--job",
            job_id,
            "--logs",
            str(log),
            "--bundle-dir",
            str(work / "bundles"),
            "--db",
            db,
            "--json",
        ]
        assert not c.job_known(job_id)
        res = subprocess.run(argv, env=c.env, capture_output=True, text=True, timeout=POSTMORTEM_S)
        print(f"--- job output:\n{log.read_text()}\n--- postmortem exit {res.returncode}\n{res.stdout}\n{res.stderr}")
        yield Forgotten(job_id=job_id, log=log, bundles=folder, states=states, result=res)


def test_the_job_ran_as_staged(forgotten: Forgotten) -> None:
    """The precondition, so that a failure below is the postmortem's: rank 2 failed first on sim3, srun said so,
    then ranks 0 and 1 timed out; every node left its epilog bundle; Slurm no longer knows the job."""
    text = forgotten.log.read_text()
    assert f"srun: error: {FAILING_HOST}: task 2: Exited with exit code 1" in text, forgotten.context()
    oom = text.index("2: torch.OutOfMemoryError: CUDA out of memory.")
    timeouts = [text.index(f"{r}: [rank{r}]:[E") for r in (0, 1)]
    assert all(oom < t for t in timeouts), forgotten.context()
    assert sorted(p.name for p in forgotten.bundles.iterdir()) == ["sim1", "sim2", "sim3"]


def test_forgotten_job_names_rank_2_and_its_host(forgotten: Forgotten) -> None:
    """Issue 20's "Done when": rank 2 and its host, from the logs and the epilog bundles; CRITICAL; the missing
    job record said."""
    res = forgotten.result
    assert res.returncode == 2, forgotten.context()
    doc = forgotten.doc()
    assert any("job record unavailable" in m.lower() for m in doc["missing_evidence"]), doc["missing_evidence"]
    where = [(c["code"], c["rank"], (c["nodes"] or [None])[0]) for c in doc["findings"]]
    # the most likely cause is on sim3 (rank 2's OOM, or the foreign process that held its GPU's memory) ...
    assert where and where[0][2] == FAILING_HOST, where
    # ... and the first rank named is rank 2, on sim3, for its CUDA out-of-memory error
    first = next((c for c in doc["findings"] if c["rank"] is not None), None)
    assert first is not None, where
    assert (first["code"], first["rank"], (first["nodes"] or [None])[0]) == ("OOM_GPU", FAILING_RANK, FAILING_HOST)
    assert any("CUDA out of memory" in ev["text"] for ev in first["evidence"]), first
    # the ranks that timed out point at the rank that never reached the collective, and its host
    timeout = next((c for c in doc["findings"] if c["code"] == "NCCL_TIMEOUT"), None)
    if timeout is not None:
        assert (timeout["rank"], (timeout["nodes"] or [None])[0]) == (FAILING_RANK, FAILING_HOST), timeout


def test_epilog_bundle_finding_joins_the_causes(forgotten: Forgotten) -> None:
    """Issue 20, item 5: the epilog bundle's finding (the foreign process on sim3's GPU0, replayed from the real
    busy-H100 bundle) is one of the causes, on sim3."""
    doc = forgotten.doc()
    foreign = [c for c in doc["findings"] if c["code"] == "GPU_FOREIGN_PROCESS"]
    assert foreign, [(c["code"], c["nodes"]) for c in doc["findings"]]
    assert all(c["nodes"][:1] == [FAILING_HOST] for c in foreign), foreign
