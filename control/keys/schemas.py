"""Tenant API key requests and responses. The plaintext key appears in exactly two responses:
the creation and the rotation that produced it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from control.api.schemas import (
    Concurrency,
    Models,
    Name,
    Rpm,
    RpmBurst,
    Slug,
    Strict,
    Timestamp,
    Tpm,
    TpmBurst,
    distinct_models,
)
from control.api.validation import not_null
from control.quotas.schemas import QuotaIn, QuotaOut

Priority = Literal["interactive", "batch"]
# What the key can do now: `expired` past expires_at, `disabled` by itself or its tenant,
# `revoked` explicitly or once a rotation's overlap has ended.
KeyState = Literal["active", "disabled", "expired", "revoked"]

MODELS_DOC = (
    "Model aliases the key may use, within its tenant's allowlist; null means every route the "
    "tenant allows"
)
QUOTA_DOC = (
    "Tokens and/or money per period; null for none. Never above the tenant's quota of the same "
    "period. A rotated key gets the same quota, counted afresh."
)


class KeyCreate(Strict):
    tenant_id: Slug
    name: Name | None = None
    models: Models | None = Field(default=None, max_length=1000, description=MODELS_DOC)
    rpm: Rpm | None = None
    tpm: Tpm | None = None
    max_concurrency: Concurrency | None = None
    rpm_burst: RpmBurst | None = None
    tpm_burst: TpmBurst | None = None
    priority: Priority = "interactive"
    expires_at: Timestamp | None = Field(
        default=None, description="ISO 8601; UTC if no offset is given"
    )
    quota: QuotaIn | None = Field(default=None, description=QUOTA_DOC)

    _models = field_validator("models")(distinct_models)


class KeyUpdate(Strict):
    """Only the fields sent change; `null` clears a limit, the allowlist or the expiry."""

    name: Name | None = None
    status: Literal["active", "disabled"] | None = None
    models: Models | None = Field(default=None, max_length=1000, description=MODELS_DOC)
    rpm: Rpm | None = None
    tpm: Tpm | None = None
    max_concurrency: Concurrency | None = None
    rpm_burst: RpmBurst | None = None
    tpm_burst: TpmBurst | None = None
    priority: Priority | None = None
    expires_at: Timestamp | None = None
    quota: QuotaIn | None = Field(default=None, description=QUOTA_DOC)

    _models = field_validator("models")(distinct_models)

    @field_validator("status", "priority")
    @classmethod
    def _not_null(cls, value: str | None) -> str:
        return not_null(value)


class KeyRotate(Strict):
    overlap_seconds: int = Field(
        default=0,
        ge=0,
        le=30 * 86400,
        description="How long the old key keeps working (0: revoked at once; at most 30 days)",
    )
    expires_at: Timestamp | None = Field(
        default=None, description="Expiry of the new key; the old key's expiry if left out"
    )


class AdminPolicy(BaseModel):
    """What the operator set and a tenant-scoped token may only tighten; null: not locked."""

    status: Literal["disabled"] | None = None
    models: list[str] | None = Field(default=None, description="The key's list stays within it")
    priority: Literal["batch"] | None = None
    rpm: int | None = None
    tpm: int | None = None
    max_concurrency: int | None = None
    rpm_burst: int | None = None
    tpm_burst: int | None = None
    quota: QuotaIn | None = Field(
        default=None, description="Same period, allowances at most these, no reset"
    )


class KeyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    tenant_id: str
    name: str | None
    prefix: str = Field(description="The public start of the key, as it appears in logs")
    status: KeyState
    priority: Priority
    models: list[str] | None
    rpm: int | None
    tpm: int | None
    max_concurrency: int | None
    rpm_burst: int | None = Field(description="In force: an unset burst reads as the rpm")
    tpm_burst: int | None = Field(description="In force: an unset burst reads as the tpm")
    expires_at: datetime | None
    quota: QuotaOut | None = Field(default=None, description="null: no quota of its own")
    replaced_by: str | None
    rotated_from: str | None
    revoked_at: datetime | None
    admin_policy: AdminPolicy = Field(
        description="The operator's bounds on this key (403 `admin_locked` for a tenant-scoped "
        "token that would loosen one)"
    )
    created_at: datetime
    updated_at: datetime

    @field_validator("admin_policy", mode="before")
    @classmethod
    def _nothing_locked(cls, value: object) -> object:
        return {} if value is None else value


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself: shown this once, stored only as a keyed hash")


class KeyRotated(BaseModel):
    key: KeyCreated
    previous: KeyOut
