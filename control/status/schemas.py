"""The core's windowed status as typed models: read from `Core.status_snapshot()` and returned
by `GET /v1/admin/status` as they are, plus the routes' objectives from the database.

Percentiles come from log-linear histograms (8 buckets per doubling, about 9% resolution) and are
reported as the upper edge of their bucket; `null` when the window has no sample."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from control.fleet.schemas import ReplicaOut

MemberState = Literal["ready", "ejected", "cooling_down", "failing_checks", "drilled"]


class Quantiles(BaseModel):
    n: int = Field(description="Samples in the window")
    p50: float | None
    p95: float | None
    p99: float | None


class WindowStats(BaseModel):
    """One window of a pool or a route. Requests are counted when they finish."""

    seconds: int = Field(description="Length of the window (whole 10-second slots)")
    requests: int = Field(description="Requests that finished in the window")
    rate_per_s: float = Field(description="Finished requests per second")
    errors: int
    error_rate: float = Field(description="Share of requests that failed (5xx, cut, timeout)")
    timeouts: int
    timeout_rate: float = Field(description="Share of requests that ended in an upstream timeout")
    rejected: int = Field(description="Requests refused by admission (queue full, deadline, share)")
    client_retries: int = Field(description="Requests carrying x-stainless-retry-count > 0")
    output_tokens_per_s: float
    ttft_ms: Quantiles = Field(description="Time to first token (streams)")
    tpot_ms: Quantiles = Field(description="Time per output token (streams)")
    total_ms: Quantiles = Field(description="Arrival to last byte")
    queue_wait_ms: Quantiles = Field(description="Wait for admission to the pool")
    max_queue_depth: int = Field(description="Highest queue depth seen (all lanes)")
    max_inflight: int = Field(description="Highest in-flight count seen")


class MemberStatus(BaseModel):
    id: str
    state: MemberState
    inflight: int
    ejections: int = Field(description="Outlier ejections since start")
    ttfb_ewma_ms: float = Field(description="Moving average of the time to the first byte")


class PoolStatus(BaseModel):
    id: str
    kind: str = Field(description="API the members speak (openai or anthropic)")
    inflight: int
    inflight_limit: int | None = Field(description="admission.max_inflight; null: no limit")
    queue_depth: dict[str, int] = Field(description="Requests waiting now, by priority")
    queue_limit: dict[str, int] = Field(description="Lane sizes, by priority")
    drilled: bool
    members: list[MemberStatus]
    windows: dict[str, WindowStats]


class RouteStatus(BaseModel):
    alias: str
    chain: list[str] = Field(description="Pools in fallback order")
    windows: dict[str, WindowStats]


class CoreStatus(BaseModel):
    """`Core.status_snapshot()` as the core writes it."""

    now: int = Field(description="Unix seconds of the reading (0: no config yet)")
    config_version: int
    pools: list[PoolStatus]
    routes: list[RouteStatus]


class WindowSpec(BaseModel):
    name: str
    seconds: int
    ends_seconds_ago: int = Field(description="0: the window ends now")


class RouteStatusOut(RouteStatus):
    slo_ttft_p95_ms: int | None = Field(description="The route's objective for P95 of TTFT")


class StatusOut(BaseModel):
    """The whole fleet's figures (every live replica's reading merged: counts and in-flight add
    up, percentiles come from the merged histograms); one process is a fleet of one."""

    at: datetime = Field(description="Time of the reading")
    config_version: int = Field(description="Newest config version a replica runs")
    replicas: list[ReplicaOut] = Field(description="The live replicas the figures cover")
    windows: list[WindowSpec]
    pools: list[PoolStatus]
    routes: list[RouteStatusOut]
