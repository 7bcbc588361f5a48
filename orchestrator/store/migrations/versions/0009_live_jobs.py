"""Running jobs' live state (issue 24): ``live_jobs`` (one row per job watched by ``fleetdx watch --report-to``: its
latest state, rewritten at each push, and when it was pushed).

A new table only; downgrade drops it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "live_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(length=128), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_live_jobs"),
        sa.UniqueConstraint("job_id", name="uq_live_jobs_job_id"),
    )
    op.create_index("ix_live_jobs_updated_at", "live_jobs", ["updated_at"])


def downgrade() -> None:
    op.drop_index("ix_live_jobs_updated_at", table_name="live_jobs")
    op.drop_table("live_jobs")
