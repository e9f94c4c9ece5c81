"""The audit log: who changed what, written in the transaction of the change itself."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from control.db import Base


class AuditEntry(Base):
    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_resource", "resource_type", "resource_id", "id"),
        Index("ix_audit_log_actor_id_id", "actor_id", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    actor_id: Mapped[str] = mapped_column(String(40))
    actor_name: Mapped[str] = mapped_column(String(200))
    actor_role: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(64))
    resource_type: Mapped[str] = mapped_column(String(32))
    resource_id: Mapped[str] = mapped_column(String(200))
    tenant_id: Mapped[str | None] = mapped_column(String(64))
    # What changed, without secrets (credentials appear as mask and fingerprint only).
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The snapshot version the change produced; None for changes the core does not see.
    config_version: Mapped[int | None] = mapped_column(BigInteger)
