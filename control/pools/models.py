"""A pool: upstream members that serve the same models, with shared timeouts and policies."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from control.db import Base


class Pool(Base):
    __tablename__ = "pools"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    connect_ms: Mapped[int] = mapped_column(BigInteger)
    first_byte_ms: Mapped[int] = mapped_column(BigInteger)
    idle_ms: Mapped[int] = mapped_column(BigInteger)
    total_ms: Mapped[int] = mapped_column(BigInteger)
    # Whole policies as the core reads them (control/pools/policies.py); health_check None: off.
    admission: Mapped[dict[str, Any]] = mapped_column(JSON)
    retry: Mapped[dict[str, Any]] = mapped_column(JSON)
    ejection: Mapped[dict[str, Any]] = mapped_column(JSON)
    health_check: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    members: Mapped[list[PoolMember]] = relationship(
        order_by="PoolMember.position", cascade="all, delete-orphan", lazy="selectin"
    )


class PoolMember(Base):
    __tablename__ = "pool_members"
    __table_args__ = (UniqueConstraint("pool_id", "position"),)

    pool_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("pools.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    provider_id: Mapped[str] = mapped_column(String(64), ForeignKey("providers.id"), index=True)
    weight: Mapped[int] = mapped_column(Integer)
    max_concurrency: Mapped[int | None] = mapped_column(Integer)
    http2: Mapped[bool] = mapped_column(Boolean)
