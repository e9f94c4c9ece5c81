"""Drill requests and responses, and the traffic a drill's routes carry."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from control.api.schemas import ModelName, Name, Slug, Strict

DrillState = Literal["active", "ended"]
MemberState = Literal["ready", "ejected", "cooling_down", "failing_checks", "drilled", "unknown"]


class DrillCreate(Strict):
    route: ModelName | None = Field(
        default=None, description="The route to watch; it must send requests to the pool"
    )
    pool: Slug
    member: Slug | None = Field(
        default=None, description="The member forced out; absent: the whole pool"
    )
    seconds: int = Field(ge=1, le=86_400, description="How long (at most a day)")
    reason: Name | None = None
    allow_outage: bool = Field(
        default=False,
        description="Drill even if a route using the pool would have no path left to serve it",
    )


class DrillOut(BaseModel):
    id: str
    state: DrillState
    route: str | None
    pool: str
    member: str | None = Field(description="null: the whole pool")
    reason: str | None
    seconds: int
    actor_id: str
    actor_name: str
    started_at: datetime
    ends_at: datetime
    ended_at: datetime | None = Field(description="Set once the drill is over, whichever way")
    ended_by: str | None = Field(description="Who ended it before its time")


class UpstreamTraffic(BaseModel):
    route: str
    pool: str
    upstream: str
    state: MemberState = Field(description="The member's state in the data plane now")
    requests: dict[str, int] = Field(
        description="Requests answered through this upstream since the data plane started, "
        "by status class (2xx, 4xx, 5xx, ...): counters, to be differenced"
    )


class DrillTraffic(BaseModel):
    drill: DrillOut
    at: datetime
    upstreams: list[UpstreamTraffic] = Field(
        description="Every member of every pool of the watched routes (the drill's route, or "
        "every route using its pool)"
    )
    rejections: dict[str, int] = Field(
        description="Requests the gateway refused itself (no upstream reached), by reason, "
        "over all routes: counters"
    )
