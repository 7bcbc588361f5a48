"""The judgement model shared by every job: one :class:`Finding`, one code catalog, one report envelope and its
assembler (:mod:`.codes`, :mod:`.catalog`, :mod:`.findings`, :mod:`.envelope`)."""

from fleetdx.orchestrator.judgement.codes import FindingCode, Scope
from fleetdx.orchestrator.judgement.findings import EvidenceLine, Finding, sort_findings

__all__ = ["EvidenceLine", "Finding", "FindingCode", "Scope", "sort_findings"]
