"""A pool's data-plane policies: admission (in-flight cap and priority lanes), retries, outlier
ejection and active health checks, with the core's defaults (`defaults.py`, read from the core).

Each policy is stored whole, every value explicit: a value the operator left out is stored as
the default in force when the pool was created, so reads show what the core runs and a later
change of a default never changes a pool behind its operator's back. The one exception is
`admission.max_inflight`, whose default is derived from the members: stored null, sent null.

Requests carry partial policies (every field optional) merged onto the stored one (onto the
defaults at creation: `updates.py`). Pydantic checks types, signs and sizes; the operating ranges
(at most 10 attempts, lanes waiting at most an hour, ...) are the core's, and its refusal comes
back as `core_rejected` naming the request field. No HTTP plumbing here: the CLI reads these
models for its options.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Field, StringConstraints, field_validator

from control.api.schemas import Concurrency, Strict
from control.api.validation import not_null
from control.pools.defaults import ADMISSION, EJECTION, HEALTH_CHECK, RETRY

U32 = 4_294_967_295
MAX_MS = 1_000_000_000_000

Millis = Annotated[int, Field(ge=1, le=MAX_MS)]
MillisOrZero = Annotated[int, Field(ge=0, le=MAX_MS)]
Count = Annotated[int, Field(ge=0, le=U32)]
PositiveCount = Annotated[int, Field(ge=1, le=U32)]
Depth = Annotated[int, Field(ge=0, le=100_000_000, description="Requests that may wait")]
Ratio = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]
Share = Annotated[
    float,
    Field(gt=0, le=1, allow_inf_nan=False, description="Largest share of a lane one tenant holds"),
]
RetryOn = Annotated[
    str,
    StringConstraints(pattern=r"^(connect|reset|timeout|429|5[0-9]{2})$"),
    Field(description="`connect`, `reset`, `timeout`, `429` or a 5xx status"),
]
CheckPath = Annotated[
    str,
    StringConstraints(pattern=r"^/[!-~]{0,254}$"),
    Field(description="Relative to the member's base URL, e.g. `/models`"),
]


def _distinct(values: list[str] | None) -> list[str] | None:
    if values is not None and len(set(values)) != len(values):
        raise ValueError("lists an entry more than once")
    return values


# --- whole policies: what is stored, sent to the core and read back -----------------------------


class Lane(Strict):
    max_depth: Depth
    max_wait_ms: MillisOrZero = Field(description="Longest wait in the lane before a 503")
    weight: PositiveCount = Field(description="Share of freed slots while several lanes wait")


class Admission(Strict):
    max_inflight: Concurrency | None = Field(
        default=ADMISSION["max_inflight"],
        description="Requests at the pool's upstreams at once. On input, null derives it from "
        "the members: the sum of their max_concurrency when all have one, else no limit (and "
        "no queue). Reads show the limit in force (null: none).",
    )
    interactive: Lane = Field(
        default_factory=lambda: Lane.model_validate(ADMISSION["interactive"]),
        description="The lane of interactive requests",
    )
    batch: Lane = Field(
        default_factory=lambda: Lane.model_validate(ADMISSION["batch"]),
        description="The lane of batch requests",
    )
    tenant_share: Share = ADMISSION["tenant_share"]
    keepalive_ms: Millis = Field(
        default=ADMISSION["keepalive_ms"],
        description="SSE keep-alive comments to streams waiting in a lane",
    )


class Retry(Strict):
    max_attempts: PositiveCount = Field(
        default=RETRY["max_attempts"], description="Attempts, the first included"
    )
    backoff_base_ms: MillisOrZero = Field(
        default=RETRY["backoff_base_ms"],
        description="Full jitter: sleep rand(0, min(cap, base * 2^retry))",
    )
    backoff_cap_ms: MillisOrZero = Field(
        default=RETRY["backoff_cap_ms"], description="Longest backoff"
    )
    budget_ratio: Ratio = Field(
        default=RETRY["budget_ratio"], description="Retries per request over the window"
    )
    budget_min_per_second: Ratio = Field(
        default=RETRY["budget_min_per_second"], description="Retries allowed regardless"
    )
    retry_on: list[RetryOn] = Field(
        default_factory=lambda: list(RETRY["retry_on"]),
        max_length=64,
        description="What may be retried: connect, reset, timeout, 429, 5xx codes",
    )
    max_retry_after_ms: MillisOrZero = Field(
        default=RETRY["max_retry_after_ms"],
        description="A longer upstream retry-after is not waited for",
    )

    _retry_on = field_validator("retry_on")(_distinct)


class Ejection(Strict):
    consecutive_failures: Count = Field(
        default=EJECTION["consecutive_failures"],
        description="Upstream failures in a row that eject a member (0: never)",
    )
    base_ms: Millis = Field(
        default=EJECTION["base_ms"], description="First ejection; doubles up to max_ms"
    )
    max_ms: Millis = Field(default=EJECTION["max_ms"], description="Longest ejection")
    max_ejected_percent: int = Field(
        default=EJECTION["max_ejected_percent"],
        ge=0,
        le=100,
        description="Largest share of the members out at once",
    )


class HealthCheck(Strict):
    path: CheckPath = HEALTH_CHECK["path"]
    interval_ms: Millis = Field(
        default=HEALTH_CHECK["interval_ms"], description="Between two checks of a member"
    )
    timeout_ms: Millis = Field(default=HEALTH_CHECK["timeout_ms"], description="Of one check")
    unhealthy_after: PositiveCount = Field(
        default=HEALTH_CHECK["unhealthy_after"],
        description="Failed checks in a row that take a member out",
    )


# --- partial policies: what requests carry ------------------------------------------------------


class _Partial(Strict):
    """Every field may be left out; none may be null unless it says so."""

    @field_validator("*")
    @classmethod
    def _not_null(cls, value: object) -> object:
        return not_null(value)


class LanePatch(_Partial):
    max_depth: Depth | None = None
    max_wait_ms: MillisOrZero | None = None
    weight: PositiveCount | None = None


class AdmissionPatch(Strict):
    max_inflight: Concurrency | None = Field(
        default=None, description="null: derived from the members' max_concurrency"
    )
    interactive: LanePatch | None = None
    batch: LanePatch | None = None
    tenant_share: Share | None = None
    keepalive_ms: Millis | None = None

    @field_validator("interactive", "batch", "tenant_share", "keepalive_ms")
    @classmethod
    def _not_null(cls, value: object) -> object:
        return not_null(value)


class RetryPatch(_Partial):
    max_attempts: PositiveCount | None = None
    backoff_base_ms: MillisOrZero | None = None
    backoff_cap_ms: MillisOrZero | None = None
    budget_ratio: Ratio | None = None
    budget_min_per_second: Ratio | None = None
    retry_on: list[RetryOn] | None = Field(default=None, max_length=64)
    max_retry_after_ms: MillisOrZero | None = None

    _retry_on = field_validator("retry_on")(_distinct)


class EjectionPatch(_Partial):
    consecutive_failures: Count | None = None
    base_ms: Millis | None = None
    max_ms: Millis | None = None
    max_ejected_percent: int | None = Field(default=None, ge=0, le=100)


class HealthCheckPatch(_Partial):
    path: CheckPath | None = None
    interval_ms: Millis | None = None
    timeout_ms: Millis | None = None
    unhealthy_after: PositiveCount | None = None


# --- reading and comparing (merging a request onto a policy: `updates.py`) ----------------------

M = TypeVar("M", bound=BaseModel)


def read(model: type[M], stored: dict[str, Any]) -> M:
    """A stored policy; fields added since it was stored take their defaults."""
    return model.model_validate(stored)


def inflight_in_force(configured: int | None, member_caps: Sequence[int | None]) -> int | None:
    """The core's rule for an unset `max_inflight`."""
    if configured is not None:
        return configured
    if not member_caps or any(cap is None for cap in member_caps):
        return None
    return sum(cap for cap in member_caps if cap is not None)


def policy_diff(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    """The top-level fields of a policy that differ (for the audit summary); None if none."""
    if old is None or new is None:
        return None if old == new else {"enabled": new is not None, **(new or {})}
    diff = {name: value for name, value in new.items() if old.get(name) != value}
    return diff or None
