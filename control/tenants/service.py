"""Tenant operations. Only admins create or change tenants; a tenant token may read its own."""

from __future__ import annotations

from sqlalchemy.orm import Session

from control.caller import Caller
from control.context import ControlContext
from control.errors import Conflict, NotFound, Validation
from control.ids import new_id
from control.pagination import decode_cursor, page
from control.schemas import Page
from control.tenants import repository
from control.tenants.models import Tenant
from control.tenants.schemas import TenantCreate, TenantOut, TenantStatus, TenantUpdate
from control.timeutil import utcnow

LIMITS = ("rpm", "tpm", "max_concurrency")


def get(session: Session, caller: Caller, tenant_id: str) -> Tenant:
    caller.check_tenant(tenant_id)
    tenant = repository.get(session, tenant_id)
    if tenant is None:
        raise NotFound("tenant not found")
    return tenant


def list_page(
    session: Session,
    caller: Caller,
    *,
    status: TenantStatus | None,
    limit: int,
    cursor: str | None,
) -> Page[TenantOut]:
    rows = repository.page(
        session,
        only=caller.scope(None),
        status=status,
        after=decode_cursor(cursor, str),
        limit=limit,
    )
    items, next_cursor = page(rows, limit, lambda t: t.id)
    return Page(items=[TenantOut.model_validate(t) for t in items], next_cursor=next_cursor)


def create(ctx: ControlContext, caller: Caller, data: TenantCreate) -> Tenant:
    caller.require_admin()
    tenant_id = data.id or new_id("ten")
    with ctx.mutator.mutate(caller, subject=("tenant", tenant_id)) as m:
        if repository.get(m.session, tenant_id) is not None:
            raise Conflict(f"tenant {tenant_id!r} already exists")
        now = utcnow()
        tenant = Tenant(
            id=tenant_id,
            name=data.name,
            status="active",
            rpm=data.rpm,
            tpm=data.tpm,
            max_concurrency=data.max_concurrency,
            created_at=now,
            updated_at=now,
        )
        m.session.add(tenant)
        summary = data.model_dump(exclude_none=True) | {"id": tenant_id}
        m.record("tenant.create", "tenant", tenant_id, summary, tenant_id=tenant_id)
    return tenant


def update(ctx: ControlContext, caller: Caller, tenant_id: str, data: TenantUpdate) -> Tenant:
    caller.check_tenant(tenant_id)
    caller.require_admin()
    changes = data.model_dump(exclude_unset=True)
    with ctx.mutator.mutate(caller, subject=("tenant", tenant_id)) as m:
        tenant = repository.get(m.session, tenant_id)
        if tenant is None:
            raise NotFound("tenant not found")
        changes = {k: v for k, v in changes.items() if getattr(tenant, k) != v}
        if not changes:
            return tenant
        for name in LIMITS:
            value = changes.get(name)
            if value is not None:
                above = repository.keys_above(m.session, tenant_id, name, value)
                if above:
                    raise Validation.field(
                        name,
                        f"{above} key(s) of this tenant have a higher {name}; lower them first",
                    )
        for name, value in changes.items():
            setattr(tenant, name, value)
        tenant.updated_at = utcnow()
        action = "tenant.update"
        if "status" in changes:
            action = "tenant.disable" if changes["status"] == "disabled" else "tenant.enable"
        m.record(action, "tenant", tenant_id, changes, tenant_id=tenant_id)
    return tenant
