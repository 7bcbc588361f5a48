"""A finding's hosts in a table of their own (``finding_nodes``); a run's schedule apart from its level;
each node's ``unjudged`` reason.

Schema version 2 of the contracts: ``Finding.nodes`` (a list) replaces ``Finding.node``, and
``RunReport.schedule`` holds a bandwidth run's schedule, which version 1 kept in ``level``.

Upgrade (no row is lost):

- ``finding_nodes(finding_pk, position, host)``: ``findings.node`` of every finding that had one becomes its
  host at position 0. The previous release stored a pair or group finding of the bandwidth screen (codes
  ``NCCL_BUSBW_LOW``, ``NCCL_TEST_HANG``, ``NCCL_TEST_FAILED``, ``NCCL_WRONG_RESULTS`` with ``node`` NULL)
  with its hosts comma-joined in ``subject`` ("gpu01,gpu02"): those subjects are split into hosts, in
  order. Only the screen made such findings with ``node`` NULL, in bandwidth runs and in pre-flights at
  level ``full`` (which merged the screen's findings), so the rule keys on the code, not on the run's kind;
  ``subject`` itself is kept as it was. Then ``findings.node`` and its index ``ix_findings_node_code`` are
  dropped.
- ``runs.schedule``: ``runs.level`` of every ``kind = 'bandwidth'`` run moves there; ``level`` keeps only
  probe levels.
- ``nodes.unjudged`` (NULL for the runs stored before: the previous release did not keep it).

Downgrade: ``findings.node`` gets back the host of each finding that has exactly one (a pair or group
finding's hosts survive only in its subject, as before), ``level`` of bandwidth runs gets back their
schedule, and ``finding_nodes``, ``runs.schedule`` and ``nodes.unjudged`` are dropped.

SQLite goes through Alembic's batch mode (copy the table, drop the original, rename the copy), with foreign
keys off while it runs (:func:`fleetdx.orchestrator.store.migrate.upgrade`).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

#: codes whose findings the previous release's bandwidth screen stored with node NULL and the hosts
#: comma-joined in the subject (orchestrator/bandwidth.py at 5de9c12: _failure_findings, _low_finding)
GROUP_CODES = ("NCCL_BUSBW_LOW", "NCCL_TEST_HANG", "NCCL_TEST_FAILED", "NCCL_WRONG_RESULTS")
#: rows inserted per statement while splitting subjects
CHUNK = 1000

# the tables as this migration sees them (never the ORM models: they follow the newest schema)
runs = sa.table(
    "runs",
    sa.column("id", sa.Integer()),
    sa.column("kind", sa.String()),
    sa.column("level", sa.String()),
    sa.column("schedule", sa.String()),
)
findings = sa.table(
    "findings",
    sa.column("id", sa.Integer()),
    sa.column("code", sa.String()),
    sa.column("node", sa.String()),
    sa.column("subject", sa.String()),
)
finding_nodes = sa.table(
    "finding_nodes",
    sa.column("finding_pk", sa.Integer()),
    sa.column("position", sa.Integer()),
    sa.column("host", sa.String()),
)


def subject_hosts(subject: str) -> list[str]:
    """The hosts of a comma-joined subject, in order, each once: ``"gpu01,gpu02"`` -> ``["gpu01", "gpu02"]``."""
    return list(dict.fromkeys(h.strip() for h in subject.split(",") if h.strip()))


def upgrade() -> None:
    bind = op.get_bind()

    op.add_column("runs", sa.Column("schedule", sa.String(length=16), nullable=True))
    # both right-hand sides read the row as it was: schedule <- old level, level <- NULL
    bind.execute(runs.update().where(runs.c.kind == "bandwidth").values(schedule=runs.c.level, level=None))

    op.add_column("nodes", sa.Column("unjudged", sa.Text(), nullable=True))

    op.create_table(
        "finding_nodes",
        sa.Column("finding_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(
            ["finding_pk"], ["findings.id"], name="fk_finding_nodes_finding_pk_findings", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("finding_pk", "position", name="pk_finding_nodes"),
    )
    op.create_index("ix_finding_nodes_host", "finding_nodes", ["host"])

    # a finding about one node: its host
    bind.execute(
        finding_nodes.insert().from_select(
            ["finding_pk", "position", "host"],
            sa.select(findings.c.id, sa.literal(0, sa.Integer()), findings.c.node).where(
                findings.c.node.is_not(None), findings.c.node != ""
            ),
        )
    )
    # a pair or group finding of the bandwidth screen: the hosts of its subject
    groups = bind.execute(
        sa.select(findings.c.id, findings.c.subject)
        .where(findings.c.node.is_(None), findings.c.code.in_(GROUP_CODES))
        .order_by(findings.c.id)
    ).all()
    rows = [
        {"finding_pk": pk, "position": i, "host": host}
        for pk, subject in groups
        for i, host in enumerate(subject_hosts(subject or ""))
    ]
    for start in range(0, len(rows), CHUNK):
        bind.execute(finding_nodes.insert(), rows[start : start + CHUNK])

    with op.batch_alter_table("findings") as batch:
        batch.drop_index("ix_findings_node_code")
        batch.drop_column("node")


def downgrade() -> None:
    bind = op.get_bind()

    with op.batch_alter_table("findings") as batch:
        batch.add_column(sa.Column("node", sa.String(length=255), nullable=True))
    single = sa.select(finding_nodes.c.finding_pk).group_by(finding_nodes.c.finding_pk).having(sa.func.count() == 1)
    host = sa.select(finding_nodes.c.host).where(finding_nodes.c.finding_pk == findings.c.id).scalar_subquery()
    bind.execute(findings.update().where(findings.c.id.in_(single)).values(node=host))
    op.create_index("ix_findings_node_code", "findings", ["node", "code"])
    op.drop_index("ix_finding_nodes_host", table_name="finding_nodes")
    op.drop_table("finding_nodes")

    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("unjudged")

    bind.execute(
        runs.update().where(runs.c.kind == "bandwidth", runs.c.schedule.is_not(None)).values(level=runs.c.schedule)
    )
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("schedule")
