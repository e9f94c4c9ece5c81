"""Who is calling: admin tokens and the roles they carry.

`admin` tokens see everything. `tenant` tokens manage and read one tenant's keys and usage;
objects of any other tenant answer 404, so a tenant learns nothing about the others.

The token itself is identified in front of the app (`control/api/access/`), before any body is
read; `authenticate` turns that identity into the caller and its role, here and only here.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from control.api.access.gate import IDENTITY
from control.api.access.identify import Identity, bearer_token, identify
from control.api.caller import Caller, Role
from control.context import context_of

TOKEN_PREFIX = "sgt_"


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_prefix(token: str) -> str:
    """Public start of a token: 12 characters of ours (8 of 43 random ones), almost nothing of a
    token an operator chose in the config file."""
    if token.startswith(TOKEN_PREFIX) and len(token) >= 40:
        return token[:12]
    return token[:2] + "…"


# Documents the scheme in the OpenAPI description; the header is read by `bearer_token`.
_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="An admin or tenant-scoped admin token: `Authorization: Bearer sgt_...`",
)


def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    identity: Identity | None = request.scope.get(IDENTITY)
    if identity is None:
        # A route outside the gate's prefix: the same checks, here.
        secret = bearer_token(request.headers.get("authorization"))
        identity = identify(context_of(request), secret)
    role: Role = "admin" if identity.role == "admin" else "tenant"
    return Caller(
        token_id=identity.token_id, name=identity.name, role=role, tenant_id=identity.tenant_id
    )


CallerDep = Annotated[Caller, Depends(authenticate)]
