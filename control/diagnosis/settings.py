"""The doctor's `[doctor]` settings: which windows it compares and the thresholds of its rules.
Each option is documented in `control/sluicegate.example.toml`; the rules in `rules.py`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The core keeps an hour of 10-second slots.
SLOT_SECONDS = 10
HISTORY_SECONDS = 3600


class DoctorSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The recent window (ending now) and the baseline window just before it, in seconds
    # (multiples of the core's 10-second slots; together at most an hour).
    recent_seconds: int = Field(default=60, ge=10, le=600, multiple_of=SLOT_SECONDS)
    baseline_seconds: int = Field(default=300, ge=10, le=3590, multiple_of=SLOT_SECONDS)
    # Completed requests a window needs before the doctor judges it.
    min_requests: int = Field(default=20, ge=1, le=1_000_000)
    # A percentile "rises" when it reaches rise_ratio times its baseline value and grows by at
    # least min_rise_ms; otherwise it "holds".
    rise_ratio: float = Field(default=1.5, gt=1, le=100)
    min_rise_ms: float = Field(default=100.0, ge=0, le=3_600_000)
    # Traffic "rises" when the arrival rate (served + refused) reaches this times the baseline's.
    traffic_rise_ratio: float = Field(default=1.2, gt=1, le=100)
    # The tail "pulls away" when P99 >= tail_ratio x P95, or when the gateway's own queue wait
    # makes up at least queue_share of P95.
    tail_ratio: float = Field(default=1.5, gt=1, le=100)
    queue_share: float = Field(default=0.5, gt=0, le=1)
    # The queue is "near its limit" in a 10-second slot when its depth reached queue_near_fraction
    # of the pool's queue limit, or admission refused requests; "sustained" when that held in at
    # least queue_sustained_fraction of the recent window's slots.
    queue_near_fraction: float = Field(default=0.8, gt=0, le=1)
    queue_sustained_fraction: float = Field(default=0.5, gt=0, le=1)
    # Throughput is "no longer rising with in-flight" when the highest in-flight count grew while
    # requests served per second per request in flight fell to at most this share of the baseline.
    throughput_per_inflight_drop: float = Field(default=0.7, gt=0, lt=1)
    # Success "looks normal" while errors other than timeouts stay at or below this rate.
    normal_error_rate: float = Field(default=0.01, ge=0, le=1)
    # Client retries (requests with x-stainless-retry-count > 0) count as "rising" from this
    # share of requests on, and rising (rise_ratio) against the baseline's share.
    min_retry_share: float = Field(default=0.02, gt=0, le=1)
    # Upstream timeouts count from this rate on.
    min_timeout_rate: float = Field(default=0.005, gt=0, le=1)

    @model_validator(mode="after")
    def _within_history(self) -> DoctorSettings:
        if self.recent_seconds + self.baseline_seconds > HISTORY_SECONDS:
            raise ValueError(
                "recent_seconds + baseline_seconds must be at most 3600 (the core keeps an hour)"
            )
        return self
