"""Provider requests and responses. The credential is write-only: reads show a mask and a
fingerprint, never the value."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from control.schemas import Name, Slug, Strict
from control.validation import not_null

ProviderKind = Literal["openai", "anthropic"]
# Sent as a header value: visible ASCII only.
Credential = Annotated[
    str, StringConstraints(min_length=1, max_length=4096, pattern=r"^[\x21-\x7e]+$")
]
BaseURL = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2048),
    Field(description="Including the API version segment, e.g. `http://10.0.0.5:8000/v1`"),
]
INTERNAL_DOC = "Allow link-local addresses and the gateway's own ports (internal pools only)"


class ProviderCreate(Strict):
    id: Slug | None = Field(default=None, description="Chosen id; generated if absent")
    name: Name | None = Field(default=None, description="Defaults to the id")
    kind: ProviderKind
    base_url: BaseURL
    credential: Credential | None = Field(default=None, description="Write-only; encrypted at rest")
    internal: bool = Field(default=False, description=INTERNAL_DOC)


class ProviderUpdate(Strict):
    """Only the fields sent change; `credential: null` removes the credential."""

    name: Name | None = None
    base_url: BaseURL | None = None
    credential: Credential | None = Field(default=None, description="Write-only; encrypted at rest")
    internal: bool | None = Field(default=None, description=INTERNAL_DOC)

    @field_validator("name", "base_url", "internal")
    @classmethod
    def _not_null(cls, value: object) -> object:
        return not_null(value)


class ProviderOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    kind: ProviderKind
    base_url: str
    internal: bool
    credential_mask: str | None = Field(description="e.g. `sk-…abcd`; null without a credential")
    credential_fingerprint: str | None = Field(description="First 12 hex digits of its SHA-256")
    created_at: datetime
    updated_at: datetime
