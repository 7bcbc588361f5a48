"""A postmortem and fleetdx's store: the history of the hosts a postmortem blames, and the postmortem kept.

* :func:`with_history`: each host the causes name (the first cause's first) with its newest stored runs
  (pre-flights and bandwidth screens, ``Store.node_history``), so the report says whether the node was already
  degraded before the job, or whether a pre-flight passed it; and the busbw curves of the newest stored run
  of each that has any (:func:`fleetdx.orchestrator.postmortem.bandwidth.stored_curves`), after the bundles'.
* :func:`save`: the postmortem in the store's ``postmortems`` table (job id, verdict, first cause, the hosts its
  causes name, the whole report), never in ``findings``: its findings come from old logs and bundles, and
  a node's history must not show them as new pre-flight results.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from fleetdx.orchestrator.postmortem.bandwidth import stored_curves
from fleetdx.orchestrator.postmortem.contracts import PostmortemReport
from fleetdx.orchestrator.store import NodeHistory, PostmortemRecord

if TYPE_CHECKING:  # the store (SQLAlchemy) loads only when a store is opened
    from fleetdx.orchestrator.store import Store

#: how many hosts get their history (the causes' first ones), and how many runs each
HISTORY_HOSTS = 8
HISTORY_RUNS = 5


def blamed_hosts(report: PostmortemReport) -> list[str]:
    """The hosts the causes name, most likely cause first, each once."""
    hosts: dict[str, None] = {}
    for c in report.findings:
        for h in ([c.host] if c.host else []) + c.nodes:
            hosts.setdefault(h, None)
    return list(hosts)


def with_history(report: PostmortemReport, store: Store) -> PostmortemReport:
    """``report`` with the stored history of its first :data:`HISTORY_HOSTS` blamed hosts (hosts the store has
    never seen are left out), and their stored busbw curves added to its bandwidth. Raises the store's
    :class:`~fleetdx.orchestrator.store.StoreError`."""
    history = []
    for host in blamed_hosts(report)[:HISTORY_HOSTS]:
        entries = store.node_history(host, limit=HISTORY_RUNS)
        if entries:
            history.append(NodeHistory(host=host, entries=entries))
    curves = [*report.bandwidth, *stored_curves(store, history)]
    return report.model_copy(update={"history": history, "bandwidth": curves})


def save(report: PostmortemReport, store: Store) -> PostmortemRecord:
    """Keep ``report`` in the store (a new postmortem id, made now). Raises the store's ``StoreError``."""
    record = PostmortemRecord(
        postmortem_id=uuid.uuid4().hex,
        job_id=report.job.job_id if report.job else None,
        created_at=time.time(),
        verdict=report.verdict,
        first_cause=report.findings[0].code.value if report.findings else None,
        hosts=blamed_hosts(report),
    )
    store.save_postmortem(record, report.model_dump(mode="json"))
    return record
