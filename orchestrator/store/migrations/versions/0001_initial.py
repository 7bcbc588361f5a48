"""Initial schema: runs, nodes, probe results, raw outputs, findings, recommendations, busbw curves.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=True),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("exclude", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("run_id", name="uq_runs_run_id"),
    )
    op.create_index("ix_runs_started_at", "runs", ["started_at"])

    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name="fk_nodes_run_pk_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_nodes"),
        sa.UniqueConstraint("run_pk", "host", name="uq_nodes_run_pk_host"),
    )
    op.create_index("ix_nodes_host", "nodes", ["host"])

    op.create_table(
        "probe_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["node_pk"], ["nodes.id"], name="fk_probe_results_node_pk_nodes", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_probe_results"),
    )
    op.create_index("ix_probe_results_node_pk", "probe_results", ["node_pk"])

    op.create_table(
        "raw_outputs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("file_name", sa.String(length=255), nullable=False),
        sa.Column("encoding", sa.String(length=16), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name="fk_raw_outputs_run_pk_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_raw_outputs"),
        sa.UniqueConstraint("run_pk", "host", "file_name", name="uq_raw_outputs_run_pk_host_file_name"),
    )
    op.create_index("ix_raw_outputs_host", "raw_outputs", ["host"])

    op.create_table(
        "findings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(length=64), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("node", sa.String(length=255), nullable=True),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name="fk_findings_run_pk_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_findings"),
    )
    op.create_index("ix_findings_run_pk", "findings", ["run_pk"])
    op.create_index("ix_findings_code", "findings", ["code"])
    op.create_index("ix_findings_node_code", "findings", ["node", "code"])

    op.create_table(
        "recommendations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(length=255), nullable=True),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name="fk_recommendations_run_pk_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_recommendations"),
    )
    op.create_index("ix_recommendations_run_pk", "recommendations", ["run_pk"])

    op.create_table(
        "busbw_curves",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("collective", sa.String(length=64), nullable=False),
        sa.Column("nranks", sa.Integer(), nullable=False),
        sa.Column("backend", sa.String(length=32), nullable=False),
        sa.Column("nodes", sa.JSON(), nullable=False),
        sa.Column("points", sa.JSON(), nullable=False),
        sa.Column("peak_busbw_gbps", sa.Float(), nullable=True),
        sa.Column("peak_size", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name="fk_busbw_curves_run_pk_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_busbw_curves"),
    )
    op.create_index("ix_busbw_curves_run_pk", "busbw_curves", ["run_pk"])

    op.create_table(
        "busbw_curve_nodes",
        sa.Column("curve_pk", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(
            ["curve_pk"],
            ["busbw_curves.id"],
            name="fk_busbw_curve_nodes_curve_pk_busbw_curves",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("curve_pk", "host", name="pk_busbw_curve_nodes"),
    )
    op.create_index("ix_busbw_curve_nodes_host", "busbw_curve_nodes", ["host"])


def downgrade() -> None:
    op.drop_table("busbw_curve_nodes")
    op.drop_table("busbw_curves")
    op.drop_table("recommendations")
    op.drop_table("findings")
    op.drop_table("raw_outputs")
    op.drop_table("probe_results")
    op.drop_table("nodes")
    op.drop_table("runs")
