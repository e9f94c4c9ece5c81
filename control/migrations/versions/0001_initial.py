"""Initial schema.

Tenants, keys, admin tokens, providers, pools, routes, prices, usage, audit log, settings and the
control-state row.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor_id", sa.String(length=40), nullable=False),
        sa.Column("actor_name", sa.String(length=200), nullable=False),
        sa.Column("actor_role", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("resource_type", sa.String(length=32), nullable=False),
        sa.Column("resource_id", sa.String(length=200), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("config_version", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index("ix_audit_log_actor_id_id", "audit_log", ["actor_id", "id"])
    op.create_index("ix_audit_log_resource", "audit_log", ["resource_type", "resource_id", "id"])

    op.create_table(
        "control_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("config_version", sa.BigInteger(), nullable=False),
        sa.Column("mutations", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_control_state_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_control_state")),
    )
    op.create_table(
        "pools",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("connect_ms", sa.BigInteger(), nullable=False),
        sa.Column("first_byte_ms", sa.BigInteger(), nullable=False),
        sa.Column("idle_ms", sa.BigInteger(), nullable=False),
        sa.Column("total_ms", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pools")),
    )
    op.create_table(
        "prices",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("input_micros_per_mtok", sa.BigInteger(), nullable=False),
        sa.Column("output_micros_per_mtok", sa.BigInteger(), nullable=False),
        sa.Column("effective_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prices")),
        sa.UniqueConstraint("model", "effective_from", name=op.f("uq_prices_model_effective_from")),
    )
    op.create_table(
        "providers",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("base_url", sa.String(length=2048), nullable=False),
        sa.Column("internal", sa.Boolean(), nullable=False),
        sa.Column("credential_ciphertext", sa.Text(), nullable=True),
        sa.Column("credential_mask", sa.String(length=32), nullable=True),
        sa.Column("credential_fingerprint", sa.String(length=12), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('openai', 'anthropic')", name=op.f("ck_providers_kind")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_providers")),
    )
    op.create_table(
        "routes",
        sa.Column("alias", sa.String(length=200), nullable=False),
        sa.Column("max_output_tokens", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("alias", name=op.f("pk_routes")),
    )
    op.create_table(
        "settings",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_settings")),
    )
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("rpm", sa.BigInteger(), nullable=True),
        sa.Column("tpm", sa.BigInteger(), nullable=True),
        sa.Column("max_concurrency", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("status IN ('active', 'disabled')", name=op.f("ck_tenants_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
    )
    op.create_index("ix_tenants_status_id", "tenants", ["status", "id"])

    op.create_table(
        "usage_records",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("key_prefix", sa.String(length=16), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("endpoint", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("upstream_model", sa.String(length=200), nullable=True),
        sa.Column("pool", sa.String(length=64), nullable=True),
        sa.Column("upstream", sa.String(length=64), nullable=True),
        sa.Column("priority", sa.String(length=16), nullable=False),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_tokens", sa.BigInteger(), nullable=False),
        sa.Column("usage_source", sa.String(length=16), nullable=False),
        sa.Column("queue_wait_ms", sa.Float(), nullable=False),
        sa.Column("connect_ms", sa.Float(), nullable=True),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("tpot_ms", sa.Float(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("fallback", sa.Boolean(), nullable=False),
        sa.Column("client_retry_count", sa.Integer(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_records")),
        sa.UniqueConstraint("request_id", name=op.f("uq_usage_records_request_id")),
    )
    op.create_index("ix_usage_records_key_id_id", "usage_records", ["key_id", "id"])
    op.create_index("ix_usage_records_started_at", "usage_records", ["started_at"])
    op.create_index("ix_usage_records_tenant_id_id", "usage_records", ["tenant_id", "id"])

    op.create_table(
        "admin_tokens",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=True),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=40), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(role = 'admin' AND tenant_id IS NULL) OR (role = 'tenant' AND tenant_id IS NOT NULL)",
            name=op.f("ck_admin_tokens_role_scope"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_admin_tokens_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_admin_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_admin_tokens_token_hash")),
    )
    op.create_index(op.f("ix_admin_tokens_tenant_id"), "admin_tokens", ["tenant_id"])

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.String(length=16), nullable=False),
        sa.Column("models", sa.JSON(), nullable=True),
        sa.Column("rpm", sa.BigInteger(), nullable=True),
        sa.Column("tpm", sa.BigInteger(), nullable=True),
        sa.Column("max_concurrency", sa.Integer(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("replaced_by", sa.String(length=40), nullable=True),
        sa.Column("rotated_from", sa.String(length=40), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "priority IN ('interactive', 'batch')", name=op.f("ck_api_keys_priority")
        ),
        sa.CheckConstraint(
            "status IN ('active', 'disabled', 'revoked')", name=op.f("ck_api_keys_status")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_api_keys_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("hash", name=op.f("uq_api_keys_hash")),
    )
    op.create_index("ix_api_keys_expires_at", "api_keys", ["expires_at"])
    op.create_index("ix_api_keys_prefix_id", "api_keys", ["prefix", "id"])
    op.create_index("ix_api_keys_status_id", "api_keys", ["status", "id"])
    op.create_index("ix_api_keys_tenant_id_id", "api_keys", ["tenant_id", "id"])

    op.create_table(
        "pool_members",
        sa.Column("pool_id", sa.String(length=64), nullable=False),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("provider_id", sa.String(length=64), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("max_concurrency", sa.Integer(), nullable=True),
        sa.Column("http2", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["pool_id"],
            ["pools.id"],
            name=op.f("fk_pool_members_pool_id_pools"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["provider_id"], ["providers.id"], name=op.f("fk_pool_members_provider_id_providers")
        ),
        sa.PrimaryKeyConstraint("pool_id", "id", name=op.f("pk_pool_members")),
        sa.UniqueConstraint("pool_id", "position", name=op.f("uq_pool_members_pool_id_position")),
    )
    op.create_index(op.f("ix_pool_members_provider_id"), "pool_members", ["provider_id"])

    op.create_table(
        "route_targets",
        sa.Column("route_alias", sa.String(length=200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("pool_id", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["pools.id"], name=op.f("fk_route_targets_pool_id_pools")
        ),
        sa.ForeignKeyConstraint(
            ["route_alias"],
            ["routes.alias"],
            name=op.f("fk_route_targets_route_alias_routes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("route_alias", "position", name=op.f("pk_route_targets")),
    )
    op.create_index(op.f("ix_route_targets_pool_id"), "route_targets", ["pool_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_route_targets_pool_id"), table_name="route_targets")

    op.drop_table("route_targets")
    op.drop_index(op.f("ix_pool_members_provider_id"), table_name="pool_members")

    op.drop_table("pool_members")
    op.drop_index("ix_api_keys_tenant_id_id", table_name="api_keys")
    op.drop_index("ix_api_keys_status_id", table_name="api_keys")
    op.drop_index("ix_api_keys_prefix_id", table_name="api_keys")
    op.drop_index("ix_api_keys_expires_at", table_name="api_keys")

    op.drop_table("api_keys")
    op.drop_index(op.f("ix_admin_tokens_tenant_id"), table_name="admin_tokens")

    op.drop_table("admin_tokens")
    op.drop_index("ix_usage_records_tenant_id_id", table_name="usage_records")
    op.drop_index("ix_usage_records_started_at", table_name="usage_records")
    op.drop_index("ix_usage_records_key_id_id", table_name="usage_records")

    op.drop_table("usage_records")
    op.drop_index("ix_tenants_status_id", table_name="tenants")

    op.drop_table("tenants")
    op.drop_table("settings")
    op.drop_table("routes")
    op.drop_table("providers")
    op.drop_table("prices")
    op.drop_table("pools")
    op.drop_table("control_state")
    op.drop_index("ix_audit_log_resource", table_name="audit_log")
    op.drop_index("ix_audit_log_actor_id_id", table_name="audit_log")

    op.drop_table("audit_log")
