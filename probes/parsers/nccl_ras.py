"""Parser for NCCL's RAS status report (NCCL 2.24 and later): what ``ncclras`` (or ``echo status | nc localhost
28028``) prints about a running job, in its text form and, from NCCL 2.28.7, its JSON form (``ncclras -f json``).

Formats, as NCCL prints them (``src/ras/client_support.cc``; ``docs/userguide/source/troubleshooting/ras.rst``):

- text: ``NCCL version X``, the ``Job summary`` table (nodes, processes per node, GPUs per process, processes
  and GPUs in total), the ``Communicators`` table (group, comms in group, nodes per comm, ranks per node, ranks
  per comm, ranks in group, status, errors), then ``Errors`` and ``Warnings`` sections of entries: a headline
  (``INCOMPLETE``, ``DEAD``, ``TIMEOUT``, or ``#G-C (hash) INCOMPLETE|ERROR|MISMATCH`` for one communicator)
  followed by indented lines: ``Process PID on node HOST managing GPU N``, ``Rank R -- GPU N managed by process
  PID on node HOST`` (optionally ``Rank R has status S -- ...``), ``The missing rank: R`` (older releases),
  ``N ranks have launched up to operation X``...;
- JSON: ``communicators[]`` with ``ranks[]`` and ``missing_ranks[]`` (``rank``, ``host``, ``pid``, ``cuda_dev``,
  ``status.unresponsive``, ``status.considered_dead``).

:func:`unresponsive` gives the processes the report names as missing or dead, each with its rank when a
communicator's entry names it: what a hang's evidence needs.

Errors: :class:`fleetdx.probes.errors.ParseError` (format ``"nccl-ras"``) for a text that is no RAS report
(neither a ``Job summary`` nor a ``Communicators`` header nor RAS JSON).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from fleetdx.probes.contracts import Contract
from fleetdx.probes.errors import ParseError

FMT = "nccl-ras"

_VERSION = re.compile(r"^NCCL version (\S+)")
_COMM_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z]+)\s*$")
_HEADLINE = re.compile(r"^(?:#(?P<comm>\d+-\d+) \((?P<hash>[0-9a-f]+)\) )?(?P<kind>[A-Z]{3,20})\s*$")
_PROCESS = re.compile(r"^\s+Process (?P<pid>\d+) on node (?P<host>\S+) managing GPUs? (?P<gpu>[\w ,.\-]+?)\s*$")
_RANK = re.compile(
    r"^\s+Rank (?P<rank>\d+)(?: has [^-]{1,80}?)? -- (?:GPU (?P<gpu>\S+) managed by process (?P<pid>\d+) on node "
    r"(?P<host>\S+)|\[process information not found\])"
)
_MISSING_RANK = re.compile(r"^\s+The missing ranks?: (?P<ranks>[\d, ]+)")
_MAX_PROBLEMS = 1000


class RasProcess(Contract):
    """A process a RAS entry names: its pid, node (a host name or address, as NCCL prints it), GPU(s) and its rank
    in the entry's communicator when the entry names one."""

    pid: int | None = None
    host: str | None = None
    gpu: str | None = None
    rank: int | None = None


class RasProblem(Contract):
    """One entry of the Errors (``severity`` error) or Warnings section: its kind (INCOMPLETE, DEAD, TIMEOUT,
    ERROR, MISMATCH...), the communicator (``#G-C``) and hash when it is about one, its text, the processes and
    ranks it names."""

    severity: Literal["error", "warning"]
    kind: str
    comm: str | None = None
    comm_hash: str | None = None
    lines: list[str] = Field(default_factory=list)
    processes: list[RasProcess] = Field(default_factory=list)
    missing_ranks: list[int] = Field(default_factory=list)


class RasCommGroup(Contract):
    """One row of the Communicators table: a group of alike communicators."""

    group: int
    comms: int
    nodes_per_comm: int
    ranks_per_node: str  #: a number or a range (``7-8``)
    ranks_per_comm: int
    ranks_in_group: int
    status: str
    errors: str


class RasReport(Contract):
    """A RAS status report (module doc)."""

    format: Literal["text", "json"]
    nccl_version: str | None = None
    nodes: int | None = None
    processes: int | None = None
    gpus: int | None = None
    groups: list[RasCommGroup] = Field(default_factory=list)
    problems: list[RasProblem] = Field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """No error entry and every communicator group OK."""
        return not any(p.severity == "error" for p in self.problems) and all(g.errors == "OK" for g in self.groups)


def parse_nccl_ras(text: str) -> RasReport:
    """Parse a RAS report, text or JSON (module doc). Raises ParseError when ``text`` is neither."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return _parse_json(stripped)
    return _parse_text(text)


def _summary(lines: list[str], i: int) -> dict[str, int]:
    """The Job summary's first row of numbers after line ``i``: nodes, processes per node, GPUs per process,
    processes and GPUs in total (the columns NCCL prints when the job is regular)."""
    for line in lines[i + 1 : i + 8]:
        nums = line.split()
        if nums and all(n.isdigit() for n in nums):
            vals = [int(n) for n in nums]
            return {"nodes": vals[0]} | ({"processes": vals[3], "gpus": vals[4]} if len(vals) >= 5 else {})
    return {}


@dataclass
class _Entry:
    severity: Literal["error", "warning"]
    kind: str
    comm: str | None
    comm_hash: str | None
    lines: list[str] = field(default_factory=list)
    processes: list[RasProcess] = field(default_factory=list)
    missing_ranks: list[int] = field(default_factory=list)

    def add(self, line: str) -> None:
        if len(self.lines) < 200:
            self.lines.append(line.strip())
        if m := _PROCESS.match(line):
            self.processes.append(RasProcess(pid=int(m.group("pid")), host=m.group("host"), gpu=m.group("gpu")))
        elif m := _RANK.match(line):
            pid = m.group("pid")
            self.processes.append(
                RasProcess(
                    rank=int(m.group("rank")), pid=int(pid) if pid else None, host=m.group("host"), gpu=m.group("gpu")
                )
            )
        elif m := _MISSING_RANK.match(line):
            self.missing_ranks += [int(x) for x in re.split(r"[,\s]+", m.group("ranks").strip()) if x.isdigit()]

    def problem(self) -> RasProblem:
        return RasProblem(**self.__dict__)


def _group(m: re.Match[str]) -> RasCommGroup:
    g = m.groups()
    return RasCommGroup(
        group=int(g[0]),
        comms=int(g[1]),
        nodes_per_comm=int(g[2]),
        ranks_per_node=g[3],
        ranks_per_comm=int(g[4]),
        ranks_in_group=int(g[5]),
        status=g[6],
        errors=g[7],
    )


def _parse_text(text: str) -> RasReport:
    lines = text.splitlines()
    if not any(ln.startswith(("Job summary", "Communicators", "Errors", "Warnings")) for ln in lines):
        raise ParseError(FMT, None, "a RAS status report (Job summary / Communicators / Errors)", text[:80])
    version: str | None = None
    summary: dict[str, int] = {}
    groups: list[RasCommGroup] = []
    entries: list[_Entry] = []
    section: Literal["error", "warning"] | None = None
    for i, line in enumerate(lines):
        if m := _VERSION.match(line):
            version = m.group(1)
        elif line.startswith("Job summary"):
            summary = _summary(lines, i)
        elif line.startswith(("Errors", "Warnings")):
            section = "error" if line.startswith("Errors") else "warning"
            entries.append(_Entry(section, "", None, None))  # a section's head: lines before its first entry
        elif section is None and (m := _COMM_ROW.match(line)):
            groups.append(_group(m))
        elif section is not None and not line.startswith((" ", "=")) and (m := _HEADLINE.match(line)):
            if len(entries) >= _MAX_PROBLEMS:
                break
            entries.append(_Entry(section, m.group("kind"), m.group("comm"), m.group("hash")))
        elif entries and line.startswith(" ") and line.strip():
            entries[-1].add(line)
    return RasReport(
        format="text", nccl_version=version, groups=groups, problems=[e.problem() for e in entries if e.kind], **summary
    )


def _parse_json(text: str) -> RasReport:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ParseError(FMT, None, "RAS JSON (ncclras -f json)", str(e)[:120]) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators"), list):
        raise ParseError(FMT, None, 'RAS JSON with a "communicators" list', text[:80])
    rep = RasReport(format="json", nccl_version=str(doc["nccl_version"]) if doc.get("nccl_version") else None)
    for c in doc["communicators"][:_MAX_PROBLEMS]:
        if not isinstance(c, dict):
            continue
        missing = [r for r in c.get("missing_ranks") or [] if isinstance(r, dict)]
        if not missing:
            continue
        dead = any(_status(r).get("considered_dead") is True for r in missing)
        rep.problems.append(
            RasProblem(
                severity="error",
                kind="DEAD" if dead else "INCOMPLETE",
                comm_hash=str(c.get("hash") or "") or None,
                lines=[f"missing {len(missing)} of {c.get('size')} ranks"],
                processes=[_json_process(r) for r in missing],
                missing_ranks=[r["rank"] for r in missing if isinstance(r.get("rank"), int)],
            )
        )
    return rep


def _status(r: dict[str, Any]) -> dict[str, Any]:
    s = r.get("status")
    return s if isinstance(s, dict) else {}


def _json_process(r: dict[str, Any]) -> RasProcess:
    def num(k: str) -> int | None:
        v = r.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    gpu = num("cuda_dev")
    return RasProcess(
        pid=num("pid"),
        host=str(r["host"]) if r.get("host") else None,
        gpu=None if gpu is None else str(gpu),
        rank=num("rank"),
    )


def unresponsive(rep: RasReport) -> list[RasProcess]:
    """The processes the report's error entries name (missing or dead), one per (host, pid), with the rank a
    communicator's entry gives; the ranks an entry lists without their process come as rank-only entries."""
    seen: dict[tuple[str | None, int | None], RasProcess] = {}
    ranks_only: list[RasProcess] = []
    for p in rep.problems:
        if p.severity != "error":
            continue
        for proc in p.processes:
            key = (proc.host, proc.pid)
            if proc.pid is None and proc.host is None:
                ranks_only.append(proc)
            elif key not in seen or (seen[key].rank is None and proc.rank is not None):
                seen[key] = proc
        ranks_only += [RasProcess(rank=r) for r in p.missing_ranks]
    known = {p.rank for p in seen.values() if p.rank is not None}
    return list(seen.values()) + [p for p in ranks_only if p.rank not in known]
