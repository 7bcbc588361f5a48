"""Reading step-time inputs from disk: Kineto traces and StepTimer JSONL files, one per rank, and training
logs that print step times (one rank or several), from files or folders. The only place of
:mod:`fleetdx.orchestrator.steps` that touches the file system.

A folder is searched (not recursively) for ``*.json``, ``*.json.gz`` (traces; ``*.pt.trace.json[.gz]`` as
``tensorboard_trace_handler`` names them) and ``*.jsonl`` (StepTimer logs); a folder holding none of them is
searched for training logs (``*.log``, ``*.out``, ``*.txt``). A file named on the command line that is not a
trace or a StepTimer log is read as a training log. A trace and a StepTimer log of the same rank are two views
of one rank: the trace is used and the log is kept as a cross-check only when no trace exists for that rank.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fleetdx.probes.errors import ConfigError, ParseError
from fleetdx.probes.parsers.kineto import DEFAULT_MAX_EVENTS, KinetoTrace, parse_kineto_stream
from fleetdx.probes.parsers.steplog import StepLog, parse_steplog
from fleetdx.probes.rawfile import DEFAULT_MAX_BYTES, RawFileError, check_regular, read_raw

if TYPE_CHECKING:
    from fleetdx.probes.parsers.steptime_log import StepTimeLog

#: StepTimer logs are small (about 250 bytes per step): 64 MiB is 250,000 steps
STEPLOG_MAX_BYTES = 64 * 1024 * 1024
#: of a training log only the lines that may be step lines are kept (a Megatron line is about 300 bytes: 256 MiB
#: is 900,000 logged iterations); the log itself may be of any size, it is streamed
TRAINLOG_MAX_BYTES = 256 * 1024 * 1024
#: names of training logs searched in a folder without traces or StepTimer logs
TRAINLOG_SUFFIXES = (".log", ".out", ".txt")


def load_trace(path: Path, max_events: int = DEFAULT_MAX_EVENTS) -> KinetoTrace:
    """Parse the Kineto trace at ``path`` (plain or gzip JSON, sniffed by content).

    Raises:
        RawFileError: missing, not a regular file, unreadable.
        ParseError: not a readable Kineto trace (see :mod:`fleetdx.probes.parsers.kineto`).
    """
    check_regular(path)
    try:
        f = open(path, "rb")  # noqa: SIM115
    except OSError as e:
        raise RawFileError(f"{path}: cannot be read: {e.strerror}") from None
    with f:
        try:
            return parse_kineto_stream(f, str(path), max_events)
        except ParseError as e:  # name the file: a folder holds one trace per rank
            raise ParseError(f"{path}: {e.fmt}", e.line, e.expected, e.detail) from None


def load_steplog(path: Path, max_bytes: int = STEPLOG_MAX_BYTES) -> StepLog:
    """Parse the StepTimer JSONL file at ``path``. Raises RawFileError or ParseError."""
    return parse_steplog(read_raw(path, max_bytes=max(max_bytes, DEFAULT_MAX_BYTES)), source=str(path))


def load_steptime_log(path: Path, max_bytes: int = TRAINLOG_MAX_BYTES) -> StepTimeLog:
    """The step lines of the training log at ``path``, streamed (only lines that may be step lines are kept, at
    most ``max_bytes`` of them).

    Raises:
        RawFileError: missing, not a regular file, unreadable, or over ``max_bytes`` of step lines.
        ParseError: binary, or no step line of a known format (see :mod:`fleetdx.probes.parsers.steptime_log`).
    """
    # the training-log parser (and the log line normaliser) load only for a training log, not for traces
    from fleetdx.probes.parsers.steptime_log import may_hold_steps, parse_steptime_log

    text = read_raw(path, max_bytes=max_bytes, keep=may_hold_steps)
    try:
        return parse_steptime_log(text, source=str(path))
    except ParseError as e:  # name the file
        raise ParseError(f"{path}: {e.fmt}", e.line, e.expected, e.detail) from None


def is_trainlog(p: Path) -> bool:
    """Whether ``p`` is read as a training log (not a trace, not a StepTimer log)."""
    return not (_is_trace(p) or p.name.endswith(".jsonl"))


def _is_trace(p: Path) -> bool:
    return p.name.endswith((".json", ".json.gz"))


def expand(paths: list[Path]) -> list[Path]:
    """The input files named by ``paths`` (files as given, folders' traces and logs sorted by name; a folder
    without traces or StepTimer logs gives its training logs).

    Raises:
        ConfigError: a path that does not exist, or a folder holding no trace or log.
    """
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            files = sorted(q for q in p.iterdir() if q.is_file())
            found = [q for q in files if _is_trace(q) or q.name.endswith(".jsonl")]
            found = found or [q for q in files if q.name.endswith(TRAINLOG_SUFFIXES)]
            if not found:
                raise ConfigError(
                    f"{p}: no *.json, *.json.gz or *.jsonl file (nor a training log *.log, *.out, *.txt) in this folder"
                )
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise ConfigError(f"{p}: no such file or folder")
    return out
