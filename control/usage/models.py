"""Usage tables: one raw row per request that reached routing (kept `usage.raw_retention_days`),
rollups per key and model per minute, hour and day (kept), and the events the database refused
(kept, so that nothing the core reported disappears without a trace).

Raw rows are written only by the drainer, in the order the core hands them out; their indexes all
lead to time ranges (per tenant, per key, overall) because every reader asks for one.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from control.db import Base

# SQLite only autoincrements an INTEGER PRIMARY KEY.
RowId = BigInteger().with_variant(Integer(), "sqlite")

GRANULARITIES = {"minute": 60, "hour": 3600, "day": 86400}


class UsageRecord(Base):
    __tablename__ = "usage_records"
    __table_args__ = (
        Index("ix_usage_records_tenant_id_started_at_id", "tenant_id", "started_at", "id"),
        Index("ix_usage_records_key_id_started_at_id", "key_id", "started_at", "id"),
        Index("ix_usage_records_started_at_id", "started_at", "id"),
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
    cache_write_tokens: Mapped[int] = mapped_column(BigInteger, server_default="0")
    reasoning_tokens: Mapped[int] = mapped_column(BigInteger, server_default="0")
    usage_source: Mapped[str] = mapped_column(String(16))
    # Computed by the core at the price in force (integer micro-units), with that price's id.
    cost_micros: Mapped[int] = mapped_column(BigInteger, server_default="0")
    price_version: Mapped[int | None] = mapped_column(BigInteger)
    queue_wait_ms: Mapped[float] = mapped_column(Float)
    connect_ms: Mapped[float | None] = mapped_column(Float)
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    tpot_ms: Mapped[float | None] = mapped_column(Float)
    duration_ms: Mapped[float] = mapped_column(Float)
    started_at: Mapped[datetime]
    attempts: Mapped[int] = mapped_column(Integer)
    fallback: Mapped[bool] = mapped_column(Boolean)
    client_retry_count: Mapped[int | None] = mapped_column(Integer)
    # Cost attribution: `x-sluicegate-tags` as an object (bounded by the core: 10 tags, names of
    # 32 and values of 64 characters) and the end user the request named (256 characters).
    tags: Mapped[dict[str, str] | None] = mapped_column(JSON(none_as_null=True))
    end_user: Mapped[str | None] = mapped_column(String(256))
    recorded_at: Mapped[datetime]


class UsageRollup(Base):
    """Sums per (granularity, key, bucket, model), with the key's tenant. `bucket` is the unix
    second the minute, hour or day (UTC) starts at: integer arithmetic on both databases.

    The primary key leads with what every per-key read asks for (a granularity, a key, a range
    of buckets); a key belongs to one tenant for its life, so the tenant needs no place in it.
    On SQLite the table is `WITHOUT ROWID` (the rows live in the primary key's tree): every batch
    upserts up to three rows per event, and each index less is CPU the drainer does not take
    from the gateway."""

    __tablename__ = "usage_rollups"
    __table_args__ = (
        PrimaryKeyConstraint("granularity", "key_id", "bucket", "model"),
        CheckConstraint("granularity IN ('minute', 'hour', 'day')", name="granularity"),
        Index(
            "ix_usage_rollups_granularity_tenant_id_bucket", "granularity", "tenant_id", "bucket"
        ),
        {"sqlite_with_rowid": False},
    )

    granularity: Mapped[str] = mapped_column(String(6))
    bucket: Mapped[int] = mapped_column(BigInteger)
    tenant_id: Mapped[str] = mapped_column(String(64))
    key_id: Mapped[str] = mapped_column(String(40))
    model: Mapped[str] = mapped_column(String(200))
    requests: Mapped[int] = mapped_column(BigInteger)
    prompt_tokens: Mapped[int] = mapped_column(BigInteger)
    completion_tokens: Mapped[int] = mapped_column(BigInteger)
    cached_tokens: Mapped[int] = mapped_column(BigInteger)
    cost_micros: Mapped[int] = mapped_column(BigInteger)
    # Requests that failed: an error status, or an upstream error, timeout or interruption.
    errors: Mapped[int] = mapped_column(BigInteger)


class UsageReject(Base):
    """An event the drainer could not store as a usage row (a malformed event is a bug in the
    core): kept whole with the reason, and acknowledged like the others."""

    __tablename__ = "usage_rejects"

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    seq: Mapped[int | None] = mapped_column(BigInteger)
    request_id: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(String(500))
    payload: Mapped[str] = mapped_column(Text)
    recorded_at: Mapped[datetime]
