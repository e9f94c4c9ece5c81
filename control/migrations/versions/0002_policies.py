"""Data-plane policies.

Bursts of the tenants' and keys' rate limits (null: one minute's worth); per pool, the admission,
retry and ejection policies (stored whole) and the optional health check. Existing pools get the
core's defaults of this revision, through a server default that stays in place: SQLite could only
drop it by rebuilding `pools`, whose drop would cascade into its members.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ADMISSION = (
    '{"max_inflight":null,"interactive":{"max_depth":256,"max_wait_ms":10000,"weight":8},'
    '"batch":{"max_depth":1024,"max_wait_ms":60000,"weight":1},"tenant_share":0.5,'
    '"keepalive_ms":1000}'
)
RETRY = (
    '{"max_attempts":3,"backoff_base_ms":25,"backoff_cap_ms":250,"budget_ratio":0.2,'
    '"budget_min_per_second":10.0,"retry_on":["connect","reset","429","500","502","503","504"],'
    '"max_retry_after_ms":10000}'
)
EJECTION = '{"consecutive_failures":5,"base_ms":30000,"max_ms":300000,"max_ejected_percent":50}'


def upgrade() -> None:
    for table in ("tenants", "api_keys"):
        op.add_column(table, sa.Column("rpm_burst", sa.BigInteger(), nullable=True))
        op.add_column(table, sa.Column("tpm_burst", sa.BigInteger(), nullable=True))
    for name, default in (("admission", ADMISSION), ("retry", RETRY), ("ejection", EJECTION)):
        op.add_column(
            "pools",
            sa.Column(name, sa.JSON(), nullable=False, server_default=default),
        )
    op.add_column("pools", sa.Column("health_check", sa.JSON(), nullable=True))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+), never a batch rebuild of `pools`.
    for name in ("health_check", "ejection", "retry", "admission"):
        op.drop_column("pools", name)
    for table in ("api_keys", "tenants"):
        op.drop_column(table, "tpm_burst")
        op.drop_column(table, "rpm_burst")
