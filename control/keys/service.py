"""Key operations: create (plaintext shown once), update, rotate (optional overlap), revoke.

The key format, its keyed hash and its public prefix come from the core (`sluicegate._core`),
so there is one implementation of each. A key stays within its tenant's bounds (`bounds.py`);
what an admin token set, a tenant-scoped token may only tighten (`policy.py`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sluicegate import _core
from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.api.errors import Conflict, NotFound, Validation
from control.api.pagination import decode_cursor, page
from control.api.schemas import Page
from control.context import ControlContext
from control.ids import new_id
from control.keys import bounds, policy, repository
from control.keys.models import ApiKey
from control.keys.repository import KeyFilters
from control.keys.schemas import KeyCreate, KeyOut, KeyRotate, KeyUpdate
from control.keys.state import effective_state
from control.limits import LIMITS, in_force
from control.quotas import rules as quota_rules
from control.quotas.rules import quota_in, quota_of
from control.tenants.models import Tenant
from control.timeutil import utcnow


def to_out(key: ApiKey, tenant_status: str, now: datetime | None = None) -> KeyOut:
    state = effective_state(key, tenant_status, now or utcnow())
    limits = in_force({name: getattr(key, name) for name in LIMITS})
    update = {"status": state, "quota": quota_of(key), **limits}
    return KeyOut.model_validate(key).model_copy(update=update)


def visible(session: Session, caller: Caller, key_id: str) -> tuple[ApiKey, str]:
    """The key and its tenant's status; 404 for a key the caller may not see."""
    row = repository.get_with_tenant_status(session, key_id)
    if row is None or (not caller.is_admin and row[0].tenant_id != caller.tenant_id):
        raise NotFound("key not found")
    return row[0], row[1]


def _check_future(expires_at: datetime | None, now: datetime) -> None:
    if expires_at is not None and expires_at <= now:
        raise Validation.field("expires_at", "must be in the future")


def get(session: Session, caller: Caller, key_id: str) -> KeyOut:
    key, tenant_status = visible(session, caller, key_id)
    return to_out(key, tenant_status)


def list_page(
    session: Session, caller: Caller, filters: KeyFilters, limit: int, cursor: str | None
) -> Page[KeyOut]:
    scoped = KeyFilters(
        tenant_id=caller.scope(filters.tenant_id),
        prefix=filters.prefix,
        state=filters.state,
        expires_before=filters.expires_before,
        expires_after=filters.expires_after,
    )
    now = utcnow()
    rows = repository.page(session, scoped, now, decode_cursor(cursor, str), limit)
    items, next_cursor = page(rows, limit, lambda row: row[0].id)
    return Page(items=[to_out(k, status, now) for k, status in items], next_cursor=next_cursor)


def _new_key(
    ctx: ControlContext, tenant_id: str, now: datetime, **fields: Any
) -> tuple[ApiKey, str]:
    secret = _core.generate_api_key()
    key = ApiKey(
        id=new_id("key"),
        tenant_id=tenant_id,
        hash=_core.hash_api_key(ctx.pepper, secret),
        prefix=_core.api_key_prefix(secret),
        created_at=now,
        updated_at=now,
        **fields,
    )
    return key, secret


def create(ctx: ControlContext, caller: Caller, data: KeyCreate) -> tuple[KeyOut, str]:
    caller.check_tenant(data.tenant_id)
    now = utcnow()
    with ctx.mutator.mutate(caller, keys_only=True) as m:
        tenant = m.session.get(Tenant, data.tenant_id)
        if tenant is None:
            raise NotFound("tenant not found")
        if tenant.status != "active":
            raise Conflict("the tenant is disabled; enable it before creating keys")
        bounds.check_limits(tenant, data.model_dump())
        bounds.check_quota(tenant, data.quota)
        bounds.check_models(tenant, data.models)
        _check_future(data.expires_at, now)
        bounds.check_room(m.session, tenant, ctx.settings.admin.default_max_keys, now)
        key, secret = _new_key(
            ctx,
            tenant.id,
            now,
            name=data.name,
            status="active",
            priority=data.priority,
            models=data.models,
            rpm=data.rpm,
            tpm=data.tpm,
            max_concurrency=data.max_concurrency,
            rpm_burst=data.rpm_burst,
            tpm_burst=data.tpm_burst,
            expires_at=data.expires_at,
        )
        quota_rules.set_quota(key, data.quota, now)
        if caller.is_admin:
            key.admin_policy = policy.after_admin_change(None, key, set(policy.LOCKABLE)) or None
        m.subject = ("key", key.id)
        m.session.add(key)
        summary = data.model_dump(mode="json", exclude_none=True) | {"prefix": key.prefix}
        m.record("key.create", "key", key.id, summary, tenant_id=tenant.id)
        m.keys_changed(upsert=[key.id])
    return to_out(key, tenant.status, now), secret


def update(ctx: ControlContext, caller: Caller, key_id: str, data: KeyUpdate) -> KeyOut:
    now = utcnow()
    with ctx.mutator.mutate(caller, subject=("key", key_id), keys_only=True) as m:
        key, tenant_status = visible(m.session, caller, key_id)
        if key.status == "revoked":
            raise Conflict("the key is revoked; create a new one")
        sent = data.model_dump(exclude_unset=True, exclude={"quota"})
        changes = {k: v for k, v in sent.items() if getattr(key, k) != v}
        quota_sent = "quota" in data.model_fields_set
        quota_changed = quota_sent and not quota_rules.unchanged(key, data.quota)
        if not caller.is_admin:
            policy.check_tenant_change(key.admin_policy, key, changes, (quota_sent, data.quota))
        if changes or quota_changed:
            tenant = m.session.get(Tenant, key.tenant_id)
            assert tenant is not None  # the foreign key guarantees it
            bounds.check_limits(
                tenant, {name: changes.get(name, getattr(key, name)) for name in LIMITS}
            )
            if "models" in changes:
                bounds.check_models(tenant, changes["models"])
            if quota_changed:
                bounds.check_quota(tenant, data.quota)
                quota_rules.set_quota(key, data.quota, now)
            if "expires_at" in changes:
                _check_future(changes["expires_at"], now)
            for name, value in changes.items():
                setattr(key, name, value)
        locks_changed = False
        if caller.is_admin:
            fields = set(sent) | ({"quota"} if quota_sent else set())
            locks = policy.after_admin_change(key.admin_policy, key, fields) or None
            locks_changed = locks != (key.admin_policy or None)
            key.admin_policy = locks
        if changes or quota_changed or locks_changed:
            key.updated_at = now
            fields = set(changes) | ({"quota"} if quota_changed else set())
            summary = data.model_dump(mode="json", include=fields)
            if locks_changed:
                summary["admin_policy"] = key.admin_policy
            m.record("key.update", "key", key.id, summary, tenant_id=key.tenant_id)
            m.keys_changed(upsert=[key.id])
    return to_out(key, tenant_status, now)


def rotate(
    ctx: ControlContext, caller: Caller, key_id: str, data: KeyRotate
) -> tuple[KeyOut, str, KeyOut]:
    """A new secret with the same settings; the old key keeps working for `overlap_seconds`."""
    now = utcnow()
    with ctx.mutator.mutate(caller, subject=("key", key_id), keys_only=True) as m:
        old, tenant_status = visible(m.session, caller, key_id)
        if effective_state(old, tenant_status, now) == "revoked":
            raise Conflict("the key is revoked; create a new one")
        if old.replaced_by is not None:
            raise Conflict(f"the key was already rotated; rotate {old.replaced_by} instead")
        if data.overlap_seconds > 0:
            tenant = m.session.get(Tenant, old.tenant_id)
            assert tenant is not None  # the foreign key guarantees it
            default = ctx.settings.admin.default_max_keys
            bounds.check_rotation_room(m.session, tenant, default, now)
        expires_at = data.expires_at if "expires_at" in data.model_fields_set else old.expires_at
        if expires_at is not None and expires_at <= now:
            raise Validation.field(
                "expires_at", "the new key would be expired: give an expiry in the future, or null"
            )
        new, secret = _new_key(
            ctx,
            old.tenant_id,
            now,
            name=old.name,
            status=old.status,
            priority=old.priority,
            models=old.models,
            rpm=old.rpm,
            tpm=old.tpm,
            max_concurrency=old.max_concurrency,
            rpm_burst=old.rpm_burst,
            tpm_burst=old.tpm_burst,
            expires_at=expires_at,
            rotated_from=old.id,
            # The operator's locks hold for the successor too.
            admin_policy=old.admin_policy,
        )
        quota_rules.set_quota(new, quota_in(old), now)
        m.session.add(new)
        old.replaced_by = new.id
        old.updated_at = now
        if data.overlap_seconds == 0:
            old.status, old.revoked_at = "revoked", now
        else:
            overlap_end = now + timedelta(seconds=data.overlap_seconds)
            old.expires_at = min(old.expires_at or overlap_end, overlap_end)
        summary = {
            "new_key_id": new.id,
            "new_prefix": new.prefix,
            "overlap_seconds": data.overlap_seconds,
        }
        m.record("key.rotate", "key", old.id, summary, tenant_id=old.tenant_id)
        m.keys_changed(upsert=[new.id, old.id])
    return to_out(new, tenant_status, now), secret, to_out(old, tenant_status, now)


def revoke(ctx: ControlContext, caller: Caller, key_id: str) -> KeyOut:
    """Refused by the data plane from the moment this returns. Revoking twice changes nothing."""
    now = utcnow()
    with ctx.mutator.mutate(caller, subject=("key", key_id), keys_only=True) as m:
        key, tenant_status = visible(m.session, caller, key_id)
        if key.status != "revoked":
            key.status, key.revoked_at, key.updated_at = "revoked", now, now
            m.record("key.revoke", "key", key.id, {"prefix": key.prefix}, tenant_id=key.tenant_id)
            m.keys_changed(remove=[key.id])
    return to_out(key, tenant_status, now)
