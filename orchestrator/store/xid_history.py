"""Read-only query: each host's earlier GPU_XID findings in a window, as the XID rule reads them
(:class:`~fleetdx.probes.parsers.xid.XidHistory`, passed in ``NodeFacts.xid_history``).

Why: NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors) has the application XIDs (13, 31, 43) escalate
only when the same GPU raises them for several unrelated jobs (../shared/xid.md, cross-cutting rule 6). One
kernel log shows the jobs of the current boot only; the store keeps what earlier runs found. The query reads
the findings the store already has (no schema of its own): code ``GPU_XID`` naming the host, in runs started at
or after ``since``, with their ``details`` (``xid``, ``pci``, ``pids``). A finding without ``pids`` (stored
before they were recorded) counts as one job, its run.

Written as :mod:`fleetdx.orchestrator.store.node_health` writes its per-host history queries: one query per
chunk of :data:`~fleetdx.orchestrator.store.node_health.CHUNK` hosts.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.store.models import FindingNodeRow, FindingRow, NodeRow, RunRow
from fleetdx.orchestrator.store.node_health import CHUNK
from fleetdx.orchestrator.store.store import Store
from fleetdx.probes.parsers.xid import XidHistory, XidSighting


def _sighting(details: dict[str, Any] | None, run_id: str, at: float) -> XidSighting | None:
    """The sighting a stored GPU_XID finding's details give; ``None`` for details without an XID code or PCI
    address (nothing to match a GPU on)."""
    d = details or {}
    code, pci = d.get("xid"), d.get("pci")
    if not isinstance(code, int) or not isinstance(pci, str):
        return None
    pids = [p for p in (d.get("pids") or []) if isinstance(p, int)]
    return XidSighting(code=code, pci=pci, jobs=[f"pid:{p}" for p in pids], run_id=run_id, at=at)


def xid_history(store: Store, hosts: Collection[str], *, since: float) -> dict[str, XidHistory]:
    """host -> its :class:`XidHistory` since ``since`` (Unix seconds), for every host of ``hosts`` (a host
    without runs gets an empty one: the store was asked and knew nothing). Raises what every store read raises
    (:class:`~fleetdx.orchestrator.store.StoreError`, :class:`~fleetdx.orchestrator.store.DatabaseUnreachable`).
    """
    names = sorted(set(hosts))
    found: dict[str, list[XidSighting]] = {h: [] for h in names}
    runs: dict[str, int] = {}
    with store._errors(), Session(store.engine) as session:
        for i in range(0, len(names), CHUNK):
            chunk = names[i : i + CHUNK]
            for host, n in session.execute(
                select(NodeRow.host, func.count(func.distinct(NodeRow.run_pk)))
                .join(RunRow, NodeRow.run_pk == RunRow.id)
                .where(NodeRow.host.in_(chunk), RunRow.started_at >= since)
                .group_by(NodeRow.host)
            ):
                runs[host] = int(n)
            rows = session.execute(
                select(FindingNodeRow.host, FindingRow.details, RunRow.run_id, RunRow.started_at)
                .join(FindingRow, FindingNodeRow.finding_pk == FindingRow.id)
                .join(RunRow, FindingRow.run_pk == RunRow.id)
                .where(
                    FindingNodeRow.host.in_(chunk),
                    FindingRow.code == FindingCode.GPU_XID,
                    RunRow.started_at >= since,
                )
                .order_by(RunRow.started_at, FindingRow.run_pk, FindingRow.position)
            )
            for host, details, run_id, started in rows:
                s = _sighting(details, run_id, started)
                if s is not None:
                    found[host].append(s)
    return {h: XidHistory(host=h, since=since, runs=runs.get(h, 0), sightings=found[h]) for h in names}
