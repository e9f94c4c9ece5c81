"""Usage as the API returns it: raw rows, and per-key views (time series and totals from the
rollups, latency percentiles from the raw rows of a range)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Granularity = Literal["minute", "hour", "day"]
Outcome = Literal["complete", "client_cancelled", "upstream_error", "timeout", "interrupted"]


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
    outcome: str = Field(
        description="complete, client_cancelled, upstream_error, timeout, interrupted"
    )
    error_code: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = Field(description="Of the prompt: read from the provider's cache")
    cache_write_tokens: int = Field(
        description="Of the prompt: written to the provider's cache (Anthropic's cache creation)"
    )
    reasoning_tokens: int = Field(description="Of the completion: spent on reasoning")
    usage_source: str = Field(
        description="upstream: counts the upstream reported; estimated: counted by the gateway; "
        "progress: an interrupted stream's completion, from its latest progress record"
    )
    cost_micros: int = Field(description="At the price in force, in micro-units of its currency")
    price_version: int | None = Field(description="Id of that price version (null: no price)")
    queue_wait_ms: float
    connect_ms: float | None
    ttft_ms: float | None
    tpot_ms: float | None
    duration_ms: float
    started_at: datetime
    attempts: int
    fallback: bool
    client_retry_count: int | None
    tags: dict[str, str] | None = Field(description="The request's x-sluicegate-tags")
    end_user: str | None = Field(
        description="The end user the request named (OpenAI user, Anthropic metadata.user_id)"
    )
    recorded_at: datetime


class Totals(BaseModel):
    requests: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_micros: int
    errors: int = Field(description="Error statuses, upstream errors, timeouts, interruptions")


class Bucket(Totals):
    start: datetime


class UsageSeries(BaseModel):
    key_id: str
    granularity: Granularity
    model: str | None
    start: datetime = Field(description="The range asked for, aligned to whole buckets")
    end: datetime
    buckets: list[Bucket] = Field(description="Buckets with requests, oldest first")


class ModelTotals(Totals):
    model: str


class UsageByModel(BaseModel):
    key_id: str
    start: datetime = Field(description="The range asked for, aligned to whole minutes")
    end: datetime
    models: list[ModelTotals]
    total: Totals


class Percentiles(BaseModel):
    count: int = Field(description="Requests with a value in the range")
    p50: float | None
    p95: float | None
    p99: float | None


class KeyLatency(BaseModel):
    """Nearest-rank percentiles of the raw rows of the range (kept `usage.raw_retention_days`)."""

    key_id: str
    start: datetime
    end: datetime
    ttft_ms: Percentiles = Field(description="Time to first token (streams)")
    tpot_ms: Percentiles = Field(description="Time per output token after the first")


class GroupTotals(Totals):
    value: str | None = Field(description="The group's tag value, end user, model or key id")


class UsageGroups(BaseModel):
    """Totals of the raw rows of a range (kept `usage.raw_retention_days`), costliest first."""

    by: str
    start: datetime
    end: datetime
    groups: list[GroupTotals]
    truncated: bool = Field(description="More groups than `limit` exist")
