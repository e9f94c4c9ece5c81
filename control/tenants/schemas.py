"""Tenant requests and responses."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from control.schemas import Concurrency, Name, Rpm, RpmBurst, Slug, Strict, Tpm, TpmBurst
from control.validation import not_null

TenantStatus = Literal["active", "disabled"]


class TenantCreate(Strict):
    id: Slug | None = Field(
        default=None, description="Chosen id (letters, digits, `._-`); generated if absent"
    )
    name: Name
    rpm: Rpm | None = None
    tpm: Tpm | None = None
    max_concurrency: Concurrency | None = None
    rpm_burst: RpmBurst | None = None
    tpm_burst: TpmBurst | None = None


class TenantUpdate(Strict):
    """Only the fields sent change; `null` clears a limit (unlimited). Disabling a tenant
    disables every one of its keys."""

    name: Name | None = None
    status: TenantStatus | None = None
    rpm: Rpm | None = None
    tpm: Tpm | None = None
    max_concurrency: Concurrency | None = None
    rpm_burst: RpmBurst | None = None
    tpm_burst: TpmBurst | None = None

    @field_validator("name", "status")
    @classmethod
    def _not_null(cls, value: str | None) -> str:
        return not_null(value)


class TenantOut(BaseModel):
    """Limits as the data plane enforces them: an unset burst reads as its per-minute limit."""

    id: str
    name: str
    status: TenantStatus
    rpm: int | None
    tpm: int | None
    max_concurrency: int | None
    rpm_burst: int | None
    tpm_burst: int | None
    created_at: datetime
    updated_at: datetime
