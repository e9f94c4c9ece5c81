"""A tenant's API key: stored as a keyed hash (HMAC under the pepper) plus a short public prefix."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, CheckConstraint, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from control.db import Base
from control.quotas.models import QuotaColumns

KEY_STATUSES = ("active", "disabled", "revoked")
PRIORITIES = ("interactive", "batch")


class ApiKey(QuotaColumns, Base):
    __tablename__ = "api_keys"
    __table_args__ = (
        CheckConstraint("status IN ('active', 'disabled', 'revoked')", name="status"),
        CheckConstraint("priority IN ('interactive', 'batch')", name="priority"),
        # Keyset pages per tenant, by prefix, by status and by expiry stay index scans at 100k keys.
        Index("ix_api_keys_tenant_id_id", "tenant_id", "id"),
        Index("ix_api_keys_prefix_id", "prefix", "id"),
        Index("ix_api_keys_status_id", "status", "id"),
        Index("ix_api_keys_expires_at", "expires_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), ForeignKey("tenants.id"))
    name: Mapped[str | None] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(16))
    hash: Mapped[str] = mapped_column(String(64), unique=True)
    status: Mapped[str] = mapped_column(String(16))
    priority: Mapped[str] = mapped_column(String(16))
    # Model aliases the key may use; None means every route.
    models: Mapped[list[str] | None] = mapped_column(JSON)
    rpm: Mapped[int | None] = mapped_column(BigInteger)
    tpm: Mapped[int | None] = mapped_column(BigInteger)
    max_concurrency: Mapped[int | None] = mapped_column(Integer)
    # Bucket sizes of rpm and tpm; None: one minute's worth (the limit itself).
    rpm_burst: Mapped[int | None] = mapped_column(BigInteger)
    tpm_burst: Mapped[int | None] = mapped_column(BigInteger)
    expires_at: Mapped[datetime | None]
    # Rotation: the new key's id on the old one, and the old key's id on the new one.
    replaced_by: Mapped[str | None] = mapped_column(String(40))
    rotated_from: Mapped[str | None] = mapped_column(String(40))
    revoked_at: Mapped[datetime | None]
    # What an admin token set and a tenant-scoped token may only tighten (`policy.py`): field ->
    # the operator's bound. None or {}: nothing locked.
    admin_policy: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
