"""The one writer of a stored run's rows, without SQLAlchemy: what each table gets for a
:class:`~fleetdx.orchestrator.report.RunReport` (and how the run moves its nodes' states), written through a
:class:`Sink`, the few operations a database must offer.

Two sinks run it: the :class:`~fleetdx.orchestrator.store.store.Store`'s (SQLAlchemy Core bulk inserts on
SQLite or PostgreSQL: the service's batches, imports, saves) and :mod:`fleetdx.orchestrator.store.direct`'s
(the standard library's ``sqlite3``, for a prolog's save into an SQLite file whose schema is current: no
SQLAlchemy to import). Rows are plain dicts of the values as stored: an enum as its value (a
:class:`~fleetdx.probes.contracts.Verdict` as its name, as ``models.VerdictColumn`` stores it), a JSON column
(:data:`JSON_COLUMNS`) as its Python value for the sink to encode. Each table's rows are inserted in the
order the ORM's unit of work inserted them before this writer (a run's nodes, then each node's probes, ...),
so the surrogate keys come out the same; tests/test_store_rows.py saves the same reports both ways and
compares every table.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from fleetdx.orchestrator.diagnosis.node_states import (
    CheckEvent,
    Event,
    NodeState,
    NodeStatus,
    StepResult,
    Transition,
    step,
)
from fleetdx.orchestrator.report import RunKind
from fleetdx.probes.contracts import Severity, Verdict

if TYPE_CHECKING:
    from fleetdx.orchestrator.notify import Event as NotifyEvent
    from fleetdx.orchestrator.report import RunReport

Row = dict[str, Any]
Raw = Mapping[str, Mapping[str, str]]

RAW_ENCODING = "zlib"
#: the columns of JSON type (``models``), by table: a sink encodes their values (tests check the list)
JSON_COLUMNS: dict[str, frozenset[str]] = {
    "runs": frozenset({"job"}),
    "findings": frozenset({"evidence", "details"}),
    "recommendations": frozenset({"data"}),
    "busbw_curves": frozenset({"nodes", "points"}),
}


class Sink(Protocol):
    """What the writer needs of a database, inside one write transaction the caller opened (and commits)."""

    def insert(self, table: str, rows: Sequence[Row]) -> None:
        """Insert ``rows`` (all with the same keys) into ``table``, in order."""

    def insert_ids(self, table: str, rows: Sequence[Row]) -> list[int]:
        """Insert ``rows`` into ``table`` in order; their generated ``id`` values, in the same order."""

    def stored_run_ids(self, run_ids: Sequence[str]) -> set[str]:
        """Which of ``run_ids`` are stored already."""

    def node_states(self, hosts: Sequence[str]) -> dict[str, Row]:
        """The ``node_states`` rows of ``hosts`` (those that have one), locked against other writers until
        the transaction ends (``SELECT ... FOR UPDATE`` on PostgreSQL; an SQLite writer holds the lock)."""

    def update_node_states(self, rows: Sequence[Row]) -> None:
        """Rewrite the ``node_states`` rows of these hosts (every column; ``host`` is the key)."""

    def after_commit(self, events: Sequence[NotifyEvent]) -> None:
        """Send ``events`` (:func:`fleetdx.orchestrator.notify.notify`) once the transaction commits; never if
        it rolls back."""


def _value(v: Enum | None) -> Any:
    """An enum column's stored value: its value (a str enum), ``None`` as NULL."""
    return None if v is None else v.value


def write_runs(sink: Sink, items: Sequence[tuple[RunReport, Raw | None]], flap_window_s: float) -> list[bool]:
    """Write every run of ``items`` not stored yet (the runs' rows, then their nodes' states, in the order of
    ``items``); per item, whether it was written (False: its ``run_id`` is stored already, or earlier in
    ``items``). Hosts must be unique within a report (the store checks)."""
    seen = sink.stored_run_ids([report.run_id for report, _raw in items])
    inserted: list[bool] = []
    new: list[tuple[RunReport, Raw]] = []
    for report, raw in items:
        fresh = report.run_id not in seen
        inserted.append(fresh)
        if fresh:
            seen.add(report.run_id)
            new.append((report, raw or {}))
    if new:
        _insert_rows(sink, new)
        apply_runs(sink, [report for report, _raw in new], flap_window_s)
    return inserted


def _insert_rows(sink: Sink, runs: Sequence[tuple[RunReport, Raw]]) -> None:
    run_pks = sink.insert_ids("runs", [_run_row(report) for report, _raw in runs])
    nodes: list[Row] = []
    for pk, (report, _raw) in zip(run_pks, runs, strict=True):
        nodes += [
            {"run_pk": pk, "position": i, "host": n.host, "verdict": n.verdict.name, "unjudged": n.unjudged}
            for i, n in enumerate(report.nodes)
        ]
    node_pks = sink.insert_ids("nodes", nodes) if nodes else []
    probes = [n.probes for report, _raw in runs for n in report.nodes]
    _insert(
        sink,
        "probe_results",
        [
            {
                "node_pk": pk,
                "position": i,
                "name": p.name,
                "status": p.status.value,
                "duration_s": p.duration_s,
                "error": p.error,
            }
            for pk, node_probes in zip(node_pks, probes, strict=True)
            for i, p in enumerate(node_probes)
        ],
    )
    # host by host: a lazy ``raw`` (PreflightResult.raw of analyze) holds one host's text at a time
    _insert(
        sink,
        "raw_outputs",
        [
            raw_row(pk, host, name, text)
            for pk, (_report, raw) in zip(run_pks, runs, strict=True)
            for host in sorted(raw)
            for name, text in sorted(raw[host].items())
        ],
    )
    findings = [
        (pk, i, f) for pk, (report, _raw) in zip(run_pks, runs, strict=True) for i, f in enumerate(report.findings)
    ]
    finding_pks = sink.insert_ids("findings", [_finding_row(pk, i, f) for pk, i, f in findings]) if findings else []
    _insert(
        sink,
        "finding_nodes",
        [
            {"finding_pk": fpk, "position": i, "host": h}
            for fpk, (_pk, _i, f) in zip(finding_pks, findings, strict=True)
            for i, h in enumerate(f.nodes)
        ],
    )
    _insert(
        sink,
        "recommendations",
        [
            {
                "run_pk": pk,
                "position": i,
                "node": r.node,
                "kind": r.kind.value,
                "subject": r.subject,
                "message": r.message,
                "data": r.model_dump(mode="json")["data"],
            }
            for pk, (report, _raw) in zip(run_pks, runs, strict=True)
            for i, r in enumerate(report.recommendations)
        ],
    )
    curves = [(pk, i, c) for pk, (report, _raw) in zip(run_pks, runs, strict=True) for i, c in enumerate(report.curves)]
    curve_pks = sink.insert_ids("busbw_curves", [_curve_row(pk, i, c) for pk, i, c in curves]) if curves else []
    _insert(
        sink,
        "busbw_curve_nodes",
        [
            {"curve_pk": cpk, "host": h}
            for cpk, (_pk, _i, c) in zip(curve_pks, curves, strict=True)
            for h in dict.fromkeys(c.nodes)
        ],
    )


def _insert(sink: Sink, table: str, rows: list[Row]) -> None:
    if rows:
        sink.insert(table, rows)


def _run_row(report: RunReport) -> Row:
    return {
        "run_id": report.run_id,
        "schema_version": report.schema_version,
        "kind": report.kind.value,
        "started_at": report.started_at,
        "finished_at": report.finished_at,
        "level": _value(report.level),
        "schedule": _value(report.schedule),
        "verdict": report.verdict.name,
        "exit_code": report.exit_code,
        "simulated": report.simulated,
        "exclude": report.exclude,
        "job_id": report.job.job_id if report.job else None,
        "job": report.job.model_dump(mode="json") if report.job else None,
    }


def raw_row(run_pk: int, host: str, file_name: str, text: str) -> Row:
    """The ``raw_outputs`` row of one raw text: zlib (RFC 1950, level 6) of its UTF-8, its size in bytes and
    sha256 hex digest of the uncompressed bytes, for the reader to check."""
    data = text.encode("utf-8")
    return {
        "run_pk": run_pk,
        "host": host,
        "file_name": file_name,
        "encoding": RAW_ENCODING,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "data": zlib.compress(data, 6),
    }


def _finding_row(run_pk: int, position: int, f: Any) -> Row:
    data = f.model_dump(mode="json", include={"evidence", "details"})
    return {
        "run_pk": run_pk,
        "position": position,
        "code": f.code.value,
        "severity": f.severity.value,
        "subject": f.subject,
        "message": f.message,
        "evidence": data["evidence"],
        "scope": f.scope.value,
        "rank": f.rank,
        "gpu": f.gpu,
        "action": f.action,
        "time": f.time,
        "details": data["details"],
    }


def _curve_row(run_pk: int, position: int, c: Any) -> Row:
    peak = max(c.points, key=lambda p: p.busbw_gbps, default=None)
    return {
        "run_pk": run_pk,
        "position": position,
        "collective": c.collective.value,
        "nranks": c.nranks,
        "backend": c.backend.value,
        "nodes": list(c.nodes),
        "points": [p.model_dump(mode="json") for p in c.points],
        "peak_busbw_gbps": None if peak is None else peak.busbw_gbps,
        "peak_size": None if peak is None else peak.size,
    }


# -- node states -------------------------------------------------------------------------------------------
def _cause(report: RunReport, host: str, verdict: Verdict, unjudged: str | None) -> tuple[str | None, str | None]:
    """The first finding naming ``host`` at the node's verdict's severity, as ``"CODE subject"``, and its code;
    for a node with no verdict, why (``NodeReport.unjudged``) when no UNKNOWN finding says it."""
    want = {Verdict.CRITICAL: Severity.CRITICAL, Verdict.UNKNOWN: Severity.UNKNOWN}.get(verdict)
    for f in report.findings:
        if want is not None and f.severity is want and host in f.nodes:
            subject = f.subject if f.subject not in ("", "node") else ""
            return f"{f.code.value} {subject}".strip(), f.code.value
    if verdict is Verdict.UNKNOWN:
        return f"no verdict: {unjudged}" if unjudged else "no verdict", None
    return None, None


def apply_runs(sink: Sink, reports: Sequence[RunReport], flap_window_s: float) -> None:
    """Move every node of the stored pre-flights ``reports`` by its verdict, in order (nothing for another
    kind, or a simulated run)."""
    events: list[tuple[str, Event]] = []
    for report in reports:
        if report.kind is not RunKind.PREFLIGHT or report.simulated:
            continue
        for node in report.nodes:
            cause, code = _cause(report, node.host, node.verdict, node.unjudged)
            event = CheckEvent(
                at=report.finished_at,
                run_id=report.run_id,
                verdict=node.verdict,
                level=report.level,
                cause=cause,
                code=code,
            )
            events.append((node.host, event))
    if events:
        apply_events(sink, events, flap_window_s)


def apply_events(sink: Sink, events: Sequence[tuple[str, Event]], flap_window_s: float) -> list[StepResult]:
    """Move each host by its event, in order, inside the sink's transaction: read the hosts' states (one query,
    locked), :func:`step` each event, write each changed host's final state and every transition. A node
    newly quarantined sends a ``node.quarantined`` webhook event once the transaction commits. Returns what
    :func:`step` decided for each event."""
    hosts = list(dict.fromkeys(host for host, _event in events))
    stored = {host: NodeStatus.model_validate(row) for host, row in sink.node_states(sorted(hosts)).items()}
    current: dict[str, NodeStatus] = dict(stored)
    results: list[StepResult] = []
    transitions: list[Transition] = []
    for host, event in events:
        result = step(current.get(host), host, event, flap_window_s=flap_window_s)
        results.append(result)
        if result.transition is not None and result.status is not None:
            current[host] = result.status
            transitions.append(result.transition)
    changed = [h for h in hosts if current.get(h) is not stored.get(h)]
    _insert(sink, "node_states", [_state_row(current[h]) for h in changed if h not in stored])
    updates = [_state_row(current[h]) for h in changed if h in stored]
    if updates:
        sink.update_node_states(updates)
    _insert(sink, "node_transitions", [_transition_row(t) for t in transitions])
    quarantined = [
        (t, r.status)
        for r in results
        if (t := r.transition) is not None
        and r.status is not None
        and t.to_state is NodeState.QUARANTINED
        and t.from_state is not NodeState.QUARANTINED
    ]
    if quarantined:
        sink.after_commit(_quarantine_events(quarantined))
    return results


def _state_row(s: NodeStatus) -> Row:
    return {
        "host": s.host,
        "state": s.state.value,
        "since": s.since,
        "reason": s.reason,
        "by": s.by.value,
        "run_id": s.run_id,
        "code": s.code,
        "level": _value(s.level),
        "held": s.held,
        "returned_at": s.returned_at,
    }


def _transition_row(t: Transition) -> Row:
    return {
        "host": t.host,
        "from_state": _value(t.from_state),
        "to_state": t.to_state.value,
        "at": t.at,
        "reason": t.reason,
        "by": t.by.value,
        "run_id": t.run_id,
        "retest": _value(t.retest),
    }


def _quarantine_events(done: Sequence[tuple[Transition, NodeStatus]]) -> list[NotifyEvent]:
    from fleetdx.orchestrator.notify import Event as NotifyEvent
    from fleetdx.orchestrator.notify import EventKind

    return [
        NotifyEvent(
            kind=EventKind.NODE_QUARANTINED,
            summary=f"{t.host} quarantined by {t.by.value}: {t.reason}",
            hosts=[t.host],
            codes=[status.code] if status.code else [],
            run_id=t.run_id,
            time=t.at,
            details={"from_state": t.from_state.value if t.from_state else None, "held": status.held},
        )
        for t, status in done
    ]
