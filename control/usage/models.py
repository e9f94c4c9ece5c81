"""Usage rows: one per request that reached routing, as the core reported it (issue 7 adds the
durable journal, rollups, costs and quotas on top of this table)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Float, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from control.db import Base

# SQLite only autoincrements an INTEGER PRIMARY KEY.
RowId = BigInteger().with_variant(Integer(), "sqlite")


class UsageRecord(Base):
    __tablename__ = "usage_records"
    __table_args__ = (
        Index("ix_usage_records_tenant_id_id", "tenant_id", "id"),
        Index("ix_usage_records_key_id_id", "key_id", "id"),
        Index("ix_usage_records_started_at", "started_at"),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    # Idempotency: a replayed event is ignored.
    request_id: Mapped[str] = mapped_column(String(64), unique=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    key_id: Mapped[str] = mapped_column(String(40))
    key_prefix: Mapped[str] = mapped_column(String(16))
    tenant_id: Mapped[str] = mapped_column(String(64))
    endpoint: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    upstream_model: Mapped[str | None] = mapped_column(String(200))
    pool: Mapped[str | None] = mapped_column(String(64))
    upstream: Mapped[str | None] = mapped_column(String(64))
    priority: Mapped[str] = mapped_column(String(16))
    stream: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(32))
    error_code: Mapped[str | None] = mapped_column(String(64))
    prompt_tokens: Mapped[int] = mapped_column(BigInteger)
    completion_tokens: Mapped[int] = mapped_column(BigInteger)
    cached_tokens: Mapped[int] = mapped_column(BigInteger)
    usage_source: Mapped[str] = mapped_column(String(16))
    queue_wait_ms: Mapped[float] = mapped_column(Float)
    connect_ms: Mapped[float | None] = mapped_column(Float)
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    tpot_ms: Mapped[float | None] = mapped_column(Float)
    duration_ms: Mapped[float] = mapped_column(Float)
    started_at: Mapped[datetime]
    attempts: Mapped[int] = mapped_column(Integer)
    fallback: Mapped[bool] = mapped_column(Boolean)
    client_retry_count: Mapped[int | None] = mapped_column(Integer)
    recorded_at: Mapped[datetime]
