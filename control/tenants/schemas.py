"""Tenant requests and responses."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from control.schemas import Concurrency, Name, Rpm, Slug, Strict, Tpm
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


class TenantUpdate(Strict):
    """Only the fields sent change; `null` clears a limit (unlimited). Disabling a tenant
    disables every one of its keys."""

    name: Name | None = None
    status: TenantStatus | None = None
    rpm: Rpm | None = None
    tpm: Tpm | None = None
    max_concurrency: Concurrency | None = None

    @field_validator("name", "status")
    @classmethod
    def _not_null(cls, value: str | None) -> str:
        return not_null(value)


class TenantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    status: TenantStatus
    rpm: int | None
    tpm: int | None
    max_concurrency: int | None
    created_at: datetime
    updated_at: datetime
