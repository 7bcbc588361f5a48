"""The postmortem's output contract: what ``fleetdx postmortem --json`` prints.

The report envelope (:class:`~fleetdx.orchestrator.judgement.envelope.Report`), then the postmortem's body::

    {"schema_version": 3, "kind": "postmortem", "verdict", "exit_code", "job": {...} | null,
     "findings": [{"code", "severity", "scope", "nodes": [str], "rank": int | null, "gpu": str | null,
                   "subject", "message", "action", "evidence": [{"file", "line": int, "text"}],
                   "time": str | null, "details": {"gpu_ref": {...}}}],
     "missing_evidence": [str],
     "timeline": [{"time", "host", "rank", "kind", "text"}],
     "history": [{"host", "entries": [...]}],
     "bandwidth": [{"source", "started_at": float | null, "simulated": bool, "curve": {...}}],
     "causes": [...]}

``findings`` are the causes, ranked, the most likely first (not sorted by severity as a run's findings are).
``causes`` repeats them under the name schema version 2 used: **deprecated**, printed until fleetdx 0.4; read
``findings``. A cause's ``rank`` is the torch global rank it is about (``None`` when the evidence does not say
which rank failed first: then ``missing_evidence`` says what would); ``nodes`` every host it is about, the host
where it happened first (``Finding.host``; empty for a job-wide cause such as a time limit); ``gpu`` the device
as the evidence names it (``cuda:3``: CUDA device 3 as the process saw it, after ``CUDA_VISIBLE_DEVICES``;
``PCI:0000:3b:00`` from the kernel); ``details["gpu_ref"]`` which GPU that is and how it is known
(:class:`GpuRef`, :func:`gpu_ref`); ``time`` ISO 8601 UTC when the stamp had a full date, else the stamp as
printed.

``history`` is what fleetdx's store knew of the hosts the causes name: each host's newest pre-flight and
bandwidth runs (``fleetdx history HOST --json``'s entries), empty when no store was read. ``bandwidth`` holds
the busbw-vs-size curves found for the job's nodes: the nccl-tests results of the bundles given (``--bundles``,
epilog bundles) and the newest stored pre-flight or bandwidth run's curves of each blamed host.

Version-2 documents (no ``schema_version``; ``causes`` with ``host`` and ``gpu_detail``) are read and upgraded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from fleetdx.orchestrator.judgement import EvidenceLine, Finding, FindingCode
from fleetdx.orchestrator.judgement.envelope import Report
from fleetdx.orchestrator.report import BusbwCurve, NodeHistory
from fleetdx.probes.contracts import Contract, EvidenceValue, Severity
from fleetdx.probes.parsers.joblog import GpuSource


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


def cause(
    code: FindingCode,
    severity: Severity,
    message: str,
    action: str,
    *,
    rank: int | None = None,
    host: str | None = None,
    nodes: Iterable[str] = (),
    gpu: str | None = None,
    gpu_detail: GpuRef | None = None,
    time: str | None = None,
    evidence: Iterable[EvidenceLine] = (),
    subject: str | None = None,
    details: dict[str, EvidenceValue] | None = None,
) -> Finding:
    """One candidate cause of a failure, as a :class:`~fleetdx.orchestrator.judgement.Finding`: ``host`` (where
    it happened) is put first in ``nodes``; ``gpu_detail`` goes to ``details["gpu_ref"]``; the subject is the
    GPU, else the rank, else the host, else ``job``, unless ``subject`` is given."""
    hosts = list(dict.fromkeys([*([host] if host else []), *nodes]))
    return Finding(
        code=code,
        severity=severity,
        nodes=hosts,
        rank=rank,
        gpu=gpu,
        subject=subject or default_subject(gpu, rank, host),
        message=message,
        action=action,
        evidence=list(evidence),
        time=time,
        details={**(details or {}), **gpu_details(gpu_detail)},
    )


def default_subject(gpu: str | None, rank: int | None, host: str | None) -> str:
    """What a cause is about when its producer names nothing else: the GPU, else the rank, else the host, else
    ``job``."""
    return gpu or (f"rank {rank}" if rank is not None else (host or "job"))


def gpu_details(ref: GpuRef | None) -> dict[str, EvidenceValue]:
    """``{"gpu_ref": {...}}`` for a finding's details (``{}`` for none)."""
    return {"gpu_ref": ref.model_dump(mode="json")} if ref is not None else {}


def gpu_ref(f: Finding) -> GpuRef | None:
    """Which GPU a cause is about and how that is known (its ``details["gpu_ref"]``), ``None`` when unknown."""
    raw = f.details.get("gpu_ref")
    return GpuRef.model_validate(raw) if isinstance(raw, dict) else None


def _upgrade_cause(c: Any) -> Any:
    """A version-2 cause (``host``, ``gpu_detail``) as a version-3 finding's input."""
    if not isinstance(c, dict) or "scope" in c:
        return c
    c = dict(c)
    host = c.pop("host", None)
    ref = c.pop("gpu_detail", None)
    c["nodes"] = list(dict.fromkeys([*([host] if host else []), *c.get("nodes", [])]))
    rank, gpu = c.get("rank"), c.get("gpu")
    c.setdefault("subject", default_subject(gpu, rank, host))
    if isinstance(ref, dict):
        c["details"] = {"gpu_ref": ref}
    return c


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


class PostmortemReport(Report):
    """The postmortem of one job (see the module doc); ``findings`` are its causes, ranked."""

    kind: Literal["postmortem"] = "postmortem"
    timeline: list[TimelineEntry] = Field(default_factory=list)
    history: list[NodeHistory] = Field(default_factory=list)
    bandwidth: list[BandwidthCurve] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def causes(self) -> list[Finding]:
        """Deprecated alias of ``findings`` (schema version 2's name), printed until fleetdx 0.4."""
        return self.findings

    @model_validator(mode="before")
    @classmethod
    def _upgrade_v2(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "causes" not in data:
            return data
        data = dict(data)
        causes = data.pop("causes")
        if "findings" not in data:
            data["findings"] = [_upgrade_cause(c) for c in causes or []]
        return data
