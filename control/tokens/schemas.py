"""Admin token requests and responses. The token itself appears only in the creation response."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from control.api.schemas import Name, Strict, Timestamp

TokenRole = Literal["admin", "tenant"]


class TokenCreate(Strict):
    name: Name
    expires_at: Timestamp | None = Field(
        default=None, description="Refused from then on (ISO 8601, UTC without an offset)"
    )


class TokenOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    role: TokenRole
    tenant_id: str | None
    prefix: str
    created_at: datetime
    created_by: str | None
    revoked_at: datetime | None
    expires_at: datetime | None
    last_used_at: datetime | None = Field(
        description="Last authenticated call, to the minute (written at most once a minute)"
    )


class TokenCreated(TokenOut):
    token: str = Field(description="Shown this once; only its hash is stored")


class WhoAmI(BaseModel):
    """The token a call was made with, as the API sees it (never the token itself)."""

    token_id: str
    name: str
    role: TokenRole
    tenant_id: str | None = Field(description="The tenant a tenant-scoped token manages")
    expires_at: datetime | None = Field(description="Refused from then on; null: no expiry")
