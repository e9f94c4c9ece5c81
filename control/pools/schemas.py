"""Pool requests and responses. Timeouts are checked for shape here; their operating range
(1 ms to 24 h) is the core's rule, and a refusal by the core comes back as `core_rejected`.
Policies (admission, retry, ejection, health checks) are in `policies.py`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, field_validator

from control.api.schemas import Concurrency, Name, Slug, Strict
from control.api.validation import not_null
from control.pools.defaults import TIMEOUTS
from control.pools.policies import (
    Admission,
    AdmissionPatch,
    Ejection,
    EjectionPatch,
    HealthCheck,
    HealthCheckPatch,
    Retry,
    RetryPatch,
)
from control.providers.schemas import ProviderKind

Millis = Annotated[int, Field(ge=1, le=1_000_000_000_000)]
Weight = Annotated[int, Field(ge=0, le=10_000, description="Relative share of requests")]


class Timeouts(Strict):
    connect_ms: Millis = Field(default=TIMEOUTS["connect_ms"], description="New connections")
    first_byte_ms: Millis = Field(
        default=TIMEOUTS["first_byte_ms"], description="Until headers, and a stream's first token"
    )
    idle_ms: Millis = Field(default=TIMEOUTS["idle_ms"], description="Silence between chunks")
    total_ms: Millis = Field(default=TIMEOUTS["total_ms"], description="A non-streaming call")


class TimeoutsUpdate(Strict):
    connect_ms: Millis | None = None
    first_byte_ms: Millis | None = None
    idle_ms: Millis | None = None
    total_ms: Millis | None = None

    @field_validator("connect_ms", "first_byte_ms", "idle_ms", "total_ms")
    @classmethod
    def _not_null(cls, value: int | None) -> int:
        return not_null(value)


class MemberIn(Strict):
    id: Slug | None = Field(
        default=None, description="Unique in the pool; the provider id if absent"
    )
    provider_id: Slug
    weight: Weight = 1
    max_concurrency: Concurrency | None = None
    http2: bool = Field(
        default=False, description="HTTP/2 with prior knowledge to a plaintext upstream"
    )


Members = Annotated[list[MemberIn], Field(min_length=1, max_length=256)]


class PoolCreate(Strict):
    id: Slug | None = Field(default=None, description="Chosen id; generated if absent")
    name: Name | None = Field(default=None, description="Defaults to the id")
    members: Members
    timeouts: Timeouts = Field(default_factory=lambda: Timeouts())
    admission: AdmissionPatch | None = Field(
        default=None, description="Fields left out take the core's defaults"
    )
    retry: RetryPatch | None = Field(
        default=None, description="Fields left out take the core's defaults"
    )
    ejection: EjectionPatch | None = Field(
        default=None, description="Fields left out take the core's defaults"
    )
    health_check: HealthCheckPatch | None = Field(
        default=None, description="Active checks of every member; absent or null: off"
    )


class PoolUpdate(Strict):
    """`members`, when sent, replaces the whole list; `timeouts`, `admission`, `retry`,
    `ejection` and `health_check` change the fields sent (`health_check: null` turns checks off).
    """

    name: Name | None = None
    members: Members | None = None
    timeouts: TimeoutsUpdate | None = None
    admission: AdmissionPatch | None = None
    retry: RetryPatch | None = None
    ejection: EjectionPatch | None = None
    health_check: HealthCheckPatch | None = None

    @field_validator("name", "members", "timeouts", "admission", "retry", "ejection")
    @classmethod
    def _not_null(cls, value: object) -> object:
        return not_null(value)


class MemberOut(BaseModel):
    id: str
    provider_id: str
    kind: ProviderKind
    weight: int
    max_concurrency: int | None
    http2: bool


class TimeoutsOut(BaseModel):
    connect_ms: int
    first_byte_ms: int
    idle_ms: int
    total_ms: int


class PoolOut(BaseModel):
    id: str
    name: str
    members: list[MemberOut]
    timeouts: TimeoutsOut
    admission: Admission
    retry: Retry
    ejection: Ejection
    health_check: HealthCheck | None
    created_at: datetime
    updated_at: datetime
