"""Step analyses of jobs (issue 25): ``step_analyses`` (one row per ``fleetdx steps --save`` or ``POST /steps``: its
id, job, time it was made, verdict, first finding's code, rank count and the whole report as JSON).

A new table only; downgrade drops it (the analyses are then gone; runs are untouched).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "step_analyses",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("analysis_id", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("first_finding", sa.String(length=64), nullable=True),
        sa.Column("ranks", sa.Integer(), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_step_analyses"),
        sa.UniqueConstraint("analysis_id", name="uq_step_analyses_analysis_id"),
    )
    op.create_index("ix_step_analyses_job_id", "step_analyses", ["job_id"])
    op.create_index("ix_step_analyses_created_at", "step_analyses", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_step_analyses_created_at", table_name="step_analyses")
    op.drop_index("ix_step_analyses_job_id", table_name="step_analyses")
    op.drop_table("step_analyses")
