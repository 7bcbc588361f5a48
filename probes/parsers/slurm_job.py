"""Parsers of Slurm's descriptions of a job: ``scontrol show job -o ID`` and ``sacct --json -j ID``.

``scontrol show job -o`` prints one line per job of ``Key=Value`` pairs separated by spaces (scontrol(1)).
Keys may hold ``:`` and ``/`` (``AllocNode:Sid``, ``CPUs/Task``, ``ReqB:S:C:T``), values may hold ``=``
(``TRES=cpu=4,node=4,gres/gpu=32``) and a few hold spaces (``Command=/path/train.sh --lr 3e-4``): a word that
does not start with ``Key=`` continues the previous value. Times are the controller's local time
(``2026-11-24T10:00:01``), ``Unknown``/``None``/``N/A`` when unset.

``sacct --json`` (Slurm 21.08 and later, with accounting) prints ``{"jobs": [...]}``; numbers are plain in
22.05 and ``{"set": bool, "infinite": bool, "number": N}`` from 23.02, ``state.current`` a string in 22.05 and
a list of strings from 23.02. Both shapes are read.

Both raise :class:`~fleetdx.probes.errors.ParseError` and nothing else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError

FMT_SCONTROL = "scontrol-show-job"
FMT_SACCT = "sacct-json"

_KEY_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_:/]*)=(.*)$", re.DOTALL)
_UNSET = frozenset({"", "Unknown", "None", "N/A", "(null)", "UNLIMITED"})
_EXIT_RE = re.compile(r"^(\d+):(\d+)$")
_GPU_PER_NODE_RE = re.compile(r"gres[:/]gpu(?::[^:,=]+)?[:=](\d+)")
_TRES_GPU_RE = re.compile(r"(?:^|,)gres/gpu(?::[^=,]+)?=(\d+)")


class SlurmJobRecord(Contract):
    """One job as Slurm describes it, in Slurm's own words; ``fields`` keeps every ``Key=Value`` of
    ``scontrol`` (empty for ``sacct``). Times are Unix seconds; ``nodelist`` is Slurm's compressed hostlist."""

    job_id: str
    name: str | None = None
    user: str | None = None
    state: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    nodelist: str | None = None
    batch_host: str | None = None
    num_nodes: int | None = None
    gpus_per_node: int | None = None
    start_time: float | None = None
    end_time: float | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: str | None = None
    command: str | None = None
    work_dir: str | None = None
    stdout: str | None = None
    fields: dict[str, str] = Field(default_factory=dict)


def _value(fields: Mapping[str, str], key: str) -> str | None:
    v = fields.get(key)
    return None if v is None or v in _UNSET else v


def _local_time(text: str | None, line: int) -> float | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ParseError(FMT_SCONTROL, line, "a time like 2026-11-24T10:00:01", text) from None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _gpus_per_node(fields: Mapping[str, str]) -> int | None:
    for key in ("TresPerNode", "Gres"):
        m = _GPU_PER_NODE_RE.search(fields.get(key, ""))
        if m:
            return int(m.group(1))
    m = _TRES_GPU_RE.search(fields.get("TRES", ""))
    nodes = _int(_value(fields, "NumNodes"))
    if m and nodes:
        return int(m.group(1)) // nodes
    return None


def _split_line(text: str, line: int) -> dict[str, str]:
    fields: dict[str, str] = {}
    last: str | None = None
    for word in text.split(" "):
        m = _KEY_RE.match(word)
        if m:
            last = m.group(1)
            fields[last] = m.group(2)
        elif last is not None:
            fields[last] += " " + word
        elif word:
            raise ParseError(FMT_SCONTROL, line, "Key=Value words starting with JobId=", word)
    return fields


def parse_scontrol_job(text: str) -> list[SlurmJobRecord]:
    """Every job of ``scontrol show job -o`` output, in order (a heterogeneous or array job prints several).

    Raises:
        ParseError: no line starts with ``JobId=``, or a known field is malformed.
    """
    jobs: list[SlurmJobRecord] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if not line.startswith("JobId="):
            if line.startswith("slurm_load_jobs error") or "Invalid job id" in line:
                raise ParseError(FMT_SCONTROL, n, "a job description", line)
            continue
        fields = _split_line(line, n)
        exit_code = signal = None
        ec = _value(fields, "ExitCode")
        if ec is not None:
            m = _EXIT_RE.match(ec)
            if not m:
                raise ParseError(FMT_SCONTROL, n, "ExitCode=CODE:SIGNAL", ec)
            exit_code, signal = int(m.group(1)), int(m.group(2))
        user = _value(fields, "UserId")
        jobs.append(
            SlurmJobRecord(
                job_id=fields["JobId"],
                name=_value(fields, "JobName"),
                user=user.split("(", 1)[0] if user else None,
                state=_value(fields, "JobState"),
                exit_code=exit_code,
                signal=signal,
                nodelist=_value(fields, "NodeList"),
                batch_host=_value(fields, "BatchHost"),
                num_nodes=_int(_value(fields, "NumNodes")),
                gpus_per_node=_gpus_per_node(fields),
                start_time=_local_time(_value(fields, "StartTime"), n),
                end_time=_local_time(_value(fields, "EndTime"), n),
                partition=_value(fields, "Partition"),
                account=_value(fields, "Account"),
                qos=_value(fields, "QOS"),
                time_limit=fields.get("TimeLimit") or None,
                command=_value(fields, "Command"),
                work_dir=_value(fields, "WorkDir"),
                stdout=_value(fields, "StdOut"),
                fields=fields,
            )
        )
    if not jobs:
        raise ParseError(FMT_SCONTROL, None, "a line starting with JobId= (scontrol show job -o)", text[:120])
    return jobs


def _number(v: Any) -> int | None:
    """A sacct number: ``5`` (22.05) or ``{"set": true, "infinite": false, "number": 5}`` (23.02+)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, Mapping) and v.get("set", True) and not v.get("infinite", False):
        n = v.get("number")
        return n if isinstance(n, int) and not isinstance(n, bool) else None
    return None


def _state(v: Any) -> str | None:
    if isinstance(v, str):
        return v or None
    if isinstance(v, list) and v and all(isinstance(s, str) for s in v):
        return ",".join(v)
    return None


def _obj(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v not in _UNSET else None


def parse_sacct_json(text: str) -> list[SlurmJobRecord]:
    """Every job of ``sacct --json`` output.

    Raises:
        ParseError: not JSON, or no ``jobs`` list of objects with a ``job_id``.
    """
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ParseError(FMT_SACCT, None, "a JSON document", str(e)) from None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise ParseError(FMT_SACCT, None, 'an object with a "jobs" list (sacct --json)')
    out: list[SlurmJobRecord] = []
    for i, j in enumerate(jobs):
        if not isinstance(j, dict) or _number(j.get("job_id")) is None:
            raise ParseError(FMT_SACCT, None, f"jobs[{i}] to be an object with a numeric job_id")
        time, state, ec, tres = (_obj(j, k) for k in ("time", "state", "exit_code", "tres"))
        sig = _obj(ec, "signal")
        start, end = _number(time.get("start")), _number(time.get("end"))
        nodes = _number(j.get("allocation_nodes"))
        allocated = tres.get("allocated")
        gpus: int = sum(
            _number(t.get("count")) or 0
            for t in (allocated if isinstance(allocated, list) else [])
            if isinstance(t, dict) and t.get("type") == "gres" and t.get("name") == "gpu"
        )
        out.append(
            SlurmJobRecord(
                job_id=str(_number(j.get("job_id"))),
                name=_text(j.get("name")),
                user=_text(j.get("user")),
                state=_state(state.get("current")),
                exit_code=_number(ec.get("return_code")),
                signal=_number(sig.get("id")) if sig else None,
                nodelist=_text(j.get("nodes")),
                num_nodes=nodes,
                gpus_per_node=gpus // nodes if gpus and nodes else None,
                start_time=float(start) if start else None,
                end_time=float(end) if end else None,
                partition=_text(j.get("partition")),
                account=_text(j.get("account")),
                qos=_text(j.get("qos")),
                work_dir=_text(j.get("working_directory")),
            )
        )
    if not out:
        raise ParseError(FMT_SACCT, None, "at least one job")
    return out
