"""The fleet as the admin API shows it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

LimitsMode = Literal["shared", "fallback", "local"]


class ReplicaOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str = Field(description="Unique per process start")
    name: str
    data_address: str
    admin_address: str
    package_version: str
    started_at: datetime
    heartbeat_at: datetime
    applied_version: int | None = Field(description="Config version its data plane runs")
    refused_version: int | None = Field(
        description="A committed version its data plane refused (it runs its last good one)"
    )
    refused_message: str | None
    limits_mode: LimitsMode = Field(
        description="shared: limits counted in Redis; fallback: Redis away, local shares; "
        "local: no Redis configured"
    )
    leader: bool = Field(description="Runs the fleet's once-only jobs")
    ready: bool = Field(description="Takes new traffic (false while stopping)")


class FleetOut(BaseModel):
    committed_version: int = Field(description="The config version the database holds")
    in_step: bool = Field(description="Every live replica runs the committed version")
    leader: str | None = Field(description="The replica that runs the once-only jobs")
    replicas: list[ReplicaOut] = Field(description="Live replicas, by name")
