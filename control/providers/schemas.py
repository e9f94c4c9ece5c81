"""Provider requests and responses. The credential is write-only: reads show a mask and a
fingerprint, never the value."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from control.api.schemas import Name, Slug, Strict
from control.api.validation import not_null

# openai: OpenAI's API and every server compatible with it (vLLM, ...); azure_openai: the same
# API as Azure serves it (deployment in the path, `api-version` query, `api-key` header).
ProviderKind = Literal["openai", "anthropic", "azure_openai"]
# Sent as a header value: visible ASCII only.
Credential = Annotated[
    str, StringConstraints(min_length=1, max_length=4096, pattern=r"^[\x21-\x7e]+$")
]
BaseURL = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2048),
    Field(description="Including the API version segment, e.g. `http://10.0.0.5:8000/v1`"),
]
INTERNAL_DOC = "Allow link-local addresses (internal pools only)"
HeaderName = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
]
# Sent as a header value: visible ASCII and spaces.
HeaderValue = Annotated[str, StringConstraints(max_length=1024, pattern=r"^[\x20-\x7e]*$")]
Headers = Annotated[
    dict[HeaderName, HeaderValue],
    Field(
        max_length=32,
        description="Sent to the upstream with every request, over a client's header of the same "
        "name (e.g. `OpenAI-Organization`). Not for secrets: the credential is `credential`.",
    ),
]
ForwardHeaders = Annotated[
    list[HeaderName],
    Field(
        max_length=32,
        description="Client headers this upstream may receive beyond the gateway's allow-list "
        "(content-type, accept, user-agent, anthropic-version; trace context is the gateway's "
        "to write), e.g. `anthropic-beta`. Credentials, framing and trace headers are refused.",
    ),
]


ApiVersion = Annotated[
    str,
    StringConstraints(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9.-]+$"),
    Field(description="azure_openai only (required there): the api-version query, e.g. 2024-10-21"),
]
AuthHeader = Annotated[
    HeaderName,
    Field(
        description="openai only: the header the credential goes in, as it is, instead of "
        "`Authorization: Bearer` (e.g. `api-key`)"
    ),
]


class ProviderCreate(Strict):
    id: Slug | None = Field(default=None, description="Chosen id; generated if absent")
    name: Name | None = Field(default=None, description="Defaults to the id")
    kind: ProviderKind
    base_url: BaseURL
    credential: Credential | None = Field(default=None, description="Write-only; encrypted at rest")
    internal: bool = Field(default=False, description=INTERNAL_DOC)
    headers: Headers = Field(default_factory=dict)
    forward_headers: ForwardHeaders = Field(default_factory=list)
    api_version: ApiVersion | None = None
    auth_header: AuthHeader | None = None


class ProviderUpdate(Strict):
    """Only the fields sent change; `credential: null` removes the credential."""

    name: Name | None = None
    base_url: BaseURL | None = None
    credential: Credential | None = Field(default=None, description="Write-only; encrypted at rest")
    internal: bool | None = Field(default=None, description=INTERNAL_DOC)
    headers: Headers | None = None
    forward_headers: ForwardHeaders | None = None
    api_version: ApiVersion | None = None
    auth_header: AuthHeader | None = Field(
        default=None, description="openai only; null: back to `Authorization: Bearer`"
    )

    @field_validator("name", "base_url", "internal", "headers", "forward_headers", "api_version")
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
    headers: dict[str, str]
    forward_headers: list[str]
    api_version: str | None
    auth_header: str | None
    credential_mask: str | None = Field(description="e.g. `sk-…abcd`; null without a credential")
    credential_fingerprint: str | None = Field(description="First 12 hex digits of its SHA-256")
    created_at: datetime
    updated_at: datetime
