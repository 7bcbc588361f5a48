"""Schema version 3 of the contracts: one finding for every job.

A finding's figures move from ``findings.evidence`` to ``findings.details``; ``evidence`` now holds its raw
lines (a JSON list of ``{"file", "line", "text"}``); new nullable columns ``scope``, ``rank``, ``gpu``,
``action`` and ``time`` (NULL ``scope``/``action`` read as the code catalog's defaults).

Upgrade (no row is lost): ``details = evidence`` then ``evidence = []`` on every row. Downgrade: ``evidence =
details`` (the raw lines of findings stored since are dropped with the new columns).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

findings = sa.table(
    "findings",
    sa.column("id", sa.Integer()),
    sa.column("evidence", sa.JSON()),
    sa.column("details", sa.JSON()),
)


def upgrade() -> None:
    with op.batch_alter_table("findings") as batch:
        batch.add_column(sa.Column("scope", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("rank", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("gpu", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("action", sa.Text(), nullable=True))
        batch.add_column(sa.Column("time", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("details", sa.JSON(), nullable=True))
    op.execute(sa.update(findings).values(details=findings.c.evidence))
    op.execute(sa.update(findings).values(evidence=[]))


def downgrade() -> None:
    op.execute(sa.update(findings).values(evidence=findings.c.details))
    with op.batch_alter_table("findings") as batch:
        for name in ("details", "time", "action", "gpu", "rank", "scope"):
            batch.drop_column(name)
