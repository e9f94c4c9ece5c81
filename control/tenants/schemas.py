"""Tenant requests and responses."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from control.quotas.schemas import QuotaIn, QuotaOut
from control.schemas import Concurrency, Name, Rpm, RpmBurst, Slug, Strict, Tpm, TpmBurst
from control.validation import not_null

QUOTA_DOC = "Tokens and/or money per period over all the tenant's keys; null for none"

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
    quota: QuotaIn | None = Field(default=None, description=QUOTA_DOC)


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
    quota: QuotaIn | None = Field(default=None, description=QUOTA_DOC)

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
    quota: QuotaOut | None
    created_at: datetime
    updated_at: datetime
