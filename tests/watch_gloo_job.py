"""A real 4-rank gloo job for ``fleetdx watch``'s tests (tests/test_watch_gloo.py): CPU processes on this machine,
a gradient all-reduce per step timed by fleetdx's StepTimer, with the Flight Recorder on. Each step is mostly
waiting (a 10 ms data stage, a 20 ms forward with a small matmul, the all-reduce): 4 ranks share this machine's
2 cores with other work, and CPU-bound stages would be paced by the OS scheduler rather than by the fault.

    python tests/watch_gloo_job.py OUT_DIR --fault hang|slow-data [--rank 3] [--at 30] [--steps 400]

* ``hang``: from step ``--at`` on, rank ``--rank`` stops calling its collective (it stays in its data stage, as a
  rank stuck in its loader does); the others wait in the all-reduce until gloo's timeout (``--timeout`` 300 s);
* ``slow-data``: rank ``--rank``'s data stage takes 60 ms more from step ``--at`` on.

Every rank runs with ``TORCH_FR_BUFFER_SIZE=2000`` and its StepTimer answers ``fleetdx watch``'s dump requests.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import sys
import time
from pathlib import Path

WORLD = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, a: argparse.Namespace, port: int) -> None:
    os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    from fleetdx.steps import StepTimer

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=a.timeout),
    )
    timer = StepTimer(Path(a.out) / f"steps-rank-{rank}.jsonl", rank=rank, world_size=WORLD, dump_poll_s=0.2)
    grad = torch.ones(65536)
    x = torch.randn(64, 64)
    for step in range(a.steps):
        with timer.step():
            with timer.stage("data"):
                if rank == a.rank and step >= a.at:
                    if a.fault == "hang":
                        print(f"rank {rank}: stops calling its collective at step {step}", flush=True)
                        time.sleep(a.timeout + 60)
                    else:
                        time.sleep(0.06)
                time.sleep(0.01)
            with timer.stage("forward"):  # mostly a wait, as a GPU rank's host thread waits for its kernels: 4
                x = torch.tanh(x @ x.T / 64)  # ranks on 2 shared cores would otherwise be paced by the OS scheduler
                time.sleep(0.02)
            with timer.stage("backward"):
                dist.all_reduce(grad)
    timer.close()
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--fault", choices=["hang", "slow-data"], default="hang")
    ap.add_argument("--rank", type=int, default=3)
    ap.add_argument("--at", type=int, default=30)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--timeout", type=float, default=300.0)
    a = ap.parse_args()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(a, _free_port()), nprocs=WORLD, join=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
