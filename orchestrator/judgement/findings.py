"""The one finding of every job: pre-flight, analyze, bandwidth, postmortem and steps all judge with
:class:`Finding`, and every code a finding can carry is a :class:`FindingCode` with one row in the code catalog
(:mod:`fleetdx.orchestrator.judgement.catalog`).

A finding is about a ``scope`` (a node, a GPU, a link, a NIC, a rank or the whole job), names every host it
is about in ``nodes`` (the first is where it happened), the ``rank`` and ``gpu`` when they are known, and what
inside them it is about in ``subject``. ``evidence`` lists the raw lines it rests on (file, 1-based line, text
as read: a log line, a kernel-log line, a row of a tool's output); ``details`` holds the figures and cells a
rule computed from them (typed JSON scalars, lists and flat objects), so a person can check it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import Field, model_validator

from fleetdx.orchestrator.judgement.catalog import spec
from fleetdx.orchestrator.judgement.codes import FindingCode, Scope
from fleetdx.probes.contracts import Contract, EvidenceValue, Severity


class EvidenceLine(Contract):
    """One raw line a finding rests on: the file as given (or the probe's output name), its 1-based line
    number (0 when the source has no lines), the text as read."""

    file: str
    line: int = Field(ge=0)
    text: str


class Finding(Contract):
    """One diagnosed fact of any job (see the module doc).

    ``nodes`` lists every host the finding is about, sorted as its producer gave them, the host where it
    happened first: one for a node finding, two or more for a pair or group (a slow pair, a hung collective),
    none for a job-wide one (a time limit). ``rank`` is the torch global rank, ``gpu`` the device as the
    evidence names it (``GPU3``, ``cuda:3``, ``PCI:0000:3b:00``); ``time`` ISO 8601 UTC when the stamp had a
    full date, else the stamp as printed. ``action`` says what to do (the catalog's when the producer gives
    none); ``scope`` defaults to the catalog's.

    Version-2 documents (``evidence`` a dict of figures, ``node`` for one host) are read and upgraded: the dict
    becomes ``details``.
    """

    code: FindingCode
    severity: Severity
    scope: Scope = Scope.JOB  #: filled from the catalog when not given (this default is never used)
    nodes: list[str] = Field(default_factory=list)
    rank: int | None = None
    gpu: str | None = None
    subject: str = ""
    message: str
    action: str = ""
    evidence: list[EvidenceLine] = Field(default_factory=list)
    time: str | None = None
    details: dict[str, EvidenceValue] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _upgrade_and_default(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "node" in data:
            node = data.pop("node")
            if "nodes" in data:
                raise ValueError("give either node or nodes, not both")
            data["nodes"] = [node] if node else []
        if isinstance(data.get("evidence"), dict):  # version 2: figures in ``evidence``
            if "details" in data:
                raise ValueError("a dict evidence (version 2) and details together")
            data["details"] = data.pop("evidence")
        if data.get("scope") is None or not data.get("action"):
            try:
                row = spec(FindingCode(data.get("code")))
            except ValueError:
                return data  # an unknown code: the field's own validation says so
            if data.get("scope") is None:
                data["scope"] = row.scope
            if not data.get("action"):
                data["action"] = row.action
        return data

    @property
    def node(self) -> str | None:
        """The host when the finding is about exactly one node, else ``None`` (job-wide or several)."""
        return self.nodes[0] if len(self.nodes) == 1 else None

    @property
    def host(self) -> str | None:
        """The host where it happened (the first of ``nodes``), ``None`` for a job-wide finding."""
        return self.nodes[0] if self.nodes else None


_SEVERITY_ORDER = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.UNKNOWN: 2, Severity.INFO: 3}


def severity_rank(s: Severity) -> int:
    """0 for critical, 1 warning, 2 unknown, 3 info: the report order of severities."""
    return _SEVERITY_ORDER[s]


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` in report order: most severe first (critical, warning, unknown, info), then by nodes
    (job-wide findings first), finding code and subject. Postmortem causes keep their own ranked order."""
    return sorted(findings, key=lambda f: (_SEVERITY_ORDER[f.severity], f.nodes, f.code.value, f.subject))
