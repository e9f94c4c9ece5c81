"""Admin token operations. Creating and revoking tokens needs an admin token; a tenant token
never learns about other tokens. These changes do not touch the data plane's snapshot."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.caller import Caller
from control.context import ControlContext
from control.errors import Conflict, NotFound
from control.ids import new_id
from control.pagination import decode_cursor, keyset, page
from control.schemas import Page
from control.security import generate_token, hash_token, token_prefix
from control.tenants.models import Tenant
from control.timeutil import utcnow
from control.tokens.models import AdminToken
from control.tokens.schemas import TokenOut, TokenRole


def new_token(
    name: str, role: TokenRole, tenant_id: str | None, created_by: str | None
) -> tuple[AdminToken, str]:
    secret = generate_token()
    row = AdminToken(
        id=new_id("tok"),
        name=name,
        role=role,
        tenant_id=tenant_id,
        token_hash=hash_token(secret),
        prefix=token_prefix(secret),
        created_at=utcnow(),
        created_by=created_by,
    )
    return row, secret


def create(
    ctx: ControlContext, caller: Caller, name: str, tenant_id: str | None
) -> tuple[AdminToken, str]:
    if tenant_id is not None:
        caller.check_tenant(tenant_id)
    caller.require_admin()
    role: TokenRole = "admin" if tenant_id is None else "tenant"
    with ctx.mutator.mutate(caller, affects_core=False) as m:
        if tenant_id is not None and m.session.get(Tenant, tenant_id) is None:
            raise NotFound("tenant not found")
        token, secret = new_token(name, role, tenant_id, caller.token_id)
        m.session.add(token)
        summary = {"name": name, "role": role, "prefix": token.prefix}
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
                    select(func.count()).where(
                        AdminToken.role == "admin", AdminToken.revoked_at.is_(None)
                    )
                )
                if (active_admins or 0) <= 1:
                    raise Conflict("this is the last admin token; create another one first")
            token.revoked_at = utcnow()
            summary = {"name": token.name, "prefix": token.prefix}
            m.record("token.revoke", "token", token.id, summary, tenant_id=token.tenant_id)
    return token
