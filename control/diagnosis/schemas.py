"""The doctor's answer: per pool a verdict, its scale advice, a summary in plain words, the figures
of both windows, and every rule with the checks it made (held or not, with the numbers)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from control.diagnosis.settings import DoctorSettings

RuleName = Literal["compute_short", "not_compute", "queueing", "backlog"]
Verdict = Literal[
    "healthy", "idle", "no_baseline", "compute_short", "not_compute", "queueing", "backlog"
]

# The gauge `sluicegate_pool_scale_advice`: what the verdict asks of the operator.
SCALE_ADVICE: dict[Verdict, int] = {
    "healthy": 0,
    "idle": 0,
    "no_baseline": 0,
    "compute_short": 1,
    "queueing": 2,
    "not_compute": 3,
    "backlog": 4,
}
ADVICE_HELP = (
    "The doctor's advice per pool: 0 healthy (or too little traffic to judge), 1 scale upstream "
    "compute, 2 fix queueing/scheduling, 3 bottleneck outside compute, 4 backlog building."
)


class Check(BaseModel):
    name: str = Field(description="What was checked, e.g. `upstream_p50_rises`")
    held: bool
    detail: str = Field(description="The numbers and the threshold, in words")


class RuleResult(BaseModel):
    rule: RuleName
    matched: bool = Field(description="Every check held")
    scale_advice: int
    title: str
    advice: str
    checks: list[Check]
    not_evaluated: str | None = Field(
        default=None, description="Why the rule could not be judged (e.g. no route has an SLO)"
    )


class Percentiles(BaseModel):
    p50: float | None
    p95: float | None
    p99: float | None


class WindowFigures(BaseModel):
    """One of the two windows the doctor compares, as the rules read it."""

    seconds: int
    requests: int = Field(description="Requests that finished")
    rejected: int = Field(description="Requests refused by admission")
    arrival_per_s: float = Field(description="Requests that arrived per second (served + refused)")
    served_per_s: float = Field(description="Requests that finished per second")
    error_rate: float
    timeout_rate: float
    client_retry_share: float = Field(description="Share of requests that were client retries")
    latency_ms: Percentiles = Field(description="Of the latency the doctor judges (see `latency`)")
    queue_wait_ms: Percentiles
    upstream_p50_ms: float | None = Field(
        description="P50 of the latency less P50 of the gateway's queue wait"
    )
    max_queue_depth: int
    max_inflight: int


class RouteObjective(BaseModel):
    route: str
    slo_ttft_p95_ms: int
    ttft_p95_ms: float | None = Field(description="The route's P95 of TTFT in the recent window")


class PoolDiagnosis(BaseModel):
    pool: str
    verdict: Verdict
    scale_advice: int = Field(description="The value of sluicegate_pool_scale_advice")
    summary: str = Field(description="The verdict in plain words, with the numbers behind it")
    latency: Literal["ttft_ms", "total_ms"] = Field(
        description="TTFT when both windows have enough streams, else total time"
    )
    recent: WindowFigures
    baseline: WindowFigures
    queue_limit: int = Field(description="All lanes together")
    inflight_limit: int | None
    queue_near_slots: int = Field(
        description="Recent 10-second slots with the queue near its limit"
    )
    slots: int = Field(description="10-second slots in the recent window")
    objectives: list[RouteObjective] = Field(description="Routes served by the pool with an SLO")
    rules: list[RuleResult]


class DiagnosisOut(BaseModel):
    at: datetime
    recent_seconds: int
    baseline_seconds: int
    thresholds: DoctorSettings
    pools: list[PoolDiagnosis]
