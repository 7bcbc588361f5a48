"""The judgement model shared by every job: one :class:`Finding`, one code catalog, one report envelope and its
assembler (:mod:`.findings`, :mod:`.catalog`, :mod:`.envelope`)."""

from fleetdx.orchestrator.judgement.findings import EvidenceLine, Finding, FindingCode, Scope, sort_findings

__all__ = ["EvidenceLine", "Finding", "FindingCode", "Scope", "sort_findings"]
