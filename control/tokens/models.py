"""Admin API tokens: `admin` sees everything, `tenant` one tenant's keys and usage.
Stored as SHA-256 of the token (256 random bits need no pepper) plus a short public prefix."""

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
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime]
    created_by: Mapped[str | None] = mapped_column(String(40))
    revoked_at: Mapped[datetime | None]
