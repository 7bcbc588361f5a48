"""The job a run was about: ``runs.job_id`` (indexed, for "every run of job 4711") and ``runs.job`` (the whole
:class:`fleetdx.probes.contracts.Job` document as JSON).

Upgrade: two nullable columns; runs stored before have no job (NULL). Downgrade drops them (a run's job is
then lost; nothing else is).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("job_id", sa.String(length=128), nullable=True))
    op.add_column("runs", sa.Column("job", sa.JSON(), nullable=True))
    op.create_index("ix_runs_job_id", "runs", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_job_id", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("job")
        batch.drop_column("job_id")
