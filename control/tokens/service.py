"""Admin token operations. Creating and revoking tokens needs an admin token; a tenant token
never learns about other tokens. These changes do not touch the data plane's snapshot."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.api.errors import Conflict, NotFound, Validation
from control.api.pagination import decode_cursor, keyset, page
from control.api.schemas import Page
from control.api.security import generate_token, token_prefix
from control.context import ControlContext
from control.ids import new_id
from control.tenants.models import Tenant
from control.timeutil import utcnow
from control.tokens.hashing import HMAC_SHA256, hash_token
from control.tokens.models import AdminToken
from control.tokens.schemas import TokenOut, TokenRole


def new_token(
    pepper: str,
    name: str,
    role: TokenRole,
    tenant_id: str | None,
    created_by: str | None,
    expires_at: datetime | None = None,
    secret: str | None = None,
) -> tuple[AdminToken, str]:
    """A token row and its secret (generated unless given: the configured bootstrap token)."""
    secret = generate_token() if secret is None else secret
    row = AdminToken(
        id=new_id("tok"),
        name=name,
        role=role,
        tenant_id=tenant_id,
        token_hash=hash_token(pepper, secret),
        hash_scheme=HMAC_SHA256,
        prefix=token_prefix(secret),
        created_at=utcnow(),
        created_by=created_by,
        expires_at=expires_at,
    )
    return row, secret


def usable(now: datetime) -> ColumnElement[bool]:
    """Tokens that authenticate at `now`: not revoked, not expired."""
    return AdminToken.revoked_at.is_(None) & or_(
        AdminToken.expires_at.is_(None), AdminToken.expires_at > now
    )


def create(
    ctx: ControlContext,
    caller: Caller,
    name: str,
    tenant_id: str | None,
    expires_at: datetime | None = None,
) -> tuple[AdminToken, str]:
    if tenant_id is not None:
        caller.check_tenant(tenant_id)
    caller.require_admin()
    if expires_at is not None and expires_at <= utcnow():
        raise Validation.field("expires_at", "must be in the future")
    role: TokenRole = "admin" if tenant_id is None else "tenant"
    with ctx.mutator.mutate(caller, affects_core=False) as m:
        if tenant_id is not None and m.session.get(Tenant, tenant_id) is None:
            raise NotFound("tenant not found")
        token, secret = new_token(ctx.pepper, name, role, tenant_id, caller.token_id, expires_at)
        m.session.add(token)
        summary = {"name": name, "role": role, "prefix": token.prefix}
        if expires_at is not None:
            summary["expires_at"] = expires_at.isoformat()
        m.record("token.create", "token", token.id, summary, tenant_id=tenant_id)
    return token, secret


def list_page(
    session: Session,
    caller: Caller,
    *,
    tenant_id: str | None,
    role: TokenRole | None,
    limit: int,
    cursor: str | None,
) -> Page[TokenOut]:
    caller.require_admin()
    stmt = select(AdminToken)
    if tenant_id is not None:
        stmt = stmt.where(AdminToken.tenant_id == tenant_id)
    if role is not None:
        stmt = stmt.where(AdminToken.role == role)
    rows = session.scalars(keyset(stmt, AdminToken.id, decode_cursor(cursor, str), limit)).all()
    items, next_cursor = page(rows, limit, lambda t: t.id)
    return Page(items=[TokenOut.model_validate(t) for t in items], next_cursor=next_cursor)


def revoke(ctx: ControlContext, caller: Caller, token_id: str) -> AdminToken:
    caller.require_admin()
    with ctx.mutator.mutate(caller, affects_core=False) as m:
        token = m.session.get(AdminToken, token_id)
        if token is None:
            raise NotFound("token not found")
        if token.revoked_at is None:
            if token.role == "admin":
                active_admins = m.session.scalar(
                    select(func.count()).where(AdminToken.role == "admin", usable(utcnow()))
                )
                if (active_admins or 0) <= 1:
                    raise Conflict("this is the last admin token; create another one first")
            token.revoked_at = utcnow()
            summary = {"name": token.name, "prefix": token.prefix}
            m.record("token.revoke", "token", token.id, summary, tenant_id=token.tenant_id)
    return token
