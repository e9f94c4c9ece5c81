"""Usage ledger: costs on raw rows, time-range indexes, rollups per minute/hour/day, rejected
events; quotas on tenants and keys.

Existing usage rows get cost 0 and no price version (no price was applied before this revision).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _quota_columns(table: str) -> None:
    op.add_column(table, sa.Column("quota_period", sa.String(length=8), nullable=True))
    op.add_column(table, sa.Column("quota_tokens", sa.BigInteger(), nullable=True))
    op.add_column(table, sa.Column("quota_cost_micros", sa.BigInteger(), nullable=True))
    op.add_column(table, sa.Column("quota_since", sa.BigInteger(), nullable=True))
    op.add_column(table, sa.Column("quota_anchor", sa.BigInteger(), nullable=True))
    op.add_column(table, sa.Column("quota_reset_at", sa.DateTime(timezone=True), nullable=True))


def upgrade() -> None:
    _quota_columns("tenants")
    _quota_columns("api_keys")

    op.add_column(
        "usage_records",
        sa.Column("cost_micros", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.add_column("usage_records", sa.Column("price_version", sa.BigInteger(), nullable=True))
    op.drop_index("ix_usage_records_tenant_id_id", table_name="usage_records")
    op.drop_index("ix_usage_records_key_id_id", table_name="usage_records")
    op.drop_index("ix_usage_records_started_at", table_name="usage_records")
    op.create_index(
        "ix_usage_records_tenant_id_started_at_id",
        "usage_records",
        ["tenant_id", "started_at", "id"],
    )
    op.create_index(
        "ix_usage_records_key_id_started_at_id", "usage_records", ["key_id", "started_at", "id"]
    )
    op.create_index("ix_usage_records_started_at_id", "usage_records", ["started_at", "id"])

    op.create_table(
        "usage_rollups",
        sa.Column("granularity", sa.String(length=6), nullable=False),
        sa.Column("bucket", sa.BigInteger(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_micros", sa.BigInteger(), nullable=False),
        sa.Column("errors", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "granularity IN ('minute', 'hour', 'day')",
            name=op.f("ck_usage_rollups_granularity"),
        ),
        sa.PrimaryKeyConstraint(
            "granularity", "key_id", "bucket", "model", name=op.f("pk_usage_rollups")
        ),
        sqlite_with_rowid=False,
    )
    op.create_index(
        "ix_usage_rollups_granularity_tenant_id_bucket",
        "usage_rollups",
        ["granularity", "tenant_id", "bucket"],
    )
    # Rows written before this revision count in the rollups too (their cost is 0).
    for granularity, seconds in (("minute", 60), ("hour", 3600), ("day", 86400)):
        _backfill(granularity, seconds)

    op.create_table(
        "usage_rejects",
        sa.Column("id", RowId, autoincrement=True, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=True),
        sa.Column("request_id", sa.String(length=200), nullable=True),
        sa.Column("reason", sa.String(length=500), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_rejects")),
    )


def _backfill(granularity: str, seconds: int) -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        unix = "CAST(strftime('%s', started_at) AS INTEGER)"
    else:
        unix = "CAST(floor(extract(epoch FROM started_at)) AS BIGINT)"
    bucket = f"({unix} / {seconds}) * {seconds}"
    errors = (
        "SUM(CASE WHEN status >= 400 OR outcome IN ('upstream_error', 'timeout', 'interrupted') "
        "THEN 1 ELSE 0 END)"
    )
    op.execute(
        "INSERT INTO usage_rollups (granularity, bucket, tenant_id, key_id, model, requests, "
        "prompt_tokens, completion_tokens, cached_tokens, cost_micros, errors) "
        f"SELECT '{granularity}', {bucket}, tenant_id, key_id, model, COUNT(*), "
        "SUM(prompt_tokens), SUM(completion_tokens), SUM(cached_tokens), SUM(cost_micros), "
        f"{errors} FROM usage_records GROUP BY {bucket}, tenant_id, key_id, model"
    )


def downgrade() -> None:
    op.drop_table("usage_rejects")
    op.drop_index("ix_usage_rollups_granularity_tenant_id_bucket", table_name="usage_rollups")
    op.drop_table("usage_rollups")
    op.drop_index("ix_usage_records_started_at_id", table_name="usage_records")
    op.drop_index("ix_usage_records_key_id_started_at_id", table_name="usage_records")
    op.drop_index("ix_usage_records_tenant_id_started_at_id", table_name="usage_records")
    op.create_index("ix_usage_records_started_at", "usage_records", ["started_at"])
    op.create_index("ix_usage_records_key_id_id", "usage_records", ["key_id", "id"])
    op.create_index("ix_usage_records_tenant_id_id", "usage_records", ["tenant_id", "id"])
    with op.batch_alter_table("usage_records") as batch:
        batch.drop_column("price_version")
        batch.drop_column("cost_micros")
    for table in ("api_keys", "tenants"):
        with op.batch_alter_table(table) as batch:
            for column in (
                "quota_reset_at",
                "quota_anchor",
                "quota_since",
                "quota_cost_micros",
                "quota_tokens",
                "quota_period",
            ):
                batch.drop_column(column)
