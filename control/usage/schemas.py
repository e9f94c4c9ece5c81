"""Usage events as the core reports them (`proxy_core/src/usage/event.rs`), and usage rows as the
API returns them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict


class UsageEvent(BaseModel):
    """One event from `Core.drain_usage`. Fields the core adds later are ignored here until the
    table has a column for them."""

    model_config = ConfigDict(extra="ignore")

    seq: int
    request_id: str
    key_id: str
    key_prefix: str
    tenant_id: str
    endpoint: str
    model: str
    upstream_model: str | None = None
    pool: str | None = None
    upstream: str | None = None
    priority: str
    stream: bool
    status: int
    outcome: str
    error_code: str | None = None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    usage_source: str
    queue_wait_ms: float
    connect_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    duration_ms: float
    started_at: float
    attempts: int
    fallback: bool
    client_retry_count: int | None = None


class UsageOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    request_id: str
    key_id: str
    key_prefix: str
    tenant_id: str
    endpoint: str
    model: str
    upstream_model: str | None
    pool: str | None
    upstream: str | None
    priority: str
    stream: bool
    status: int
    outcome: str
    error_code: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    usage_source: str
    queue_wait_ms: float
    connect_ms: float | None
    ttft_ms: float | None
    tpot_ms: float | None
    duration_ms: float
    started_at: datetime
    attempts: int
    fallback: bool
    client_retry_count: int | None
    recorded_at: datetime
