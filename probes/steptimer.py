"""A step timer to put in a training loop: per-step, per-stage times of one rank, one JSONL file per rank.

Importable with the standard library alone (``from fleetdx.steps import StepTimer``); torch is used only when
present and asked for. Usage::

    timer = StepTimer("steps/steps-rank-{rank}.jsonl")    # rank from torch.distributed, else $RANK, else 0
    for batch_idx in range(n):
        with timer.step():
            with timer.stage("data"):
                x, y = next(it)
            with timer.stage("h2d"):
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            with timer.stage("forward"):
                loss = loss_fn(model(x), y)
            with timer.stage("backward"):
                loss.backward()
            with timer.stage("optimizer"):
                opt.step(); opt.zero_grad()
            with timer.stage("checkpoint"):              # or any custom name
                maybe_save()
    timer.close()

Stages (:data:`STAGES`): ``data`` (waiting for the next batch), ``h2d`` (host to device copy), ``forward``,
``backward``, ``grad_sync`` (an explicit gradient all-reduce; under DDP it overlaps ``backward`` and its
exposed part is inside it), ``optimizer``, ``checkpoint`` (checkpointing and logging); any other name is kept
as a custom stage. Time outside every stage is reported by readers as ``other``.

Honest GPU time: CUDA runs asynchronously, so a wall clock around ``forward`` measures the launches, not the
kernels. ``sync`` chooses how stages are timed:

* ``"cuda-events"``: a ``torch.cuda.Event`` pair per stage on the current stream, resolved once at the end of
  the step (one ``Event.synchronize`` per step): the GPU time between the stage's start and end on that stream
  (PyTorch docs, "CUDA semantics: asynchronous execution"). Overlap with the CPU is kept. The step's time
  is the longer of its wall time and the GPU time between events recorded at its start and end, so the
  stages never add up to more than their step;
* ``"synchronize"``: ``torch.cuda.synchronize()`` at every stage boundary and wall clock: exact stage walls,
  but the CPU can no longer run ahead of the GPU (the job runs slower while timed);
* ``"none"``: wall clock only (CPU training, or launches are what you want to see);
* ``"auto"`` (default): ``"cuda-events"`` when torch is importable and CUDA is available, else ``"none"``.

One line per step (schema :data:`SCHEMA`), flushed every ``flush_every`` steps::

    {"schema": "fleetdx.steps/1", "rank": 0, "world_size": 4, "host": "gpu-01", "step": 7,
     "start_unix_s": 1732470000.123, "step_ms": 101.3, "proc_start_unix_s": 1732469940.5, "timing": "wall",
     "stages_ms": {"data": 3.1, ...}}

``close()`` leaves ``steps-rank-N.jsonl.closed`` beside the file (:data:`CLOSED_SUFFIX`; removed when a timer
opens the file again): ``fleetdx watch`` then knows the rank ended, and does not take a finished job for a hang.

``flops_per_step`` (optional; settable later as ``timer.flops_per_step``): this rank's model FLOPs per step,
written as ``"flops"`` in each line, from which ``fleetdx steps`` computes the achieved FLOP/s and MFU (about
6 x parameters x tokens this rank trains on per step for a dense transformer: Kaplan et al. 2020).

``step`` counts from 0 in each process unless ``timer.step(number)`` gives the training step's own number (do,
in a job that resumes from checkpoints); ``proc_start_unix_s`` is when the writing process started.

Overhead: two ``time.perf_counter_ns`` calls per stage and one ``json.dumps`` + buffered write per step
(``bench/steps.py`` measures it; the target is under 1% of a 100 ms step).

**Flight Recorder dumps on request** (``dump_on_request=True``, the default): a daemon thread checks every
``dump_poll_s`` (1 s) for a request file :data:`TRIGGER_NAME` (``.fleetdx-dump-request``) beside the JSONL
file, one ``stat`` per check. ``fleetdx watch`` writes it when it sees a hang. The check runs off the training
thread on purpose: a hung rank's training thread is blocked inside a collective and never reaches the next
step. A request newer than the timer (and than the last one answered) makes the thread call PyTorch's
Flight Recorder dump (``torch._C._distributed_c10d._dump_nccl_trace()``: the pickle ProcessGroupNCCL writes to
``TORCH_FR_DUMP_TEMP_FILE<rank>`` on a watchdog timeout, in CUDA builds; ``_dump_fr_trace()``, torch 2.6+, the
recorder of the other backends such as gloo; the first whose dump holds entries) and write it as
``DUMP_DIR/<prefix><rank>`` (``prefix``: the file name part of ``$TORCH_FR_DUMP_TEMP_FILE`` or
``$TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, else PyTorch's default ``nccl_trace_rank_``), ``DUMP_DIR`` being the
folder the request names, then ``DUMP_DIR/status-rank-<rank>.json`` saying what it did or why it could not:
torch not imported by the job (the thread never imports it), no dump function in this torch, the call failing.
The recorder only keeps entries when the job runs with ``TORCH_FR_BUFFER_SIZE`` (or
``TORCH_NCCL_TRACE_BUFFER_SIZE``) set, e.g. 2000; the status says when it is unset. Under gloo (torch 2.13,
measured) the recorder records gloo collectives too and the same call dumps them; NCCL's own dump on timeout
(``TORCH_NCCL_DUMP_ON_TIMEOUT``) does nothing under gloo. A rank whose process holds the GIL in a hung C call
cannot run the thread and answers nothing: the watcher says so.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

SCHEMA = "fleetdx.steps/1"
#: the standard stages, in the order of a training step
STAGES = ("data", "h2d", "forward", "backward", "grad_sync", "optimizer", "checkpoint")

SyncMode = Literal["auto", "cuda-events", "synchronize", "none"]

#: the dump request ``fleetdx watch`` writes beside the StepTimer files (module doc)
TRIGGER_NAME = ".fleetdx-dump-request"
#: the file ``close()`` creates beside the JSONL (``steps-rank-0.jsonl.closed``): the rank ended its steps (removed
#: when a timer opens the file again)
CLOSED_SUFFIX = ".closed"
#: PyTorch's default Flight Recorder dump prefix (``TORCH_FR_DUMP_TEMP_FILE``: ``/tmp/nccl_trace_rank_``)
DUMP_PREFIX = "nccl_trace_rank_"


def _torch() -> Any | None:
    try:
        import torch
    except ImportError:
        return None
    return torch


def _process_start_unix_s() -> float:
    """When this process started (Unix seconds): ``/proc/self/stat``'s ``starttime`` (clock ticks after boot,
    proc(5)) plus ``/proc/stat``'s ``btime``; where /proc cannot say, the time now. Readers take the start-up of
    a job's attempt (imports, rendezvous, checkpoint load) as the span from here to its first step."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/stat", encoding="ascii") as f:
            btime = next(int(ln.split()[1]) for ln in f if ln.startswith("btime "))
        return round(btime + int(fields[19]) / os.sysconf("SC_CLK_TCK"), 3)
    except (OSError, ValueError, IndexError, StopIteration):
        return round(time.time(), 3)


def _rank_and_world(torch: Any | None) -> tuple[int, int | None]:
    if torch is not None:
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), int(dist.get_world_size())
    rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"
    world = os.environ.get("WORLD_SIZE") or os.environ.get("SLURM_NTASKS")
    return int(rank), int(world) if world else None


class StepTimer:
    """Times the stages of each training step of one rank and appends one JSON line per step.

    Args:
        path: the JSONL file; ``{rank}`` in it is replaced by the rank; a directory gets
            ``steps-rank-{rank}.jsonl`` inside it. Parent folders are created.
        rank, world_size: default from ``torch.distributed`` when initialised, else ``$RANK``/``$WORLD_SIZE``
            (``$SLURM_PROCID``/``$SLURM_NTASKS``), else 0 / unknown.
        host: default ``socket.gethostname()``.
        sync: see the module docstring.
        flush_every: flush the file every this many steps (1: after every step).
        flops_per_step: this rank's model FLOPs per step (module doc), or ``None``.
        dump_on_request: answer ``fleetdx watch``'s Flight Recorder dump requests (module doc) from a daemon
            thread checking every ``dump_poll_s`` seconds.

    Raises:
        ValueError: an unknown ``sync`` mode, or ``"cuda-events"``/``"synchronize"`` without torch CUDA.
        RuntimeError: a stage opened outside a step, or a step inside a step.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "fleetdx-steps",
        *,
        rank: int | None = None,
        world_size: int | None = None,
        host: str | None = None,
        sync: SyncMode = "auto",
        flush_every: int = 1,
        dump_on_request: bool = True,
        dump_poll_s: float = 1.0,
        flops_per_step: float | None = None,
    ) -> None:
        if sync not in ("auto", "cuda-events", "synchronize", "none"):
            raise ValueError(f"sync must be auto, cuda-events, synchronize or none, not {sync!r}")
        torch = _torch() if sync != "none" else None
        cuda = torch is not None and bool(torch.cuda.is_available())
        if sync == "auto":
            sync = "cuda-events" if cuda else "none"
        elif sync != "none" and not cuda:
            raise ValueError(f"sync={sync!r} needs torch with CUDA available")
        self._torch = torch if sync != "none" else None
        self.sync: SyncMode = sync
        if rank is None or world_size is None:
            r, w = _rank_and_world(_torch() if rank is None or world_size is None else None)
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        self.rank = rank
        self.world_size = world_size
        self.host = host or socket.gethostname()
        self.flops_per_step = flops_per_step
        p = Path(str(path).replace("{rank}", str(rank)))
        if p.is_dir() or not p.suffix:
            p = p / f"steps-rank-{rank}.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        self.path = p
        self._file: IO[str] | None = open(p, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self.closed_marker = p.with_name(p.name + CLOSED_SUFFIX)
        self.closed_marker.unlink(missing_ok=True)  # a new attempt appending to the file: it runs again
        self._flush_every = max(1, int(flush_every))
        self._proc_start = _process_start_unix_s()
        self._step = 0
        self._in_step = False
        self._t0 = 0
        self._start_unix = 0.0
        self._walls: dict[str, float] = {}
        self._events: list[tuple[str | None, Any, Any]] = []  # (stage, start, end); None: the step
        self._dumps: _DumpRequests | None = None
        if dump_on_request:
            self._dumps = _DumpRequests(self.path.parent / TRIGGER_NAME, rank, max(0.05, float(dump_poll_s)))
            self._dumps.start()

    @contextmanager
    def step(self, number: int | None = None) -> Iterator[None]:
        """One training step; writes its line when the block ends (also when it raises).

        ``number``: the training step's own number (the optimizer step count, which a job resumed from a checkpoint
        carries on from); without it the timer counts from 0 in each process. Readers such as ``fleetdx goodput``
        need it to tell the work a restart lost (the steps run again after the resume point).
        """
        if self._in_step:
            raise RuntimeError("StepTimer.step() inside a step")
        if number is not None:
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise ValueError(f"step number must be an int >= 0, not {number!r}")
            self._step = number
        self._in_step = True
        self._walls = {}
        self._events = []
        if self.sync == "synchronize":
            self._torch.cuda.synchronize()  # type: ignore[union-attr]
        self._start_unix = time.time()
        self._t0 = time.perf_counter_ns()
        if self.sync == "cuda-events":
            self._step_start = self._torch.cuda.Event(enable_timing=True)  # type: ignore[union-attr]
            self._step_start.record()
        try:
            yield
        finally:
            if self.sync == "synchronize":
                self._torch.cuda.synchronize()  # type: ignore[union-attr]
            step_ms = (time.perf_counter_ns() - self._t0) / 1e6
            if self.sync == "cuda-events":
                end = self._torch.cuda.Event(enable_timing=True)  # type: ignore[union-attr]
                end.record()
                self._events.append((None, self._step_start, end))
            self._in_step = False
            self._write(step_ms)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """One stage of the current step; a name used twice in a step adds up."""
        if not self._in_step:
            raise RuntimeError(f"StepTimer.stage({name!r}) outside a step")
        if self.sync == "cuda-events":
            torch = self._torch
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[union-attr]
            start.record()
            try:
                yield
            finally:
                end.record()
                self._events.append((name, start, end))
            return
        if self.sync == "synchronize":
            self._torch.cuda.synchronize()  # type: ignore[union-attr]
        t = time.perf_counter_ns()
        try:
            yield
        finally:
            if self.sync == "synchronize":
                self._torch.cuda.synchronize()  # type: ignore[union-attr]
            self._walls[name] = self._walls.get(name, 0.0) + (time.perf_counter_ns() - t) / 1e6

    def _write(self, step_ms: float) -> None:
        stages = self._walls
        if self._events:
            self._events[-1][2].synchronize()
            for name, start, end in self._events:
                if name is not None:
                    stages[name] = stages.get(name, 0.0) + float(start.elapsed_time(end))
                else:
                    step_ms = max(step_ms, float(start.elapsed_time(end)))
        line = {
            "schema": SCHEMA,
            "rank": self.rank,
            "world_size": self.world_size,
            "host": self.host,
            "step": self._step,
            "start_unix_s": round(self._start_unix, 6),
            "step_ms": round(step_ms, 4),
            "proc_start_unix_s": self._proc_start,
            "timing": "wall" if self.sync == "none" else self.sync,
            "stages_ms": {k: round(v, 4) for k, v in stages.items()},
        }
        if self.flops_per_step is not None:
            line["flops"] = float(self.flops_per_step)
        self._step += 1
        if self._file is None:
            raise RuntimeError("StepTimer is closed")
        self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
        if self._step % self._flush_every == 0:
            self._file.flush()

    def close(self) -> None:
        """Flush and close the file, stop the dump-request thread (idempotent)."""
        if self._dumps is not None:
            self._dumps.stop.set()
            self._dumps = None
        if self._file is not None:
            self._file.close()
            self._file = None
            try:  # the job's readers (fleetdx watch) tell a rank that ended from one that hangs
                self.closed_marker.touch()
            except OSError:
                pass

    def __enter__(self) -> StepTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _entries(data: bytes) -> int:
    """How many entries a dump's pickle holds (-1: not a readable pickle of a dict). The pickle is the one torch
    made in this process."""
    try:
        obj = pickle.loads(data)  # noqa: S301 - produced in-process by torch's Flight Recorder
    except Exception:  # noqa: BLE001
        return -1
    return len(obj.get("entries") or []) if isinstance(obj, dict) else -1


def _dump() -> tuple[str, bytes, int] | str:
    """This process's Flight Recorder dump: (function, pickle, entries), or why there is none. Never imports
    torch. ``_dump_nccl_trace`` (ProcessGroupNCCL's recorder, in CUDA builds) first, then ``_dump_fr_trace``
    (torch 2.6+: the recorder of the other backends, gloo's): the first that holds entries, else the first."""
    torch = sys.modules.get("torch")
    if torch is None:
        return "torch is not imported by this process: no Flight Recorder to dump"
    c10d = getattr(getattr(torch, "_C", None), "_distributed_c10d", None)
    got: list[tuple[str, bytes, int]] = []
    errors: list[str] = []
    for name in ("_dump_nccl_trace", "_dump_fr_trace"):
        fn = getattr(c10d, name, None)
        if fn is None:
            continue
        try:
            raw = fn()
        except Exception as e:  # noqa: BLE001 - said in the status
            errors.append(f"{name}() failed: {type(e).__name__}: {str(e)[:300]}")
            continue
        data = raw if isinstance(raw, bytes) else str(raw).encode()
        got.append((name, data, _entries(data)))
        if got[-1][2] > 0:
            return got[-1]
    if got:
        return got[0]
    return "; ".join(errors) or f"torch {getattr(torch, '__version__', '?')} has no _dump_nccl_trace / _dump_fr_trace"


class _DumpRequests(threading.Thread):
    """The daemon thread that answers dump requests (module doc)."""

    def __init__(self, trigger: Path, rank: int, poll_s: float) -> None:
        super().__init__(name=f"fleetdx-dump-requests-rank{rank}", daemon=True)
        self.trigger = trigger
        self.rank = rank
        self.poll_s = poll_s
        self.stop = threading.Event()
        self.started_ns = time.time_ns()
        self.answered_ns = 0

    def run(self) -> None:
        while not self.stop.wait(self.poll_s):
            try:
                mtime = os.stat(self.trigger).st_mtime_ns
            except OSError:
                continue
            if mtime <= max(self.started_ns, self.answered_ns):
                continue
            self.answered_ns = mtime
            try:
                self.answer()
            except Exception:  # noqa: BLE001, S112 - never take the training process down
                continue

    def answer(self) -> None:
        try:
            req = json.loads(self.trigger.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            req = {}
        folder = Path(str(req.get("dump_dir") or "fleetdx-fr")) if isinstance(req, dict) else Path("fleetdx-fr")
        if not folder.is_absolute():
            folder = self.trigger.parent / folder
        folder.mkdir(parents=True, exist_ok=True)
        env = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
        prefix = Path(env).name if env and Path(env).name else DUMP_PREFIX
        buffer = os.environ.get("TORCH_FR_BUFFER_SIZE") or os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE")
        status: dict[str, Any] = {
            "rank": self.rank,
            "pid": os.getpid(),
            "request_id": req.get("request_id") if isinstance(req, dict) else None,
            "answered_unix_s": round(time.time(), 3),
            "dumped": False,
            "buffer_size_env": buffer,
        }
        found = _dump()
        if isinstance(found, str):
            status["why"] = found
        else:
            name, data, entries = found
            target = folder / f"{prefix}{self.rank}"
            tmp = folder / f".{prefix}{self.rank}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, target)
            status |= {"dumped": True, "function": name, "file": str(target), "bytes": len(data), "entries": entries}
            if entries <= 0 and (not buffer or buffer.strip() == "0"):
                status["why"] = (
                    "the dump holds no entry and TORCH_FR_BUFFER_SIZE (TORCH_NCCL_TRACE_BUFFER_SIZE) is unset or 0 "
                    "in this process: set it (e.g. 2000) in the job's environment"
                )
        tmp = folder / f".status-rank-{self.rank}.tmp"
        tmp.write_text(json.dumps(status), encoding="utf-8")
        os.replace(tmp, folder / f"status-rank-{self.rank}.json")
