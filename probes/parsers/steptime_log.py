"""Parser for the step times training frameworks print in their logs: per rank (when the log says which) the
steps, their wall time (ms) and the throughput printed with them.

**Formats** (the line each framework prints, and where its code prints it):

* ``megatron``: Megatron-LM's ``training_log`` (NVIDIA/Megatron-LM ``megatron/training/training.py``; the same
  line in Megatron-DeepSpeed and forks): `` [2024-04-06 03:02:12] iteration       71/     100 | consumed
  samples: 9088 | elapsed time per iteration (ms): 5361.6 | throughput per GPU (TFLOP/s/GPU): 243.6 | ...``
  (the stamp is optional). The time is the **mean per iteration over the log interval** (``elapsed_time /
  total_iterations`` since the previous line), so one line stands for ``--log-interval`` iterations and a
  single slow iteration is diluted in it. Megatron prints it with ``print_rank_last``: the line comes from the
  **last rank**; when the log also holds Megatron's argument dump (``world_size ........ 8``) the series is
  attributed to rank ``world_size - 1``, otherwise its rank is unknown. Megatron's timer line that may follow
  (``time (ms) | forward-compute: 193.77 | backward-compute: 73.02 | ... | optimizer: 63.01``) is not read:
  its names and reduction across ranks change with ``--timing-log-level`` and version, so no stage is taken
  from it.
* ``torchtitan``: ``MetricsProcessor.log`` (pytorch/torchtitan ``torchtitan/components/metrics.py``):
  ``[titan] 2026-05-18 16:04:46,338 - root - INFO - step: 14  loss:  3.24405  grad_norm:  0.8319  memory:
  9.46GiB(64.99%)  tps: 7,282  tflops: 0.52  mfu: 0.17%``. It prints **no step time**: ``tps`` is tokens per
  second per device over the interval since the previous line. fleetdx does not turn ``tps`` back into a step
  time (that needs the tokens per step per device, which depend on the batch, sequence length and parallel
  layout the line does not give); when the lines carry time stamps, the step time is the **wall time between
  consecutive step lines divided by the steps between them** -- the same interval torchtitan divides the
  tokens by -- and the first line of a series has none. Without stamps only the throughput is recorded.
  ``validate step:`` lines are not training steps and are skipped.
* ``nemo``: NeMo 2.0 / Megatron-Bridge progress lines (NVIDIA NeMo ``nemo/lightning/pytorch/callbacks/
  progress_printer.py``, timing from ``nemo/utils/exp_manager.py`` ``TimingCallback``): ``Training epoch 0,
  iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | global_batch_size: 1 | global_step: 120 |
  reduced_train_loss: 1.233 | train_step_timing in s: 0.03146``: one step's time (``global_step`` is the
  step number when printed, else the iteration); NeMo 1.x puts the same metrics in the Lightning progress bar
  (``Epoch 0: : 100%|...| 100/100 [10:48<00:00, reduced_train_loss=0.0172, global_step=99.00, ...,
  train_step_timing in s=3.130]``), each redraw (after a carriage return) one step.
* ``tf-slim``: TF-Slim's ``train_step`` (tensorflow ``tensorflow/contrib/slim/python/slim/learning.py``, used by
  the TensorFlow Object Detection API): ``INFO:tensorflow:global step 5: loss = 62.5264 (20.205 sec/step)``.

**Ranks.** Each line is first normalised by :func:`fleetdx.probes.parsers.joblog.normalise_line` (launcher
prefixes, time stamps, ANSI colours, terminal damage). A line's series is its global rank (``[rank3]:``, Open
MPI's ``[1,3]<stdout>:``, Ray's ``rank=3``), else its host and local rank (torchrun's ``[default3]:``), else
its Slurm task id (``srun -l``'s ``3: ``, kept apart: a task id is not a rank), else one series of unknown
rank. A step number not above the last one kept in its series (another rank printing the same lines without a
prefix, a logger with two handlers, a job resumed from a checkpoint) is counted in ``repeated``, not kept.

Memory is bounded: lines are streamed, only lines holding a step marker are normalised, at most
:data:`MAX_SERIES` series, :data:`MAX_STEPS` steps per series and :data:`MAX_TOTAL_STEPS` in all are kept (the
rest counted in ``dropped`` and ``series_dropped``).

Errors: :class:`~fleetdx.probes.errors.ParseError` (format ``"steptime_log"``): binary input (a NUL byte), or
no step line of a known format at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError
from fleetdx.probes.parsers.logline import LogLine, normalise_line, stamp_ts

FMT = "steptime_log"
#: step lines kept per series (Megatron logging every 10 iterations: a million iterations)
MAX_STEPS = 100_000
#: step lines kept over all series of one log (about 1.3 KB each in memory: 260 MB at most)
MAX_TOTAL_STEPS = 200_000
#: series (ranks) kept per log
MAX_SERIES = 4096


class LogFormat(str, Enum):
    """The framework whose step line was read (see the module docstring)."""

    MEGATRON = "megatron"
    TORCHTITAN = "torchtitan"
    NEMO = "nemo"
    TF_SLIM = "tf-slim"


#: how each format's step time was measured, in words (``timing`` of a series)
TIMING = {
    LogFormat.MEGATRON: "megatron: mean per iteration over each log interval",
    LogFormat.TORCHTITAN: "torchtitan: wall time between step lines (log time stamps) per step",
    LogFormat.NEMO: "nemo: train_step_timing per step",
    LogFormat.TF_SLIM: "tf-slim: sec/step per step",
}


class LogStep(Contract):
    """One step line: the step number, its time (ms; ``None`` when the line gives throughput only), the line's
    time stamp (Unix seconds, when dated), the throughput printed (tokens/s per device, TFLOP/s per GPU) and
    the 1-based line number."""

    step: int
    step_ms: float | None = None
    ts: float | None = None
    tokens_per_s: float | None = None
    tflops: float | None = None
    line: int


class StepSeries(Contract):
    """The step lines of one rank (or of one unknown rank). ``rank`` is the global rank when known and
    ``rank_from`` says how it was read; ``local_rank``, ``task`` and ``host`` what the prefixes said."""

    format: LogFormat
    rank: int | None = None
    rank_from: str | None = None
    local_rank: int | None = None
    task: int | None = None
    host: str | None = None
    timing: str
    steps: list[LogStep] = Field(default_factory=list)
    repeated: int = 0
    dropped: int = 0


class StepTimeLog(Contract):
    """The step series of one log, in order of first appearance; ``world_size`` from Megatron's argument dump."""

    source: str
    lines_read: int
    world_size: int | None = None
    series: list[StepSeries]
    series_dropped: int = 0


_NUM = r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?"
_MEGATRON_RE = re.compile(r"\biteration\s+(?P<it>\d+)\s*/\s*(?:\d+|infinity)\s*\|")
_MEGATRON_MS_RE = re.compile(r"\belapsed time per iteration \(ms\):\s*(?P<ms>" + _NUM + ")")
_MEGATRON_TFLOPS_RE = re.compile(r"\bthroughput per GPU \(TFLOP/s/GPU\):\s*(?P<v>" + _NUM + ")")
_WORLD_RE = re.compile(r"^world_size \.{2,} (?P<n>\d+)$")
_TITAN_RE = re.compile(r"(?:^|\s)step:\s*(?P<step>\d+)\s+loss:")
_TITAN_TPS_RE = re.compile(r"\btps:\s*(?P<v>\d[\d,]*(?:\.\d+)?)")
_TITAN_TFLOPS_RE = re.compile(r"\btflops:\s*(?P<v>\d[\d,]*(?:\.\d+)?)")
_NEMO_RE = re.compile(r"\biteration\s+(?P<it>\d+)/\d+\s*\|.*?\btrain_step_timing in s:\s*(?P<s>" + _NUM + ")")
_NEMO_STEP_RE = re.compile(r"\bglobal_step:\s*(?P<step>\d+)(?:\.0+)?\b")
#: NeMo 1.x: the same metrics as ``key=value`` in the Lightning progress bar's postfix
_NEMO_BAR_RE = re.compile(r"\bglobal_step=(?P<step>" + _NUM + r")\b.*?\btrain_step_timing in s=(?P<s>" + _NUM + ")")
_SLIM_RE = re.compile(r"\bglobal step (?P<step>\d+): loss = \S+ \((?P<s>" + _NUM + r") sec/step\)")
_ISO_IN_BODY_RE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?")
#: cheap test before a line is normalised: every format's marker
_MARKERS = ("iteration", "step", "world_size")


def may_hold_steps(line: str) -> bool:
    """Whether ``line`` may be a step line or Megatron's world size (a substring test; for streaming readers)."""
    return any(m in line for m in _MARKERS) or "\x00" in line


def _float(text: str) -> float | None:
    try:
        v = float(text.replace(",", ""))
    except ValueError:
        return None
    return v if v == v and v not in (float("inf"), float("-inf")) and v >= 0 else None


def _stamp(ll: LogLine, body_before: str) -> float | None:
    """Unix seconds of the line: its prefix stamp, else a full ISO stamp in the body before the step marker."""
    if ll.time is not None:
        ts = stamp_ts(ll.time)
        if ts is not None:
            return ts
    m = _ISO_IN_BODY_RE.search(body_before)
    return stamp_ts(m.group(0)) if m else None


class _Found(NamedTuple):
    fmt: LogFormat
    step: int
    ms: float | None
    before: str  #: the body before the step marker (where torchtitan's stamp is)
    tps: float | None = None
    tflops: float | None = None


def _step_of(body: str) -> _Found | None:
    """The step line ``body`` is, if any (a substring test first: most lines of a log are not step lines)."""
    if "train_step_timing in s" in body:
        return _nemo(body)
    if "elapsed time per iteration (ms):" in body:
        return _megatron(body)
    if "tps:" in body:
        return _torchtitan(body)
    if "sec/step)" in body:
        m = _SLIM_RE.search(body)
        if m:
            s = _float(m.group("s"))
            return _Found(
                LogFormat.TF_SLIM, int(m.group("step")), s * 1000.0 if s is not None else None, body[: m.start()]
            )
    return None


def _nemo(body: str) -> _Found | None:
    m = _NEMO_RE.search(body)
    if m:
        s = _float(m.group("s"))
        g = _NEMO_STEP_RE.search(body)
        step = int(g.group("step")) if g else int(m.group("it"))
        return _Found(LogFormat.NEMO, step, s * 1000.0 if s is not None else None, body[: m.start()])
    m = _NEMO_BAR_RE.search(body)
    if m:
        s, gstep = _float(m.group("s")), _float(m.group("step"))
        if gstep is None:
            return None
        return _Found(LogFormat.NEMO, int(gstep), s * 1000.0 if s is not None else None, body[: m.start()])
    return None


def _megatron(body: str) -> _Found | None:
    m = _MEGATRON_RE.search(body)
    if m is None:
        return None
    ms = _MEGATRON_MS_RE.search(body, m.end())
    if ms is None:
        return None
    tf = _MEGATRON_TFLOPS_RE.search(body, m.end())
    return _Found(
        LogFormat.MEGATRON,
        int(m.group("it")),
        _float(ms.group("ms")),
        body[: m.start()],
        tflops=_float(tf.group("v")) if tf else None,
    )


def _torchtitan(body: str) -> _Found | None:
    m = _TITAN_RE.search(body)
    if m is None or body[: m.start() + 1].rstrip().endswith(("validate", "micro_step")):
        return None
    tps = _TITAN_TPS_RE.search(body, m.end())
    if tps is None:
        return None
    tf = _TITAN_TFLOPS_RE.search(body, m.end())
    return _Found(
        LogFormat.TORCHTITAN,
        int(m.group("step")),
        None,
        body[: m.start()],
        tps=_float(tps.group("v")),
        tflops=_float(tf.group("v")) if tf else None,
    )


@dataclass
class _Series:
    """A series being read (mutable; the contracts are frozen)."""

    fmt: LogFormat
    rank: int | None
    local_rank: int | None
    task: int | None
    host: str | None
    steps: list[LogStep] = field(default_factory=list)
    repeated: int = 0
    dropped: int = 0
    last_ts: tuple[int, float] | None = None  #: (step, Unix s) of the last dated line (torchtitan)


class StepLogScanner:
    """Feed lines one at a time (:meth:`feed`), then :meth:`result`. Bounded memory (see the module doc)."""

    def __init__(self, source: str = "<log>") -> None:
        self.source = source
        self.lines = 0
        self.world_size: int | None = None
        self._series: dict[tuple[object, ...], _Series] = {}
        self._kept = 0
        self.series_dropped = 0
        #: the steps kept since the caller last emptied this list, as (rank, host, step): a live reader
        #: (``fleetdx watch``) takes them as they come; ``rank`` as the line's prefix said (``None``: unknown)
        self.new_steps: list[tuple[int | None, str | None, LogStep]] = []

    def feed(self, raw: str) -> None:
        """Read one physical line. Raises ParseError on a NUL byte (binary input)."""
        self.lines += 1
        if "\x00" in raw:
            raise ParseError(FMT, self.lines, "text", "binary data (NUL byte) in input")
        if not may_hold_steps(raw):
            return
        for ll in normalise_line(raw):
            body = ll.body
            if "world_size" in body:
                w = _WORLD_RE.match(body)
                if w:
                    self.world_size = int(w.group("n"))
                continue
            found = _step_of(body)
            if found is not None:
                self._add(ll, found)

    @staticmethod
    def _key(ll: LogLine, fmt: LogFormat) -> tuple[object, ...]:
        if ll.rank is not None:
            return (fmt, "rank", ll.rank)
        if ll.local_rank is not None:
            return (fmt, "local", ll.host, ll.local_rank)
        if ll.task is not None:
            return (fmt, "task", ll.host, ll.task)
        return (fmt, "none", ll.host)

    def _add(self, ll: LogLine, f: _Found) -> None:
        key = self._key(ll, f.fmt)
        s = self._series.get(key)
        if s is None:
            if len(self._series) >= MAX_SERIES:
                self.series_dropped += 1
                return
            s = _Series(f.fmt, ll.rank, ll.local_rank, ll.task, ll.host)
            self._series[key] = s
        if s.steps and f.step <= s.steps[-1].step:
            s.repeated += 1
            return
        if len(s.steps) >= MAX_STEPS or self._kept >= MAX_TOTAL_STEPS:
            s.dropped += 1
            return
        ts = _stamp(ll, f.before)
        ms = f.ms
        if f.fmt is LogFormat.TORCHTITAN and ts is not None:
            if s.last_ts is not None and ts >= s.last_ts[1]:
                ms = 1000.0 * (ts - s.last_ts[1]) / (f.step - s.last_ts[0])
            s.last_ts = (f.step, ts)
        # the values are typed here already: construct without validating (pydantic's validation is 30 us a step)
        step = LogStep.model_construct(
            step=f.step, step_ms=ms, ts=ts, tokens_per_s=f.tps, tflops=f.tflops, line=self.lines
        )
        s.steps.append(step)
        if len(self.new_steps) < MAX_STEPS:
            self.new_steps.append((s.rank, s.host, step))
        self._kept += 1

    def result(self) -> StepTimeLog:
        """The series read. Raises ParseError when no step line was found."""
        if not any(s.steps for s in self._series.values()):
            raise ParseError(
                FMT,
                None,
                "step lines of Megatron-LM (iteration N/M | ... elapsed time per iteration (ms): X), torchtitan "
                "(step: N  loss: ...  tps: ...), NeMo (iteration N/M | ... train_step_timing in s: X) or TF-Slim "
                "(global step N: loss = ... (X sec/step))",
                "no such line",
            )
        out = []
        for s in self._series.values():
            rank, rank_from = s.rank, "the line's rank prefix" if s.rank is not None else None
            unprefixed = s.rank is None and s.task is None and s.local_rank is None
            if s.fmt is LogFormat.MEGATRON and unprefixed and self.world_size is not None:
                rank = self.world_size - 1
                rank_from = f"Megatron prints on the last rank (world_size {self.world_size})"
            out.append(
                StepSeries(
                    format=s.fmt,
                    rank=rank,
                    rank_from=rank_from,
                    local_rank=s.local_rank,
                    task=s.task,
                    host=s.host,
                    timing=TIMING[s.fmt],
                    steps=s.steps,
                    repeated=s.repeated,
                    dropped=s.dropped,
                )
            )
        return StepTimeLog(
            source=self.source,
            lines_read=self.lines,
            world_size=self.world_size,
            series=out,
            series_dropped=self.series_dropped,
        )


def parse_steptime_log(lines: Iterable[str] | str, source: str = "<log>") -> StepTimeLog:
    """The step series of a training log given as text or as an iterable of lines (a file object streams).

    Raises:
        ParseError: binary input (a NUL byte), or no step line of a known format.
    """
    scanner = StepLogScanner(source)
    for raw in lines.splitlines() if isinstance(lines, str) else lines:
        scanner.feed(raw)
    return scanner.result()
