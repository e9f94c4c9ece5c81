"""A tenant: the unit of isolation and of limits; every key belongs to one."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, CheckConstraint, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from control.db import Base
from control.quotas.models import QuotaColumns

TENANT_STATUSES = ("active", "disabled")


class Tenant(QuotaColumns, Base):
    __tablename__ = "tenants"
    __table_args__ = (
        CheckConstraint("status IN ('active', 'disabled')", name="status"),
        Index("ix_tenants_status_id", "status", "id"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    # Limits over all of the tenant's keys; None means unlimited. A key's own never exceed them.
    rpm: Mapped[int | None] = mapped_column(BigInteger)
    tpm: Mapped[int | None] = mapped_column(BigInteger)
    max_concurrency: Mapped[int | None] = mapped_column(Integer)
    # Bucket sizes of rpm and tpm; None: one minute's worth (the limit itself).
    rpm_burst: Mapped[int | None] = mapped_column(BigInteger)
    tpm_burst: Mapped[int | None] = mapped_column(BigInteger)
    # Model aliases the tenant's keys may use; None means every route. A key's own list stays
    # within it, and the data plane gets each key's list within it (`snapshot.py`).
    models: Mapped[list[str] | None] = mapped_column(JSON)
    # Keys the tenant may hold; None: the setting `admin.default_max_keys`.
    max_keys: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
