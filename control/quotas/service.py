"""A quota's use in its current period (from the ledger) and the operator's reset.

A reset is a change like any other: one transaction, pushed to the core before the commit (a
key's as a key change, a tenant's in a whole snapshot), with its audit row. The core then takes
the ledger's count of the new period, which starts at the second of the reset.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.api.errors import Conflict, NotFound
from control.context import ControlContext
from control.keys import policy
from control.keys import service as keys
from control.quotas import ledger
from control.quotas.models import QuotaColumns
from control.quotas.periods import counted_from, period_end
from control.quotas.rules import quota_of, reset
from control.quotas.schemas import QuotaStatus
from control.tenants import repository as tenants
from control.timeutil import from_unix, utcnow


def _status(
    session: Session, scope: Literal["key", "tenant"], ident: str, row: QuotaColumns
) -> QuotaStatus:
    quota = quota_of(row)
    if quota is None:
        raise NotFound(f"the {scope} has no quota")
    now = int(utcnow().timestamp())
    period = quota.period
    used_tokens, used_cost = ledger.used(session.connection(), scope, now, [ident]).get(
        ident, (0, 0)
    )
    end = period_end(period, now)
    return QuotaStatus(
        **quota.model_dump(),
        period_start=from_unix(counted_from(period, row.quota_since, now)),
        period_end=None if end is None else from_unix(end),
        used_tokens=used_tokens,
        used_cost_micros=used_cost,
        remaining_tokens=None if quota.tokens is None else max(quota.tokens - used_tokens, 0),
        remaining_cost_micros=(
            None if quota.cost_micros is None else max(quota.cost_micros - used_cost, 0)
        ),
    )


def key_status(session: Session, caller: Caller, key_id: str) -> QuotaStatus:
    key, _ = keys.visible(session, caller, key_id)
    return _status(session, "key", key.id, key)


def tenant_status(session: Session, caller: Caller, tenant_id: str) -> QuotaStatus:
    caller.check_tenant(tenant_id)
    tenant = tenants.get(session, tenant_id)
    if tenant is None:
        raise NotFound("tenant not found")
    return _status(session, "tenant", tenant.id, tenant)


def reset_key(ctx: ControlContext, caller: Caller, key_id: str) -> QuotaStatus:
    with ctx.mutator.mutate(caller, subject=("key", key_id), keys_only=True) as m:
        key, _ = keys.visible(m.session, caller, key_id)
        if key.quota_period is None:
            raise Conflict("the key has no quota to reset")
        if key.status == "revoked":
            raise Conflict("the key is revoked")
        if not caller.is_admin:
            policy.check_tenant_reset(key.admin_policy)
        reset(key, utcnow())
        summary = {"period": key.quota_period}
        m.record("key.quota_reset", "key", key.id, summary, tenant_id=key.tenant_id)
        m.keys_changed(upsert=[key.id])
    with ctx.sessions() as session:
        return key_status(session, caller, key_id)


def reset_tenant(ctx: ControlContext, caller: Caller, tenant_id: str) -> QuotaStatus:
    caller.check_tenant(tenant_id)
    caller.require_admin()
    with ctx.mutator.mutate(caller, subject=("tenant", tenant_id)) as m:
        tenant = tenants.get(m.session, tenant_id)
        if tenant is None:
            raise NotFound("tenant not found")
        if tenant.quota_period is None:
            raise Conflict("the tenant has no quota to reset")
        reset(tenant, utcnow())
        summary = {"period": tenant.quota_period}
        m.record("tenant.quota_reset", "tenant", tenant.id, summary, tenant_id=tenant.id)
    with ctx.sessions() as session:
        return tenant_status(session, caller, tenant_id)
