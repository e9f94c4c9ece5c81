"""Bounds against hostile tenants: the operator's locks on a key (`api_keys.admin_policy`), a
tenant's model allowlist and key cap (`tenants.models`, `tenants.max_keys`).

Existing keys carry no lock: what the operator set before this revision was not told apart from
what a tenant token set. Existing tenants allow every route and take the default key cap.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("admin_policy", sa.JSON()))
    op.add_column("tenants", sa.Column("models", sa.JSON()))
    op.add_column("tenants", sa.Column("max_keys", sa.Integer()))


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("max_keys")
        batch.drop_column("models")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("admin_policy")
