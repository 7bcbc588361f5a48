"""API bearer tokens (``api_tokens``): a public id, who holds it, its scope, the SHA-256 of the token, when it
was created and revoked (:mod:`fleetdx.orchestrator.store.tokens`). A new table only: no row of another table
changes. Downgrade drops it (every token is then gone: create new ones after upgrading again).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_id", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
        sa.UniqueConstraint("token_id", name="uq_api_tokens_token_id"),
        sa.UniqueConstraint("sha256", name="uq_api_tokens_sha256"),
    )


def downgrade() -> None:
    op.drop_table("api_tokens")
