"""Tenant operations. Only admins create or change tenants; a tenant token may read its own."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.api.errors import Conflict, FieldError, NotFound, Validation
from control.api.pagination import decode_cursor, page
from control.api.schemas import Page
from control.context import ControlContext
from control.ids import new_id
from control.limits import BURSTS, LIMITS, in_force, orphan_bursts
from control.quotas.rules import keys_above, quota_of, set_quota, unchanged
from control.tenants import repository
from control.tenants.models import Tenant
from control.tenants.schemas import TenantCreate, TenantOut, TenantStatus, TenantUpdate
from control.timeutil import utcnow


def to_out(tenant: Tenant, default_max_keys: int) -> TenantOut:
    limits = in_force({name: getattr(tenant, name) for name in LIMITS})
    return TenantOut(
        id=tenant.id,
        name=tenant.name,
        status=tenant.status,  # type: ignore[arg-type]
        quota=quota_of(tenant),
        models=tenant.models,
        max_keys=default_max_keys if tenant.max_keys is None else tenant.max_keys,
        created_at=tenant.created_at,
        updated_at=tenant.updated_at,
        **limits,
    )


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
    default_max_keys: int,
) -> Page[TenantOut]:
    rows = repository.page(
        session,
        only=caller.scope(None),
        status=status,
        after=decode_cursor(cursor, str),
        limit=limit,
    )
    items, next_cursor = page(rows, limit, lambda t: t.id)
    return Page(items=[to_out(t, default_max_keys) for t in items], next_cursor=next_cursor)


def create(ctx: ControlContext, caller: Caller, data: TenantCreate) -> Tenant:
    caller.require_admin()
    tenant_id = data.id or new_id("ten")
    orphans = orphan_bursts(data.model_dump())
    if orphans:
        raise Validation("a burst needs its per-minute limit", orphans)
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
            rpm_burst=data.rpm_burst,
            tpm_burst=data.tpm_burst,
            models=data.models,
            max_keys=data.max_keys,
            created_at=now,
            updated_at=now,
        )
        set_quota(tenant, data.quota, now)
        m.session.add(tenant)
        summary = data.model_dump(exclude_none=True) | {"id": tenant_id}
        m.record("tenant.create", "tenant", tenant_id, summary, tenant_id=tenant_id)
    return tenant


def update(ctx: ControlContext, caller: Caller, tenant_id: str, data: TenantUpdate) -> Tenant:
    caller.check_tenant(tenant_id)
    caller.require_admin()
    changes = data.model_dump(exclude_unset=True, exclude={"quota"})
    with ctx.mutator.mutate(caller, subject=("tenant", tenant_id)) as m:
        tenant = repository.get(m.session, tenant_id)
        if tenant is None:
            raise NotFound("tenant not found")
        changes = {k: v for k, v in changes.items() if getattr(tenant, k) != v}
        quota_changed = "quota" in data.model_fields_set and not unchanged(tenant, data.quota)
        if not changes and not quota_changed:
            return tenant
        if any(name in changes for name in LIMITS):
            _check_limits(m.session, tenant, changes)
        now = utcnow()
        if quota_changed:
            errors = keys_above(m.session, tenant.id, data.quota)
            if errors:
                raise Validation("a tenant's quota cannot drop below its keys' own", errors)
            set_quota(tenant, data.quota, now)
            changes["quota"] = data.model_dump(mode="json", include={"quota"})["quota"]
        for name, value in changes.items():
            if name != "quota":
                setattr(tenant, name, value)
        tenant.updated_at = now
        action = "tenant.update"
        if "status" in changes:
            action = "tenant.disable" if changes["status"] == "disabled" else "tenant.enable"
        m.record(action, "tenant", tenant_id, changes, tenant_id=tenant_id)
    return tenant


def _check_limits(session: Session, tenant: Tenant, changes: dict[str, Any]) -> None:
    """The tenant's new limits keep every burst with its rate and stay above its keys' own."""
    after = {name: changes.get(name, getattr(tenant, name)) for name in LIMITS}
    orphans = orphan_bursts(after)
    if orphans:
        raise Validation("a burst needs its per-minute limit", orphans)
    before = in_force({name: getattr(tenant, name) for name in LIMITS})
    errors = []
    for name, cap in in_force(after).items():
        was = before[name]
        if cap is None or (was is not None and cap >= was):
            continue
        above = repository.keys_above(session, tenant.id, name, cap)
        if not above:
            continue
        rate = BURSTS.get(name)
        if rate is None:
            message = f"{above} key(s) of this tenant have a higher {name}; lower them first"
        else:
            message = (
                f"{above} key(s) of this tenant have a higher {name} (their own, or their "
                f"{rate} when unset); lower them first"
            )
        # A burst left unset follows the rate: the field sent is the one at fault.
        field = rate if rate is not None and name not in changes and rate in changes else name
        errors.append(FieldError(field, message))
    if errors:
        raise Validation("a tenant's limits cannot drop below its keys' own", errors)
