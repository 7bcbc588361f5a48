"""The postmortem's output contract: what ``fleetdx postmortem --json`` prints.

Shape (issue 12, item 4)::

    {"verdict", "exit_code", "job": {...} | null,
     "causes": [{"code", "severity", "rank": int | null, "host": str | null, "gpu": str | null, "nodes": [str],
                 "time": str | null, "message", "action", "evidence": [{"file", "line": int, "text"}]}],
     "timeline": [{"time", "host", "rank", "kind", "text"}],
     "missing_evidence": [str],
     "history": [{"host", "entries": [...]}]}

``history`` (an addition to issue 12's shape) is what fleetdx's store knew of the hosts the causes name: each
host's newest pre-flight and bandwidth runs (``fleetdx history HOST --json``'s entries), empty when no store was
read. It answers "was this node already known to be bad, or did a pre-flight pass it?".

``causes`` are ranked, the most likely first. ``rank`` is the torch global rank the cause is about (``None``
when the evidence does not say which rank failed first: then ``missing_evidence`` says what would); ``host``
the host it happened on; ``gpu`` the device as the evidence names it (``cuda:3``: CUDA device 3 as the process
saw it, after ``CUDA_VISIBLE_DEVICES``; ``PCI:0000:3b:00`` from the kernel); ``nodes`` every host the cause is
about (empty for a run-wide cause such as a time limit); ``time`` ISO 8601 UTC when the stamp had a full date,
else the stamp as printed. ``verdict``/``exit_code`` follow the Nagios convention
(:class:`~fleetdx.probes.contracts.Verdict`).
"""

from __future__ import annotations

from pydantic import Field

from fleetdx.orchestrator.store.records import NodeHistory
from fleetdx.probes.contracts import Contract, FindingCode, Job, Severity, VerdictName


class EvidenceLine(Contract):
    """One line a cause rests on: the file as given, its 1-based line number, the text as read."""

    file: str
    line: int
    text: str


class Cause(Contract):
    """One candidate cause of the failure (see the module doc for the fields)."""

    code: FindingCode
    severity: Severity
    rank: int | None = None
    host: str | None = None
    gpu: str | None = None
    nodes: list[str] = Field(default_factory=list)
    time: str | None = None
    message: str
    action: str
    evidence: list[EvidenceLine] = Field(default_factory=list)


class TimelineEntry(Contract):
    """One event on the job's timeline (``kind`` is a :class:`~fleetdx.probes.parsers.joblog.EventKind` value)."""

    time: str | None
    host: str | None
    rank: int | None
    kind: str
    text: str


class PostmortemReport(Contract):
    """The postmortem of one job."""

    verdict: VerdictName
    exit_code: int
    job: Job | None = None
    causes: list[Cause] = Field(default_factory=list)
    timeline: list[TimelineEntry] = Field(default_factory=list)
    missing_evidence: list[str] = Field(default_factory=list)
    history: list[NodeHistory] = Field(default_factory=list)
