"""Admin tokens: their hash scheme, an optional expiry, the last use.

Existing tokens keep their SHA-256 hashes (`hash_scheme` 'sha256', the column's default) and are
rewritten as HMAC under the pepper the first time they authenticate (the configured bootstrap
token at the next start). A downgrade leaves HMAC hashes that the older release cannot match:
its configured admin token is made again at its start, other tokens must be issued again.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "admin_tokens",
        sa.Column("hash_scheme", sa.String(length=16), server_default="sha256", nullable=False),
    )
    op.add_column("admin_tokens", sa.Column("expires_at", sa.DateTime(timezone=True)))
    op.add_column("admin_tokens", sa.Column("last_used_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("admin_tokens") as batch:
        batch.drop_column("last_used_at")
        batch.drop_column("expires_at")
        batch.drop_column("hash_scheme")
