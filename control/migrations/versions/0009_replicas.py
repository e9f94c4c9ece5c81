"""Replicas: each `serve` of a fleet says here that it is alive, which config version its data
plane runs (or refused), and whether its limits are shared or on local shares.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "replicas",
        sa.Column("id", sa.String(length=80), primary_key=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("data_address", sa.String(length=200), nullable=False),
        sa.Column("admin_address", sa.String(length=200), nullable=False),
        sa.Column("package_version", sa.String(length=40), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("applied_version", sa.BigInteger(), nullable=True),
        sa.Column("refused_version", sa.BigInteger(), nullable=True),
        sa.Column("refused_message", sa.String(length=500), nullable=True),
        sa.Column("limits_mode", sa.String(length=16), nullable=False),
        sa.Column("leader", sa.Boolean(), nullable=False),
        sa.Column("ready", sa.Boolean(), nullable=False),
        sa.Column("status", sa.JSON(), nullable=True),
    )
    op.create_index("ix_replicas_heartbeat_at", "replicas", ["heartbeat_at"])


def downgrade() -> None:
    op.drop_index("ix_replicas_heartbeat_at", table_name="replicas")
    op.drop_table("replicas")
