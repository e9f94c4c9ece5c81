"""Providers: headers the operator sends to the upstream with every request, and names of client
headers the upstream may receive beyond the gateway's allow-list.

Existing providers get neither (the allow-list alone applies, as the data plane now enforces).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("providers") as batch:
        batch.add_column(sa.Column("headers", sa.JSON(), nullable=False, server_default="{}"))
        batch.add_column(
            sa.Column("forward_headers", sa.JSON(), nullable=False, server_default="[]")
        )


def downgrade() -> None:
    with op.batch_alter_table("providers") as batch:
        batch.drop_column("forward_headers")
        batch.drop_column("headers")
