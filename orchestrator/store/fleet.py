"""The fleet's state as the store knows it: each node's latest verdict, its open findings, the time of its last
pre-flight, every stored finding counted by code and severity, each node's state (ok, suspect, quarantined,
retesting, returned) and the retests that passed and failed. What ``GET /metrics`` exposes.

Everything is read from the database on each call (never cached in a process), so several stateless API
workers over one PostgreSQL database report the same figures. Simulated runs (``RunReport.simulated``: nodes
replaying bundles) are left out: their hosts are bundle names and nothing in them was measured.

"Latest" is the run with the newest ``started_at`` among the runs that list the node (ties: the run stored
last); "open" findings are those of that latest run that name the node (``Finding.nodes``), pair and group
findings included.
"""

from __future__ import annotations

from pydantic import Field
from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from fleetdx.orchestrator.diagnosis.node_states import NodeState, RetestResult
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.report import RunKind
from fleetdx.orchestrator.store.models import (
    FindingNodeRow,
    FindingRow,
    NodeRow,
    NodeStateRow,
    NodeTransitionRow,
    RunRow,
)
from fleetdx.orchestrator.store.store import Store
from fleetdx.probes.contracts import Contract, Severity, VerdictName


class NodeLatest(Contract):
    """A node's verdict in its latest (non-simulated) run; times are Unix seconds."""

    host: str
    verdict: VerdictName
    run_id: str
    kind: RunKind
    finished_at: float


class NodeFindingCount(Contract):
    """How many findings of ``code`` and ``severity`` name ``host`` in its latest run."""

    host: str
    code: FindingCode
    severity: Severity
    count: int


class FindingCount(Contract):
    """How many stored findings (all non-simulated runs) have this ``code`` and ``severity``."""

    code: FindingCode
    severity: Severity
    count: int


class NodeStateNow(Contract):
    """A node's state (:mod:`fleetdx.orchestrator.diagnosis.node_states`) and the Unix time of its last
    transition."""

    host: str
    state: NodeState
    since: float


class FleetState(Contract):
    """The fleet at one instant: ``nodes`` sorted by host, ``last_preflight`` host -> Unix time its newest
    pre-flight finished, ``open_findings`` per node, ``findings`` over all stored runs, ``states`` each known
    node's state (sorted by host), ``retests`` how many retests passed and failed over the whole history."""

    nodes: list[NodeLatest]
    last_preflight: dict[str, float]
    open_findings: list[NodeFindingCount]
    findings: list[FindingCount]
    states: list[NodeStateNow] = Field(default_factory=list)
    retests: dict[RetestResult, int] = Field(default_factory=dict)


def fleet_state(store: Store) -> FleetState:
    """Read the fleet's state in one read transaction (six queries, one pass over the node rows each).
    Raises :class:`~fleetdx.orchestrator.store.DatabaseUnreachable` / ``StoreError`` like every store read."""
    rank = (
        func.row_number()
        .over(partition_by=NodeRow.host, order_by=(RunRow.started_at.desc(), RunRow.id.desc()))
        .label("rank")
    )
    ranked = (
        select(
            NodeRow.host,
            NodeRow.verdict,
            NodeRow.run_pk,
            RunRow.run_id,
            RunRow.kind,
            RunRow.finished_at,
            rank,
        )
        .join(RunRow, NodeRow.run_pk == RunRow.id)
        .where(RunRow.simulated.is_(False))
        .subquery()
    )
    latest_stmt = (
        select(ranked.c.host, ranked.c.verdict, ranked.c.run_id, ranked.c.kind, ranked.c.finished_at)
        .where(ranked.c.rank == 1)
        .order_by(ranked.c.host)
    )
    open_stmt = (
        select(ranked.c.host, FindingRow.code, FindingRow.severity, func.count())
        .join(FindingRow, FindingRow.run_pk == ranked.c.run_pk)
        .join(
            FindingNodeRow,
            and_(FindingNodeRow.finding_pk == FindingRow.id, FindingNodeRow.host == ranked.c.host),
        )
        .where(ranked.c.rank == 1)
        .group_by(ranked.c.host, FindingRow.code, FindingRow.severity)
        .order_by(ranked.c.host, FindingRow.code, FindingRow.severity)
    )
    preflight_stmt = (
        select(NodeRow.host, func.max(RunRow.finished_at))
        .join(RunRow, NodeRow.run_pk == RunRow.id)
        .where(RunRow.kind == RunKind.PREFLIGHT, RunRow.simulated.is_(False))
        .group_by(NodeRow.host)
    )
    totals_stmt = (
        select(FindingRow.code, FindingRow.severity, func.count())
        .join(RunRow, FindingRow.run_pk == RunRow.id)
        .where(RunRow.simulated.is_(False))
        .group_by(FindingRow.code, FindingRow.severity)
        .order_by(FindingRow.code, FindingRow.severity)
    )
    states_stmt = select(NodeStateRow.host, NodeStateRow.state, NodeStateRow.since).order_by(NodeStateRow.host)
    retests_stmt = (
        select(NodeTransitionRow.retest, func.count())
        .where(NodeTransitionRow.retest.is_not(None))
        .group_by(NodeTransitionRow.retest)
    )
    with store._errors(), Session(store.engine) as session, session.begin():
        nodes = [
            NodeLatest(host=h, verdict=v, run_id=r, kind=k, finished_at=t)
            for h, v, r, k, t in session.execute(latest_stmt)
        ]
        open_findings = [
            NodeFindingCount(host=h, code=c, severity=s, count=n) for h, c, s, n in session.execute(open_stmt)
        ]
        last_preflight = {h: float(t) for h, t in session.execute(preflight_stmt)}
        findings = [FindingCount(code=c, severity=s, count=n) for c, s, n in session.execute(totals_stmt)]
        states = [NodeStateNow(host=h, state=st, since=t) for h, st, t in session.execute(states_stmt)]
        done = {RetestResult(r): int(n) for r, n in session.execute(retests_stmt)}
    return FleetState(
        nodes=nodes,
        last_preflight=last_preflight,
        open_findings=open_findings,
        findings=findings,
        states=states,
        retests={r: done.get(r, 0) for r in RetestResult},
    )
