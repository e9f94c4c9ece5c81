"""Admin API tokens: `admin` sees everything, `tenant` one tenant's keys and usage.
Stored as HMAC-SHA256 under the pepper (`hashing.py`) plus a short public prefix."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from control.db import Base


class AdminToken(Base):
    __tablename__ = "admin_tokens"
    __table_args__ = (
        CheckConstraint(
            "(role = 'admin' AND tenant_id IS NULL) OR (role = 'tenant' AND tenant_id IS NOT NULL)",
            name="role_scope",
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(16))
    tenant_id: Mapped[str | None] = mapped_column(String(64), ForeignKey("tenants.id"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # `hmac-sha256`; `sha256` for rows of older releases not yet used since (the column's
    # default is theirs: every row written now names its scheme).
    hash_scheme: Mapped[str] = mapped_column(String(16), server_default="sha256")
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime]
    created_by: Mapped[str | None] = mapped_column(String(40))
    revoked_at: Mapped[datetime | None]
    # Refused from this moment on; None: no expiry.
    expires_at: Mapped[datetime | None]
    # Written at most once a minute per token, so that authentication does not write every call.
    last_used_at: Mapped[datetime | None]
