"""Routes: an optional latency objective (`slo_ttft_p95_ms`), read by the doctor only.

Control-plane data: it is not part of the core's snapshot.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("routes", sa.Column("slo_ttft_p95_ms", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("routes") as batch:
        batch.drop_column("slo_ttft_p95_ms")
