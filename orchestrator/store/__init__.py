"""The fleetdx store: runs, nodes, probe results with their raw outputs, findings, recommendations and busbw
curves in SQLite (default) or PostgreSQL, plus the spool that keeps a report when the database is down.

Public API: :class:`Store` (``Store.open(url)``), :func:`save_or_spool` / :class:`SaveOutcome`,
:func:`import_spool_file`, the read-side records and the errors. SQLAlchemy is imported only when this
package is.
"""

from __future__ import annotations

from fleetdx.orchestrator.report import NodeHistory, NodeHistoryEntry
from fleetdx.orchestrator.store.errors import DatabaseUnreachable, SchemaOutdated, SpoolError, StoreError
from fleetdx.orchestrator.store.records import (
    BusbwHistoryPoint,
    FindingRecord,
    ImportResult,
    PostmortemRecord,
    RunSummary,
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

__all__ = [
    "BusbwHistoryPoint",
    "DatabaseUnreachable",
    "FindingRecord",
    "ImportResult",
    "NodeHistory",
    "NodeHistoryEntry",
    "PostmortemRecord",
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
