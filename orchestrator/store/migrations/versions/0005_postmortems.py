"""Postmortems of failed jobs, apart from node history: ``postmortems`` (one row per postmortem: its id, job, time
it was made, verdict, first cause's code and the whole report as JSON) and ``postmortem_hosts`` (the hosts its
causes name, for "postmortems that blamed gpu07"). Their findings are evidence about a past job, read from old
logs and bundles: kept out of ``findings`` so a node's history never shows them as new pre-flight results.

New tables only; downgrade drops them (the postmortems are then gone; runs are untouched).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "postmortems",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("postmortem_id", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("first_cause", sa.String(length=64), nullable=True),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_postmortems"),
        sa.UniqueConstraint("postmortem_id", name="uq_postmortems_postmortem_id"),
    )
    op.create_index("ix_postmortems_job_id", "postmortems", ["job_id"])
    op.create_index("ix_postmortems_created_at", "postmortems", ["created_at"])
    op.create_table(
        "postmortem_hosts",
        sa.Column("postmortem_pk", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(
            ["postmortem_pk"],
            ["postmortems.id"],
            name="fk_postmortem_hosts_postmortem_pk_postmortems",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("postmortem_pk", "host", name="pk_postmortem_hosts"),
    )
    op.create_index("ix_postmortem_hosts_host", "postmortem_hosts", ["host"])


def downgrade() -> None:
    op.drop_index("ix_postmortem_hosts_host", table_name="postmortem_hosts")
    op.drop_table("postmortem_hosts")
    op.drop_index("ix_postmortems_created_at", table_name="postmortems")
    op.drop_index("ix_postmortems_job_id", table_name="postmortems")
    op.drop_table("postmortems")
