"""The fleetdx store: runs, nodes, probe results with their raw outputs, findings, recommendations and busbw
curves in SQLite (default) or PostgreSQL, plus the spool that keeps a report when the database is down.

Public API: :class:`Store` (``Store.open(url)``), :func:`save_or_spool` / :class:`SaveOutcome`,
:func:`import_spool_file`, the read-side records and the errors. Names are imported when first used (PEP 562):
SQLAlchemy and the ORM (about 0.35 s of CPU) load with :class:`Store`, not with the spool writer a prolog uses
(:func:`write_spool`, ``fleetdx preflight --spool``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetdx.orchestrator.report import NodeHistory, NodeHistoryEntry
    from fleetdx.orchestrator.store.errors import DatabaseUnreachable, SchemaOutdated, SpoolError, StoreError
    from fleetdx.orchestrator.store.records import (
        BusbwHistoryPoint,
        FindingRecord,
        ImportResult,
        LiveJobRecord,
        PostmortemRecord,
        RunSummary,
        StepAnalysisRecord,
    )
    from fleetdx.orchestrator.store.spool import (
        SaveOutcome,
        SpoolFile,
        import_spool_file,
        read_spool,
        save_or_spool,
        write_spool,
    )
    from fleetdx.orchestrator.store.store import RunNotFound, Store

#: public name -> the module that defines it
_WHERE = {
    "NodeHistory": "fleetdx.orchestrator.report",
    "NodeHistoryEntry": "fleetdx.orchestrator.report",
    "DatabaseUnreachable": "fleetdx.orchestrator.store.errors",
    "SchemaOutdated": "fleetdx.orchestrator.store.errors",
    "SpoolError": "fleetdx.orchestrator.store.errors",
    "StoreError": "fleetdx.orchestrator.store.errors",
    "BusbwHistoryPoint": "fleetdx.orchestrator.store.records",
    "FindingRecord": "fleetdx.orchestrator.store.records",
    "ImportResult": "fleetdx.orchestrator.store.records",
    "PostmortemRecord": "fleetdx.orchestrator.store.records",
    "LiveJobRecord": "fleetdx.orchestrator.store.records",
    "StepAnalysisRecord": "fleetdx.orchestrator.store.records",
    "RunSummary": "fleetdx.orchestrator.store.records",
    "SaveOutcome": "fleetdx.orchestrator.store.spool",
    "SpoolFile": "fleetdx.orchestrator.store.spool",
    "import_spool_file": "fleetdx.orchestrator.store.spool",
    "read_spool": "fleetdx.orchestrator.store.spool",
    "save_or_spool": "fleetdx.orchestrator.store.spool",
    "write_spool": "fleetdx.orchestrator.store.spool",
    "RunNotFound": "fleetdx.orchestrator.store.store",
    "Store": "fleetdx.orchestrator.store.store",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "BusbwHistoryPoint",
    "DatabaseUnreachable",
    "FindingRecord",
    "ImportResult",
    "NodeHistory",
    "NodeHistoryEntry",
    "PostmortemRecord",
    "LiveJobRecord",
    "StepAnalysisRecord",
    "RunNotFound",
    "RunSummary",
    "SaveOutcome",
    "SchemaOutdated",
    "SpoolError",
    "SpoolFile",
    "Store",
    "StoreError",
    "import_spool_file",
    "read_spool",
    "save_or_spool",
    "write_spool",
]
