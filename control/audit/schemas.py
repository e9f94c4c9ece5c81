"""Audit log responses."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class AuditOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    at: datetime
    actor_id: str
    actor_name: str
    actor_role: str
    action: str
    resource_type: str
    resource_id: str
    tenant_id: str | None
    summary: dict[str, Any]
    config_version: int | None
