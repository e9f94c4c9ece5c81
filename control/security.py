"""Who is calling: admin tokens (hashed at rest) and the roles they carry.

`admin` tokens see everything. `tenant` tokens manage and read one tenant's keys and usage;
objects of any other tenant answer 404, so a tenant learns nothing about the others.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select

from control.caller import Caller, Role
from control.context import context_of
from control.errors import Unauthorized
from control.tokens.models import AdminToken

TOKEN_PREFIX = "sgt_"


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_prefix(token: str) -> str:
    """Public start of a token: 12 characters of ours (8 of 43 random ones), almost nothing of a
    token an operator chose in the config file."""
    if token.startswith(TOKEN_PREFIX) and len(token) >= 40:
        return token[:12]
    return token[:2] + "…"


_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="An admin or tenant-scoped admin token: `Authorization: Bearer sgt_...`",
)


def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    if credentials is None or not credentials.credentials:
        raise Unauthorized("missing `Authorization: Bearer <admin token>`")
    digest = hash_token(credentials.credentials)
    ctx = context_of(request)
    with ctx.sessions() as session:
        token = session.scalars(
            select(AdminToken).where(
                AdminToken.token_hash == digest, AdminToken.revoked_at.is_(None)
            )
        ).one_or_none()
    if token is None:
        raise Unauthorized("unknown or revoked admin token")
    role: Role = "admin" if token.role == "admin" else "tenant"
    return Caller(token_id=token.id, name=token.name, role=role, tenant_id=token.tenant_id)


CallerDep = Annotated[Caller, Depends(authenticate)]
