"""Drills: a pool or a member forced out of service for a while, and when it ended.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "drills",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("pool_id", sa.String(length=64), nullable=False),
        sa.Column("member_id", sa.String(length=64), nullable=True),
        sa.Column("route_alias", sa.String(length=200), nullable=True),
        sa.Column("reason", sa.String(length=200), nullable=True),
        sa.Column("seconds", sa.Integer(), nullable=False),
        sa.Column("actor_id", sa.String(length=40), nullable=False),
        sa.Column("actor_name", sa.String(length=200), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_by", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_drills")),
    )
    op.create_index("ix_drills_ended_at_ends_at", "drills", ["ended_at", "ends_at"])


def downgrade() -> None:
    op.drop_index("ix_drills_ended_at_ends_at", table_name="drills")
    op.drop_table("drills")
