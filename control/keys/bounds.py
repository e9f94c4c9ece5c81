"""What a tenant bounds in its keys, whoever changes them: limits and quota within the tenant's,
models within the tenant's allowlist, and how many keys the tenant holds.

The key cap counts keys that can still be used or enabled again: not revoked, not expired. A new
key needs room among the keys not yet replaced by a rotation (`max_keys`). A rotation replaces a
key, so it is allowed at the cap: the old key ends with its overlap (at most 30 days); but every
rotation with an overlap holds one more key for that long, so rotations stop at twice the cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session

from control.api.errors import Conflict, Validation
from control.keys.models import ApiKey
from control.limits import LIMITS, above_tenant, orphan_bursts
from control.quotas import rules as quota_rules
from control.quotas.schemas import QuotaIn
from control.tenants.models import Tenant


def check_limits(tenant: Tenant, values: dict[str, Any]) -> None:
    errors = orphan_bursts(values)
    orphans = {e.field for e in errors}
    tenant_limits = {name: getattr(tenant, name) for name in LIMITS}
    errors += [e for e in above_tenant(values, tenant_limits) if e.field not in orphans]
    if errors:
        raise Validation("a key's limits cannot exceed its tenant's", errors)


def check_quota(tenant: Tenant, quota: QuotaIn | None) -> None:
    errors = quota_rules.above_tenant(quota, tenant)
    if errors:
        raise Validation("a key's quota cannot exceed its tenant's", errors)


def check_models(tenant: Tenant, models: Sequence[str] | None) -> None:
    """A key's own list stays within its tenant's; null takes the tenant's as it is."""
    if models is None or tenant.models is None:
        return
    allowed = set(tenant.models)
    if not set(models) <= allowed:
        listed = ", ".join(tenant.models) or "none"
        raise Validation.field("models", f"must stay within the tenant's allowlist ({listed})")


def max_keys(tenant: Tenant, default: int) -> int:
    return default if tenant.max_keys is None else tenant.max_keys


def _held(session: Session, tenant_id: str, now: datetime, *where: ColumnElement[bool]) -> int:
    stmt = select(func.count()).where(
        ApiKey.tenant_id == tenant_id,
        ApiKey.status != "revoked",
        or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > now),
        *where,
    )
    return session.scalar(stmt) or 0


def check_room(session: Session, tenant: Tenant, default: int, now: datetime) -> None:
    """Room for one more key."""
    cap = max_keys(tenant, default)
    held = _held(session, tenant.id, now, ApiKey.replaced_by.is_(None))
    if held >= cap:
        raise Conflict(
            f"the tenant holds {held} keys, its max_keys ({cap}): revoke one, or the operator "
            "raises the tenant's max_keys"
        )


def check_rotation_room(session: Session, tenant: Tenant, default: int, now: datetime) -> None:
    """Room for the key a rotation adds while the old one overlaps."""
    cap = max_keys(tenant, default)
    held = _held(session, tenant.id, now)
    if held >= 2 * cap:
        raise Conflict(
            f"the tenant holds {held} keys counting those in a rotation's overlap, twice its "
            f"max_keys ({cap}): rotate without overlap, or wait for the overlaps to end"
        )
