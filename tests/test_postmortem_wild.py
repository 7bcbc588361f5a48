"""The held-out real logs (tests/fixtures/joblogs_wild/: 90 failed-job logs from public threads of many projects,
labelled in LABELS.yaml, measured by bench/postmortem_wild.py) as a regression gate: every file fleetdx reads
right today (class, and the first rank and host where labelled) stays right, and the known misses are listed
here, each with why, so that fixing one means moving it out of KNOWN_MISSES (the test fails when a listed miss
starts being right: the list cannot go stale)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetdx.orchestrator.postmortem.run import run_postmortem
from fleetdx.orchestrator.postmortem.sources import LogFiles

WILD = Path(__file__).parent / "fixtures" / "joblogs_wild"
LABELS: dict[str, dict[str, Any]] = yaml.safe_load((WILD / "LABELS.yaml").read_text())

#: file -> why fleetdx misses it today
KNOWN_MISSES = {
    "45-anomalygpt43-deepspeed-launcher-local-rank1-minus9-wrapped.log": "DeepSpeed's argument list is wrapped over "
    "4 lines: the '--local_rank=1' is lines above the 'exits with return code' line",
    "48-ray47461-raylet-worker-died-sigkill-torchtrainer-worker0.log": "Ray's 'A worker died or was killed' report "
    "(three possible causes, OOM among them) is read as a crash; 'Worker 0 has failed' is not read",
    # added with logs 53-90 (each: what fleetdx says today, and the deciding line)
    "54-jax17399-xla-intercepted-ncclcomminitrank-unhandled-cuda-error.log": "UNKNOWN: XLA's 'NCCL operation "
    "ncclCommInitRank(...) failed: unhandled cuda error' (no torch prefix) is not read",
    "55-jax22747-xla-unhandled-system-error-sockettryaccept-bad-fd.log": "NCCL_NETWORK_ERROR from the last warning "
    "'socketTryAccept: Accept failed'; XLA's 'ncclCommInitRank(...) failed: unhandled system error' is not read",
    "56-lwm42-jax-xlaruntimeerror-internal-error-busid-of-nic-not-found.log": "PROCESS_CRASH (the XlaRuntimeError "
    "as an uncaught exception); its 'failed: internal error ... Attribute busid of node nic not found' is not read",
    "57-tf62757-xla-ncclcomminitrank-invalid-usage-two-replicas.log": "UNKNOWN: TensorFlow/XLA's "
    "'ncclCommInitRank(...) failed: invalid usage' is not read",
    "61-rvc1882-gloo-read-error-connection-reset-by-peer.log": "PROCESS_CRASH (uncaught RuntimeError); gloo's "
    "'pair.cc:589] Read error [IP]:PORT: Connection reset by peer' is not read as a gloo socket error",
    "63-megatron516-ucx-caught-signal-7-bus-error-in-nccl-init-container.log": "PROCESS_CRASH with no host: UCX's "
    "'[09677202c889:5283 :0:5704] Caught signal 7' prefix (a space before ':0:') is not read as host:pid",
    "65-gpud46-dmesg-xid13-sm-warp-exception-then-xid109.log": "GPU_HW_FAULT from XID 109 (ctx switch timeout) "
    "5 s after three XID 13 (SM warp exception, illegal instruction) on the same GPU: the application fault came first",
    "67-ray43751-rayactorerror-node-died-raytrainworker-ip.log": "PROCESS_CRASH with no host: Ray's 'The actor is "
    "dead because its node has died' and the exception's 'ip: 10.72.56.3' field are not read",
    "69-nccl241-mpirun-process-name-rank8-exit-code-3.log": "UNKNOWN: mpirun's 'The first process to do so was: "
    "Process name: [[11192,1],8] Exit code: 3' is not read",
    "70-ucxpy131-ucx-endpoint-timeout-retry-exceeded-mlx5-3-dgx15.log": "NCCL_NETWORK_ERROR with no host: UCX's "
    "'[dgx15:34226:0:34226] ib_mlx5_log.c ... Transport retry count exceeded on mlx5_3:1/IB' host prefix is not read",
    "71-ucx6253-intel-mpi-ucx-fatal-ud-endpoint-timeout.log": "UNKNOWN: 'ud_iface.c:737 UCX Fatal: transport "
    "error: Endpoint timeout' is not read",
    "72-ucx2501-mpirun-tag-output-ud-endpoint-timeout-ranks-383-83.log": "UNKNOWN: 'ud_iface.c:781  Fatal: "
    "transport error: Endpoint timeout' (older UCX, no 'UCX' word) behind mpirun's '[1,383]<stderr>:' is not read",
    "73-pytorch121209-torchrun-root-cause-rank0-azure-host-four-ranks.log": "rank 2, not the 'Root Cause (first "
    "observed failure)' rank 0: the excerpt starts inside the Other Failures block",
    "76-ignite3466-horovod-rank1-stderr-ncclcomminitrank-unhandled-cuda-error.log": "UNKNOWN: 'RuntimeError: "
    "ncclCommInitRank failed: unhandled cuda error' behind Horovod's '[1]<stderr>:' is not read",
    "78-xla7201-ncclcomminitrank-unhandled-cuda-error-last-warning-cuda-oom.log": "UNKNOWN: XLA's 'unhandled cuda "
    "error ... Last NCCL warning(error) log entry ... Cuda failure 2 out of memory' is not read",
    "86-torchtune2676-rank2-gloo-recv-timeout-at-checkpoint-barrier.log": "NCCL_NETWORK_ERROR: gloo's 'Timed out "
    "waiting 1800000ms for recv operation to complete' at a barrier is judged a lost connection, not a timeout",
}


def _same_host(label: str, node: str) -> bool:
    a, b = label.lower(), node.lower()
    return a == b or b.startswith((a + ".", a + "-ib"))


def _right(name: str) -> tuple[bool, str]:
    label = LABELS[name]
    causes = run_postmortem([LogFiles([WILD / name])]).causes
    c = causes[0] if causes else None
    code, rank, nodes = (c.code.value, c.rank, c.nodes) if c else ("UNKNOWN", None, [])
    ok = code == label["class"]
    ok &= label.get("rank") is None or rank == label["rank"]
    ok &= label.get("host") is None or any(_same_host(str(label["host"]), n) for n in nodes)
    return (
        ok,
        f"{code} rank={rank} nodes={nodes} (label {label['class']} rank={label.get('rank')} host={label.get('host')})",
    )


@pytest.mark.parametrize("name", sorted(LABELS))
def test_wild_log(name: str) -> None:
    ok, said = _right(name)
    if name in KNOWN_MISSES:
        assert not ok, f"{name} is now right: take it out of KNOWN_MISSES ({said})"
    else:
        assert ok, said


def test_every_label_has_its_log() -> None:
    assert sorted(LABELS) == sorted(p.name for p in WILD.glob("*.log"))
    assert set(KNOWN_MISSES) <= set(LABELS)
