"""Parser for the JSONL files written by :class:`fleetdx.probes.steptimer.StepTimer` (schema
``fleetdx.steps/1``), one file per rank.

Each line is one step: ``{"schema", "rank", "world_size", "host", "step", "start_unix_s", "step_ms", "timing",
"stages_ms": {name: ms}}`` and, from StepTimers that write it, ``"proc_start_unix_s"``. Blank lines are skipped;
a last line cut short (a job killed while writing) is counted in ``truncated`` and otherwise ignored, any other
unreadable line is an error.

Errors: :class:`fleetdx.probes.errors.ParseError` (format ``"steplog"``): a line that is not a JSON object of
this schema, negative or non-finite times, several ranks in one file, or no step at all.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError

FMT = "steplog"
SCHEMA = "fleetdx.steps/1"


class StepRecord(Contract):
    """One step of one rank: its number, start (Unix seconds), wall time and stage times (ms)."""

    step: int
    start_unix_s: float
    step_ms: float
    stages_ms: dict[str, float] = Field(default_factory=dict)
    #: when the process that wrote the line started (Unix seconds; absent from logs of older StepTimers)
    proc_start_unix_s: float | None = None
    #: the rank's model FLOPs of the step, as the StepTimer was told (``flops_per_step``); absent: unknown
    flops: float | None = None


class StepLog(Contract):
    """One rank's StepTimer log."""

    source: str
    rank: int
    world_size: int | None = None
    host: str | None = None
    timing: str  #: "wall", "cuda-events" or "synchronize"
    records: list[StepRecord]
    truncated: int = 0


def _finite(v: Any, lineno: int, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ParseError(FMT, lineno, f"{what}: a finite number >= 0", repr(v))
    return float(v)


def _int(v: Any, lineno: int, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ParseError(FMT, lineno, f"{what}: an integer >= 0", repr(v))
    return v


def parse_steplog(text: str, source: str = "<text>") -> StepLog:
    """Parse one StepTimer JSONL text. See the module docstring."""
    lines = text.splitlines()
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    records: list[StepRecord] = []
    rank: int | None = None
    world: int | None = None
    host: str | None = None
    timing = "wall"
    truncated = 0
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        lineno = i + 1
        try:
            d = json.loads(line)
        except (ValueError, RecursionError):
            if i == last and not line.rstrip().endswith("}"):
                truncated += 1
                continue
            raise ParseError(FMT, lineno, "one JSON object per line", line) from None
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise ParseError(FMT, lineno, f'a JSON object with "schema": "{SCHEMA}"', line)
        r = _int(d.get("rank"), lineno, "rank")
        if rank is not None and r != rank:
            raise ParseError(FMT, lineno, f"rank {rank} on every line (one file per rank)", f"rank {r}")
        rank = r
        w = d.get("world_size")
        world = _int(w, lineno, "world_size") if w is not None else world
        h = d.get("host")
        host = h if isinstance(h, str) and h else host
        t = d.get("timing")
        timing = t if isinstance(t, str) and t else timing
        stages = d.get("stages_ms")
        if not isinstance(stages, dict):
            raise ParseError(FMT, lineno, "stages_ms: an object of stage -> ms", line)
        records.append(
            StepRecord(
                step=_int(d.get("step"), lineno, "step"),
                start_unix_s=_finite(d.get("start_unix_s"), lineno, "start_unix_s"),
                step_ms=_finite(d.get("step_ms"), lineno, "step_ms"),
                stages_ms={str(k): _finite(v, lineno, f"stages_ms.{k}") for k, v in stages.items()},
                proc_start_unix_s=_finite(ps, lineno, "proc_start_unix_s")
                if (ps := d.get("proc_start_unix_s")) is not None
                else None,
                flops=_finite(fl, lineno, "flops") if (fl := d.get("flops")) is not None else None,
            )
        )
    if rank is None or not records:
        raise ParseError(FMT, None, "at least one step line")
    return StepLog(
        source=source, rank=rank, world_size=world, host=host, timing=timing, records=records, truncated=truncated
    )
