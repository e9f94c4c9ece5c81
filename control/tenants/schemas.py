"""Tenant requests and responses."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from control.api.schemas import (
    Concurrency,
    Models,
    Name,
    Rpm,
    RpmBurst,
    Slug,
    Strict,
    Tpm,
    TpmBurst,
    distinct_models,
)
from control.api.validation import not_null
from control.quotas.schemas import QuotaIn, QuotaOut

QUOTA_DOC = "Tokens and/or money per period over all the tenant's keys; null for none"
MODELS_DOC = (
    "Model aliases the tenant's keys may use; null means every route. Each key's own list stays "
    "within it, and narrowing it narrows every key at once"
)
MaxKeys = Annotated[
    int,
    Field(
        ge=1,
        le=10_000_000,
        description="Keys the tenant may hold (not revoked, not expired); null: the server's "
        "default (admin.default_max_keys)",
    ),
]

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
    models: Models | None = Field(default=None, max_length=1000, description=MODELS_DOC)
    max_keys: MaxKeys | None = None

    _models = field_validator("models")(distinct_models)


class TenantUpdate(Strict):
    """Only the fields sent change; `null` clears a limit (unlimited), the allowlist (every
    route) or `max_keys` (the server's default). Disabling a tenant disables every one of its
    keys and refuses its tenant-scoped tokens. A lower `max_keys` keeps the keys already held
    and refuses new ones until the tenant is below it."""

    name: Name | None = None
    status: TenantStatus | None = None
    rpm: Rpm | None = None
    tpm: Tpm | None = None
    max_concurrency: Concurrency | None = None
    rpm_burst: RpmBurst | None = None
    tpm_burst: TpmBurst | None = None
    quota: QuotaIn | None = Field(default=None, description=QUOTA_DOC)
    models: Models | None = Field(default=None, max_length=1000, description=MODELS_DOC)
    max_keys: MaxKeys | None = None

    _models = field_validator("models")(distinct_models)

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
    models: list[str] | None
    max_keys: int = Field(description="In force: the tenant's own, or the server's default")
    created_at: datetime
    updated_at: datetime
