"""The parts of a count that providers invoice apart: on usage rows, the prompt tokens written
to the provider's cache and the completion tokens spent on reasoning (cache reads were already
there); on prices, a rate for each (null: the input rate for the cache, the output rate for
reasoning). Rows written before keep zero: they were priced as a whole. And cost attribution
below the key: a usage row's tags (`x-sluicegate-tags`, a JSON object) and end user. And
providers of kind `azure_openai` (with their `api_version`), and an `openai` provider's
`auth_header`.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

USAGE_COLUMNS = ("cache_write_tokens", "reasoning_tokens")
PRICE_COLUMNS = (
    "cached_input_micros_per_mtok",
    "cache_write_micros_per_mtok",
    "reasoning_micros_per_mtok",
)


# Plain ALTER TABLE ... ADD/DROP COLUMN (a default keeps NOT NULL cheap on both databases),
# never a batch rebuild of `usage_records`, which may hold millions of rows.
def upgrade() -> None:
    for name in USAGE_COLUMNS:
        op.add_column(
            "usage_records", sa.Column(name, sa.BigInteger(), server_default="0", nullable=False)
        )
    for name in PRICE_COLUMNS:
        op.add_column("prices", sa.Column(name, sa.BigInteger(), nullable=True))
    op.add_column("usage_records", sa.Column("tags", sa.JSON(), nullable=True))
    op.add_column("usage_records", sa.Column("end_user", sa.String(length=256), nullable=True))
    op.add_column("providers", sa.Column("api_version", sa.String(length=32), nullable=True))
    op.add_column("providers", sa.Column("auth_header", sa.String(length=64), nullable=True))
    _kinds("kind IN ('openai', 'anthropic', 'azure_openai')")


def _kinds(check: str) -> None:
    """Replace the providers' kind check (a rebuild of the small `providers` table on SQLite)."""
    with op.batch_alter_table("providers") as batch:
        batch.drop_constraint(op.f("ck_providers_kind"), type_="check")
        batch.create_check_constraint(op.f("ck_providers_kind"), check)


def downgrade() -> None:
    op.execute("DELETE FROM providers WHERE kind = 'azure_openai'")
    _kinds("kind IN ('openai', 'anthropic')")
    op.drop_column("providers", "auth_header")
    op.drop_column("providers", "api_version")
    op.drop_column("usage_records", "end_user")
    op.drop_column("usage_records", "tags")
    for name in PRICE_COLUMNS:
        op.drop_column("prices", name)
    for name in USAGE_COLUMNS:
        op.drop_column("usage_records", name)
