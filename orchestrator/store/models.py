"""The relational schema of the store (SQLAlchemy 2 typed ORM). The Alembic migrations in ``migrations/``
create exactly this schema; ``tests/test_migrations.py`` fails when the two drift apart.

Tables (one run has many nodes, raw outputs, findings, recommendations and curves; one node has many
probe results)::

    runs ─┬─ nodes ── probe_results         status, duration of each probe on that node
          ├─ raw_outputs                    each node's raw tool output, zlib-compressed, size and sha256
          ├─ findings ── finding_nodes      one diagnosed fact (code, severity, subject, evidence) and,
          │                                 in order, every host it is about (none for a run-wide one)
          ├─ recommendations                placement advice
          └─ busbw_curves ── busbw_curve_nodes   busbw-vs-size curves, indexed by the nodes they ran on

    node_states                                 each node's current state (ok, suspect, quarantined, ...)
    node_transitions                            every change of it: the history behind the lemon score

Enums are stored as their names/values in VARCHAR columns without CHECK constraints, so adding a
:class:`~fleetdx.orchestrator.judgement.FindingCode` never needs a migration. Times are Unix seconds (float), as in
:class:`~fleetdx.orchestrator.report.RunReport`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Enum,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from fleetdx.orchestrator.diagnosis.node_states import Actor, NodeState, RetestResult
from fleetdx.orchestrator.judgement import FindingCode
from fleetdx.orchestrator.report import CurveBackend, RecommendationKind, RunKind, Schedule
from fleetdx.probes.contracts import Collective, Level, RunStatus, Severity, Verdict

#: constraint names fixed by convention, so migrations are reproducible on SQLite and PostgreSQL
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _values(enum_cls: type[Any]) -> list[str]:
    return [str(m.value) for m in enum_cls]


def _str_enum(enum_cls: type[Any], length: int) -> Enum:
    """A str-valued enum stored as its value in a VARCHAR(length), no CHECK constraint."""
    return Enum(enum_cls, native_enum=False, create_constraint=False, length=length, values_callable=_values)


#: Verdict is an IntEnum; it is stored as its name ("CRITICAL"), as the JSON contracts print it
VerdictColumn = Enum(Verdict, native_enum=False, create_constraint=False, length=16)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class RunRow(Base):
    """One pre-flight, analyze or bandwidth run (a :class:`~fleetdx.orchestrator.report.RunReport`)."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64), unique=True)
    schema_version: Mapped[int] = mapped_column(Integer)
    kind: Mapped[RunKind] = mapped_column(_str_enum(RunKind, 16))
    started_at: Mapped[float] = mapped_column(Float, index=True)
    finished_at: Mapped[float] = mapped_column(Float)
    level: Mapped[Level | None] = mapped_column(_str_enum(Level, 16))  #: a pre-flight's probe level
    schedule: Mapped[Schedule | None] = mapped_column(_str_enum(Schedule, 16))  #: a bandwidth run's schedule
    verdict: Mapped[Verdict] = mapped_column(VerdictColumn)
    exit_code: Mapped[int] = mapped_column(Integer)
    simulated: Mapped[bool] = mapped_column(Boolean)
    exclude: Mapped[str] = mapped_column(Text)
    job_id: Mapped[str | None] = mapped_column(String(128), index=True)  #: RunReport.job.job_id
    job: Mapped[dict[str, Any] | None] = mapped_column(JSON)  #: RunReport.job as a JSON document

    nodes: Mapped[list[NodeRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="NodeRow.position"
    )
    findings: Mapped[list[FindingRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="FindingRow.position"
    )
    recommendations: Mapped[list[RecommendationRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="RecommendationRow.position"
    )
    curves: Mapped[list[CurveRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="CurveRow.position"
    )
    raw_outputs: Mapped[list[RawOutputRow]] = relationship(back_populates="run", cascade="all, delete-orphan")


class NodeRow(Base):
    """One node in one run, with its node verdict."""

    __tablename__ = "nodes"
    __table_args__ = (UniqueConstraint("run_pk", "host", name="uq_nodes_run_pk_host"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)  #: index in RunReport.nodes
    host: Mapped[str] = mapped_column(String(255), index=True)
    verdict: Mapped[Verdict] = mapped_column(VerdictColumn)
    unjudged: Mapped[str | None] = mapped_column(Text)  #: why the node could not be judged (NodeReport.unjudged)

    run: Mapped[RunRow] = relationship(back_populates="nodes")
    probes: Mapped[list[ProbeResultRow]] = relationship(
        back_populates="node", cascade="all, delete-orphan", order_by="ProbeResultRow.position"
    )


class ProbeResultRow(Base):
    """How one probe went on one node (a :class:`~fleetdx.orchestrator.report.ProbeSummary`)."""

    __tablename__ = "probe_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_pk: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(255))
    status: Mapped[RunStatus] = mapped_column(_str_enum(RunStatus, 32))
    duration_s: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)

    node: Mapped[NodeRow] = relationship(back_populates="probes")


class RawOutputRow(Base):
    """One raw tool output (a bundle file) of one host in one run, zlib-compressed UTF-8.

    Keyed by host name rather than by node row, so a bundle is kept even for a host the report does not
    list as a node. ``size`` is the length in bytes of the uncompressed UTF-8 text and ``sha256`` its hex
    digest, so a reader can verify what it decompressed.
    """

    __tablename__ = "raw_outputs"
    __table_args__ = (UniqueConstraint("run_pk", "host", "file_name", name="uq_raw_outputs_run_pk_host_file_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    host: Mapped[str] = mapped_column(String(255), index=True)
    file_name: Mapped[str] = mapped_column(String(255))
    encoding: Mapped[str] = mapped_column(String(16))  #: "zlib" (RFC 1950) of UTF-8 text
    size: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    data: Mapped[bytes] = mapped_column(LargeBinary)

    run: Mapped[RunRow] = relationship(back_populates="raw_outputs")


class FindingRow(Base):
    """One :class:`~fleetdx.orchestrator.judgement.Finding` of a run. The hosts it is about (``Finding.nodes``) are
    its :class:`FindingNodeRow` rows, in order: a host's findings are found through ``finding_nodes.host``,
    so a pair or group finding is found from each of its hosts."""

    __tablename__ = "findings"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    code: Mapped[FindingCode] = mapped_column(_str_enum(FindingCode, 64), index=True)
    severity: Mapped[Severity] = mapped_column(_str_enum(Severity, 16))
    subject: Mapped[str] = mapped_column(String(255))
    message: Mapped[str] = mapped_column(Text)
    #: the raw lines (schema 3, a list of {file, line, text}); migration 0006 moved older rows' figures to details
    evidence: Mapped[Any] = mapped_column(JSON)
    scope: Mapped[str | None] = mapped_column(String(16))  #: NULL: the catalog's
    rank: Mapped[int | None] = mapped_column(Integer)
    gpu: Mapped[str | None] = mapped_column(String(255))
    action: Mapped[str | None] = mapped_column(Text)  #: NULL: the catalog's
    time: Mapped[str | None] = mapped_column(String(64))
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    run: Mapped[RunRow] = relationship(back_populates="findings")
    hosts: Mapped[list[FindingNodeRow]] = relationship(
        back_populates="finding", cascade="all, delete-orphan", order_by="FindingNodeRow.position"
    )


class FindingNodeRow(Base):
    """One host a finding is about: ``position`` is its index in ``Finding.nodes`` (the order is kept)."""

    __tablename__ = "finding_nodes"

    finding_pk: Mapped[int] = mapped_column(ForeignKey("findings.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str] = mapped_column(String(255), index=True)

    finding: Mapped[FindingRow] = relationship(back_populates="hosts")


class RecommendationRow(Base):
    """One :class:`~fleetdx.orchestrator.report.Recommendation` of a run."""

    __tablename__ = "recommendations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    node: Mapped[str | None] = mapped_column(String(255))
    kind: Mapped[RecommendationKind] = mapped_column(_str_enum(RecommendationKind, 64))
    subject: Mapped[str] = mapped_column(String(255))
    message: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)

    run: Mapped[RunRow] = relationship(back_populates="recommendations")


class CurveRow(Base):
    """One :class:`~fleetdx.orchestrator.report.BusbwCurve`. ``points`` is the list of points as the contract dumps
    them (size in bytes, time in µs, algbw/busbw in GB/s = 1e9 B/s); ``peak_busbw_gbps`` and
    ``peak_size`` (bytes) are the point of highest busbw, kept as columns for history queries."""

    __tablename__ = "busbw_curves"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    collective: Mapped[Collective] = mapped_column(_str_enum(Collective, 64))
    nranks: Mapped[int] = mapped_column(Integer)
    backend: Mapped[CurveBackend] = mapped_column(_str_enum(CurveBackend, 32))
    nodes: Mapped[list[Any]] = mapped_column(JSON)  #: host names in the contract's order
    points: Mapped[list[Any]] = mapped_column(JSON)
    peak_busbw_gbps: Mapped[float | None] = mapped_column(Float)
    peak_size: Mapped[int | None] = mapped_column(BigInteger)

    run: Mapped[RunRow] = relationship(back_populates="curves")
    hosts: Mapped[list[CurveNodeRow]] = relationship(back_populates="curve", cascade="all, delete-orphan")


class CurveNodeRow(Base):
    """Which hosts a curve ran on: the index behind ``Store.recent_busbw(host, collective)``."""

    __tablename__ = "busbw_curve_nodes"

    curve_pk: Mapped[int] = mapped_column(ForeignKey("busbw_curves.id", ondelete="CASCADE"), primary_key=True)
    host: Mapped[str] = mapped_column(String(255), primary_key=True, index=True)

    curve: Mapped[CurveRow] = relationship(back_populates="hosts")


class TokenRow(Base):
    """One bearer token of the HTTP API: its public id, who holds it, its scope ("read" or "write"), and only the
    SHA-256 of the token (:mod:`fleetdx.orchestrator.store.tokens`). ``revoked_at`` (Unix s) is NULL while it
    is valid."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_id: Mapped[str] = mapped_column(String(16), unique=True)
    name: Mapped[str] = mapped_column(String(255))
    scope: Mapped[str] = mapped_column(String(16))
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float)


class PostmortemRow(Base):
    """One postmortem of a failed job (``fleetdx postmortem``): ``document`` is the whole report as JSON. Kept
    apart from ``runs``/``findings``: its findings come from old logs and bundles, not from a pre-flight now."""

    __tablename__ = "postmortems"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    postmortem_id: Mapped[str] = mapped_column(String(64), unique=True)
    job_id: Mapped[str | None] = mapped_column(String(128), index=True)
    created_at: Mapped[float] = mapped_column(Float, index=True)
    verdict: Mapped[Verdict] = mapped_column(VerdictColumn)
    first_cause: Mapped[str | None] = mapped_column(String(64))  #: the most likely cause's code
    document: Mapped[dict[str, Any]] = mapped_column(JSON)

    hosts: Mapped[list[PostmortemHostRow]] = relationship(back_populates="postmortem", cascade="all, delete-orphan")


class PostmortemHostRow(Base):
    """A host a postmortem's causes name: the index behind "postmortems that blamed this node"."""

    __tablename__ = "postmortem_hosts"

    postmortem_pk: Mapped[int] = mapped_column(ForeignKey("postmortems.id", ondelete="CASCADE"), primary_key=True)
    host: Mapped[str] = mapped_column(String(255), primary_key=True, index=True)

    postmortem: Mapped[PostmortemRow] = relationship(back_populates="hosts")


class StepAnalysisRow(Base):
    """One step analysis of a job (``fleetdx steps --save``, ``POST /steps``): ``document`` is the whole report as
    JSON. Kept apart from ``runs``: step times describe a job, not a pre-flight of its nodes."""

    __tablename__ = "step_analyses"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    analysis_id: Mapped[str] = mapped_column(String(64), unique=True)
    job_id: Mapped[str | None] = mapped_column(String(128), index=True)
    created_at: Mapped[float] = mapped_column(Float, index=True)
    verdict: Mapped[Verdict] = mapped_column(VerdictColumn)
    first_finding: Mapped[str | None] = mapped_column(String(64))  #: the first finding's code
    ranks: Mapped[int] = mapped_column(Integer)
    document: Mapped[dict[str, Any]] = mapped_column(JSON)


class LiveJobRow(Base):
    """A running job's latest state (``fleetdx watch --report-to``): one row per job, rewritten at each push;
    ``document`` is the :class:`~fleetdx.orchestrator.store.records.LiveJobRecord` as JSON."""

    __tablename__ = "live_jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(String(128), unique=True)
    updated_at: Mapped[float] = mapped_column(Float, index=True)
    state: Mapped[str] = mapped_column(String(16))
    document: Mapped[dict[str, Any]] = mapped_column(JSON)


class NodeStateRow(Base):
    """A node's current state (:class:`~fleetdx.orchestrator.diagnosis.node_states.NodeStatus`): one row per host,
    rewritten at each transition. ``since`` (Unix s) is the time of its last transition; ``code`` and ``level``
    the critical finding and the level of the run that found it (what a retest must include); ``held``: flap
    damping keeps it out until a person returns it."""

    __tablename__ = "node_states"

    host: Mapped[str] = mapped_column(String(255), primary_key=True)
    state: Mapped[NodeState] = mapped_column(_str_enum(NodeState, 16), index=True)
    since: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text)
    by: Mapped[Actor] = mapped_column(_str_enum(Actor, 16))
    run_id: Mapped[str | None] = mapped_column(String(64))
    code: Mapped[str | None] = mapped_column(String(64))
    level: Mapped[Level | None] = mapped_column(_str_enum(Level, 16))
    held: Mapped[bool] = mapped_column(Boolean)
    returned_at: Mapped[float | None] = mapped_column(Float)


class NodeTransitionRow(Base):
    """One change of a node's state (:class:`~fleetdx.orchestrator.diagnosis.node_states.Transition`), kept for
    its history and lemon score: from (NULL: the node's first), to, when (Unix s), why, by whom (fleetdx or an
    administrator), after which run, and a retest's result (pass, fail; NULL otherwise)."""

    __tablename__ = "node_transitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str] = mapped_column(String(255), index=True)
    from_state: Mapped[NodeState | None] = mapped_column(_str_enum(NodeState, 16))
    to_state: Mapped[NodeState] = mapped_column(_str_enum(NodeState, 16))
    at: Mapped[float] = mapped_column(Float, index=True)
    reason: Mapped[str] = mapped_column(Text)
    by: Mapped[Actor] = mapped_column(_str_enum(Actor, 16))
    run_id: Mapped[str | None] = mapped_column(String(64))
    retest: Mapped[RetestResult | None] = mapped_column(_str_enum(RetestResult, 8))
