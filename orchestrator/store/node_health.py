"""Read-only queries for placement: each candidate node's latest verdict, its last clean pre-flight, its open
findings and how often it failed or straggled lately, in three queries for any number of hosts.

Definitions (the policy that uses them is :mod:`fleetdx.orchestrator.placement.policy`):

- *latest run* of a host: the run with the newest ``started_at`` that lists it as a node (ties: the run stored
  last), whatever its age or kind.
- *clean pre-flight*: a pre-flight run in which the host's verdict is OK or WARNING.
- *open findings*: findings naming the host (``Finding.nodes``) in runs started at or after
  ``max(its last clean pre-flight, open_since)``: the clean pre-flight's own findings are the node's current
  state; anything before it is cleared; nothing older than ``open_since`` counts.
- *failed pre-flights*: pre-flights since ``history_since`` in which the host's verdict was CRITICAL;
  *straggler runs*: runs since ``history_since`` with a finding of ``straggler_codes`` naming the host.

Simulated runs are included and flagged (``simulated``) so a demonstration over replayed bundles works; a
caller that wants real evidence only filters on the flag.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from pydantic import Field
from sqlalchemy import and_, case, func, select, union
from sqlalchemy.orm import Session

from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.report import RunKind
from fleetdx.orchestrator.store.models import FindingNodeRow, FindingRow, NodeRow, RawOutputRow, RunRow
from fleetdx.orchestrator.store.store import Store, _decompress
from fleetdx.probes.contracts import Contract, Severity, Verdict, VerdictName

#: hosts per IN (...) list: far below SQLite's (32766) and PostgreSQL's (65535) bind-parameter limits
CHUNK = 2000


class NodeRunRef(Contract):
    """A host's verdict in one run."""

    run_id: str
    kind: RunKind
    started_at: float
    verdict: VerdictName
    simulated: bool


class HostFinding(Contract):
    """An open finding about a host, without its evidence (the run holds it: ``fleetdx show RUN_ID``)."""

    code: FindingCode
    severity: Severity
    subject: str
    message: str
    run_id: str
    started_at: float
    simulated: bool
    hosts: int = 1  #: how many hosts the finding names (a pair finding: 2)


class NodeHealthRecord(Contract):
    """What the store knows of one host's health (see the module docstring for each definition).
    ``latest`` is ``None`` for a host no stored run lists."""

    host: str
    latest: NodeRunRef | None = None
    last_clean_preflight_at: float | None = None
    open_findings: list[HostFinding] = Field(default_factory=list)
    failed_preflights: int = 0
    straggler_runs: int = 0


def _chunks(items: Sequence[str]) -> Iterable[list[str]]:
    for i in range(0, len(items), CHUNK):
        yield list(items[i : i + CHUNK])


def node_health(
    store: Store,
    hosts: Collection[str],
    *,
    open_since: float,
    history_since: float,
    straggler_codes: Collection[FindingCode] = (FindingCode.STRAGGLER_NODE,),
) -> dict[str, NodeHealthRecord]:
    """One :class:`NodeHealthRecord` per host of ``hosts`` (hosts without runs get an empty one).

    Times are Unix seconds. Raises :class:`~fleetdx.orchestrator.store.StoreError` /
    :class:`~fleetdx.orchestrator.store.DatabaseUnreachable` as every store read does.
    """
    names = sorted(set(hosts))
    since = min(open_since, history_since)
    latest: dict[str, NodeRunRef] = {}
    last_clean: dict[str, float] = {}
    failed: dict[str, int] = {}
    straggled: dict[str, int] = {}
    found: dict[str, list[HostFinding]] = {h: [] for h in names}
    named = (
        select(func.count())
        .select_from(FindingNodeRow)
        .where(FindingNodeRow.finding_pk == FindingRow.id)
        .correlate(FindingRow)
        .scalar_subquery()
    )
    with store._errors(), Session(store.engine) as session:
        for chunk in _chunks(names):
            # the newest run of each host with its last clean pre-flight and failed pre-flights, among the
            # window's runs (cheap with a long history); then the newest run of hosts the window lacks
            for host, (ref, clean_at, n_failed) in _latest_runs(session, chunk, since, history_since).items():
                latest[host] = ref
                failed[host] = n_failed
                if clean_at is not None:
                    last_clean[host] = clean_at
            stale = [h for h in chunk if h not in latest]
            if stale:
                latest.update({h: v[0] for h, v in _latest_runs(session, stale, None, history_since).items()})
            for host, n_runs in session.execute(
                select(FindingNodeRow.host, func.count(func.distinct(FindingRow.run_pk)))
                .join(FindingRow, FindingNodeRow.finding_pk == FindingRow.id)
                .join(RunRow, FindingRow.run_pk == RunRow.id)
                .where(
                    FindingNodeRow.host.in_(chunk),
                    FindingRow.code.in_(list(straggler_codes)),
                    RunRow.started_at >= history_since,
                )
                .group_by(FindingNodeRow.host)
            ):
                straggled[host] = int(n_runs)
            rows = session.execute(
                select(
                    FindingNodeRow.host,
                    FindingRow.code,
                    FindingRow.severity,
                    FindingRow.subject,
                    FindingRow.message,
                    RunRow.run_id,
                    RunRow.started_at,
                    RunRow.simulated,
                    named,
                )
                .join(FindingRow, FindingNodeRow.finding_pk == FindingRow.id)
                .join(RunRow, FindingRow.run_pk == RunRow.id)
                .where(FindingNodeRow.host.in_(chunk), RunRow.started_at >= open_since)
                .order_by(RunRow.started_at, FindingRow.run_pk, FindingRow.position)
            )
            for host, code, sev, subject, message, run_id, started, simulated, n_hosts in rows:
                if started < last_clean.get(host, open_since):
                    continue  # cleared by a later clean pre-flight
                found[host].append(
                    HostFinding(
                        code=code,
                        severity=sev,
                        subject=subject,
                        message=message,
                        run_id=run_id,
                        started_at=started,
                        simulated=simulated,
                        hosts=n_hosts,
                    )
                )
    return {
        h: NodeHealthRecord(
            host=h,
            latest=latest.get(h),
            last_clean_preflight_at=last_clean.get(h),
            open_findings=found[h],
            failed_preflights=failed.get(h, 0),
            straggler_runs=straggled.get(h, 0),
        )
        for h in names
    }


def _latest_runs(
    session: Session, hosts: list[str], since: float | None, history_since: float
) -> dict[str, tuple[NodeRunRef, float | None, int]]:
    """Each host's newest run (``started_at``, then the run stored last) among runs started at or after
    ``since`` (all runs when ``None``), with, over the same runs, its last clean pre-flight's start and its
    CRITICAL pre-flights since ``history_since``. One GROUP BY joined back to the newest runs, not a window
    function: SQLite sorts every run of every host for ``row_number()``, which cost 2-3x more here."""
    preflight = RunRow.kind == RunKind.PREFLIGHT
    clean = and_(preflight, NodeRow.verdict.in_([Verdict.OK, Verdict.WARNING]))
    failing = and_(preflight, NodeRow.verdict == Verdict.CRITICAL, RunRow.started_at >= history_since)
    per_host = (
        select(
            NodeRow.host,
            func.max(RunRow.started_at).label("t"),
            func.max(case((clean, RunRow.started_at), else_=None)).label("clean_at"),
            func.sum(case((failing, 1), else_=0)).label("failed"),
        )
        .join(RunRow, NodeRow.run_pk == RunRow.id)
        .where(NodeRow.host.in_(hosts))
    )
    if since is not None:
        per_host = per_host.where(RunRow.started_at >= since)
    sub = per_host.group_by(NodeRow.host).subquery()
    cols = (RunRow.id, RunRow.run_id, RunRow.kind, RunRow.started_at, NodeRow.verdict, RunRow.simulated)
    rows = session.execute(
        select(NodeRow.host, *cols, sub.c.clean_at, sub.c.failed)
        .join(RunRow, NodeRow.run_pk == RunRow.id)
        .join(sub, and_(sub.c.host == NodeRow.host, sub.c.t == RunRow.started_at))
    )
    best: dict[str, tuple[int, tuple[NodeRunRef, float | None, int]]] = {}
    for host, pk, run_id, kind, t, verdict, simulated, clean_at, n_failed in rows:
        if host not in best or pk > best[host][0]:  # two runs started at the same instant: the one stored last
            ref = NodeRunRef(run_id=run_id, kind=kind, started_at=t, verdict=verdict, simulated=simulated)
            best[host] = (pk, (ref, None if clean_at is None else float(clean_at), int(n_failed or 0)))
    return {h: v for h, (_, v) in best.items()}


def latest_raw(store: Store, hosts: Collection[str], files: Collection[str]) -> dict[str, dict[str, str]]:
    """For each host, the newest stored raw output of each of ``files`` (bundle file names such as
    ``nvidia-smi_topo_-m.txt``): host -> file name -> text, decompressed and checked as
    :meth:`Store.get_raw` does. A host or file never stored is absent."""
    names = sorted(set(hosts))
    out: dict[str, dict[str, str]] = {}
    with store._errors(), Session(store.engine) as session:
        for chunk in _chunks(names):
            rn = (
                func.row_number()
                .over(
                    partition_by=(RawOutputRow.host, RawOutputRow.file_name),
                    order_by=(RunRow.started_at.desc(), RunRow.id.desc()),
                )
                .label("rn")
            )
            inner = (
                select(RawOutputRow.id, rn)
                .join(RunRow, RawOutputRow.run_pk == RunRow.id)
                .where(RawOutputRow.host.in_(chunk), RawOutputRow.file_name.in_(list(files)))
                .subquery()
            )
            rows = session.scalars(
                select(RawOutputRow).where(RawOutputRow.id.in_(select(inner.c.id).where(inner.c.rn == 1)))
            )
            for row in rows:
                out.setdefault(row.host, {})[row.file_name] = _decompress(row)
    return out


def hosts_named_after(store: Store, run_pk: int) -> set[str]:
    """The hosts that runs stored after the run of primary key ``run_pk`` list as nodes, name in a finding or
    hold raw outputs of: the only hosts whose stored health those runs can change (one query, on indexed
    ``run_pk`` columns). Raises :class:`~fleetdx.orchestrator.store.StoreError` as every store read does."""
    named = union(
        select(NodeRow.host).where(NodeRow.run_pk > run_pk),
        select(RawOutputRow.host).where(RawOutputRow.run_pk > run_pk),
        select(FindingNodeRow.host)
        .join(FindingRow, FindingNodeRow.finding_pk == FindingRow.id)
        .where(FindingRow.run_pk > run_pk),
    )
    with store._errors(), Session(store.engine) as session:
        return set(session.scalars(select(named.subquery().c[0])))
