"""Node states over time (issue 23): ``node_states`` (each node's current state: ok, suspect, quarantined,
retesting, returned; since when, why, by whom, and what a retest must include) and ``node_transitions`` (every
change of state, with its reason, actor, run and a retest's result). The state machine is
:mod:`fleetdx.orchestrator.diagnosis.node_states`.

New tables only, filled by runs stored from now on (older runs are not replayed). Downgrade drops them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "node_states",
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("since", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("by", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("code", sa.String(length=64), nullable=True),
        sa.Column("level", sa.String(length=16), nullable=True),
        sa.Column("held", sa.Boolean(), nullable=False),
        sa.Column("returned_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("host", name="pk_node_states"),
    )
    op.create_index("ix_node_states_state", "node_states", ["state"])
    op.create_table(
        "node_transitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=True),
        sa.Column("to_state", sa.String(length=16), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("by", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("retest", sa.String(length=8), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_node_transitions"),
    )
    op.create_index("ix_node_transitions_host", "node_transitions", ["host"])
    op.create_index("ix_node_transitions_at", "node_transitions", ["at"])


def downgrade() -> None:
    op.drop_index("ix_node_transitions_at", table_name="node_transitions")
    op.drop_index("ix_node_transitions_host", table_name="node_transitions")
    op.drop_table("node_transitions")
    op.drop_index("ix_node_states_state", table_name="node_states")
    op.drop_table("node_states")
