"""The postmortem on failures worded as newer torch, NCCL, Slurm, ROCm, UCX, Open MPI and Ray print them (issue
20's list of kinds of lines that were missed). Synthesised logs in the exact shapes of public reports
(tests/fixtures/joblogs_catalog/README.md); each case names the class, first rank and host a person would."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetdx.orchestrator.judgement import FindingCode as F
from fleetdx.orchestrator.postmortem.run import run_postmortem
from fleetdx.orchestrator.postmortem.sources import LogFiles
from fleetdx.probes.contracts import Verdict

FIX = Path(__file__).parent / "fixtures" / "joblogs_catalog"

#: file stem -> (first cause's code, rank, host, a phrase its message must carry)
CASES = {
    "01_slurm_oom_new": (F.OOM_HOST, None, "gpu-a07", "gpu-a07"),
    "02_dump_signal_only": (F.NCCL_TIMEOUT, None, None, "rank 5"),  # rank 5 timed out: it waited, not the culprit
    "03_watchdog_stuck": (F.NCCL_TIMEOUT, 2, None, "got stuck"),
    "04_no_socket": (F.CONFIG_ERROR, None, "node17", "no usable network interface"),
    "05_mismatch": (F.CONFIG_ERROR, 1, None, "different collectives"),
    "06_hip_oom": (F.OOM_GPU, 4, None, "HIP out of memory"),
    "07_sigbus": (F.PROCESS_CRASH, 3, "mi300-n02", "/dev/shm"),
    "08_ray_ip": (F.OOM_GPU, 2, "10.0.3.17", "out of memory"),
    "09_node_failure": (F.NODE_FAILURE, None, "gpu-c03", "gpu-c03"),  # not gpu-c01, whose slurmstepd printed it
    "10_nccl_internal": (F.NCCL_INTERNAL_ERROR, 9, None, "internal error"),
}


@pytest.mark.parametrize("stem", sorted(CASES))
def test_first_cause_names_class_rank_and_host(stem: str) -> None:
    code, rank, host, phrase = CASES[stem]
    report = run_postmortem([LogFiles([FIX / f"synthetic_shape_{stem}.log"])])
    first = report.findings[0]
    assert (first.code, first.rank, first.host) == (code, rank, host), first.message
    assert phrase in first.message and first.evidence
    assert report.verdict is Verdict.CRITICAL and report.exit_code == 2
    if stem == "09_node_failure":  # the node that printed the cancellation is blamed nowhere
        assert all("gpu-c01" not in f.nodes for f in report.findings)
