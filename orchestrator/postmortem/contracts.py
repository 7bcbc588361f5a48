"""The postmortem's output contract: what ``fleetdx postmortem --json`` prints.

Shape (issue 12, item 4)::

    {"verdict", "exit_code", "job": {...} | null,
     "causes": [{"code", "severity", "rank": int | null, "host": str | null, "gpu": str | null, "nodes": [str],
                 "time": str | null, "message", "action", "evidence": [{"file", "line": int, "text"}]}],
     "timeline": [{"time", "host", "rank", "kind", "text"}],
     "missing_evidence": [str],
     "history": [{"host", "entries": [...]}],
     "bandwidth": [{"source", "started_at": float | null, "simulated": bool, "curve": {...}}]}

``history`` (an addition to issue 12's shape) is what fleetdx's store knew of the hosts the causes name: each
host's newest pre-flight and bandwidth runs (``fleetdx history HOST --json``'s entries), empty when no store was
read. It answers "was this node already known to be bad, or did a pre-flight pass it?".

``bandwidth`` (an addition too) holds the busbw-vs-size curves the postmortem found for the job's nodes: the
nccl-tests results of the bundles given (``--bundles``, epilog bundles) and the newest stored pre-flight or
bandwidth run's curves of each blamed host; empty when there are none. The HTML page draws them.

Each cause's ``gpu_detail`` (an addition) says which GPU ``gpu`` is and how that is known (:class:`GpuRef`);
``None`` when nothing the job printed says it.

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

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.report import BusbwCurve
from fleetdx.orchestrator.store.records import NodeHistory
from fleetdx.probes.contracts import Contract, Job, Severity, VerdictName
from fleetdx.probes.parsers.joblog import GpuSource


class EvidenceLine(Contract):
    """One line a cause rests on: the file as given, its 1-based line number, the text as read."""

    file: str
    line: int
    text: str


class GpuRef(Contract):
    """Which GPU a cause is about, and how that is known (``source``; see
    :mod:`fleetdx.orchestrator.postmortem.gpus`).

    ``rank`` the rank that used it, when known; ``index`` the CUDA device as the process saw it (after
    ``CUDA_VISIBLE_DEVICES``); ``physical_index`` its index on the host (NVML/nvidia-smi order: NCCL's
    ``nvmlDev``, or the ``CUDA_VISIBLE_DEVICES`` entry); ``bus_id`` its PCI address (NCCL's ``busId`` decoded,
    ``dddd:bb:dd.f``, or the kernel's ``dddd:bb:dd``); ``visible_devices`` the ``CUDA_VISIBLE_DEVICES`` that
    remapped it; ``name`` the job model's name for it (``GPU3``, a UUID); ``kernel_match`` true when a kernel
    log's PCI address (an XID) is the bus id NCCL printed for ``rank`` on the same host."""

    source: GpuSource
    rank: int | None = None
    index: int | None = None
    physical_index: int | None = None
    bus_id: str | None = None
    visible_devices: str | None = None
    name: str | None = None
    kernel_match: bool = False


class Cause(Contract):
    """One candidate cause of the failure (see the module doc for the fields)."""

    code: FindingCode
    severity: Severity
    rank: int | None = None
    host: str | None = None
    gpu: str | None = None
    gpu_detail: GpuRef | None = None
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


class BandwidthCurve(Contract):
    """A busbw-vs-size curve of some of the job's nodes: ``source`` says where it was read (``bundle
    DIR/FILE``, or ``store run RUN_ID``), ``started_at`` when it was measured (Unix seconds; ``None`` when
    unknown), ``simulated`` whether the run only replayed bundles (nothing measured)."""

    source: str
    started_at: float | None = None
    simulated: bool = False
    curve: BusbwCurve


class PostmortemReport(Contract):
    """The postmortem of one job."""

    verdict: VerdictName
    exit_code: int
    job: Job | None = None
    causes: list[Cause] = Field(default_factory=list)
    timeline: list[TimelineEntry] = Field(default_factory=list)
    missing_evidence: list[str] = Field(default_factory=list)
    history: list[NodeHistory] = Field(default_factory=list)
    bandwidth: list[BandwidthCurve] = Field(default_factory=list)
