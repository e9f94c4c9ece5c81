"""Tenant queries."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from control.api.pagination import keyset
from control.keys.models import ApiKey
from control.limits import BURSTS
from control.tenants.models import Tenant


def get(session: Session, tenant_id: str) -> Tenant | None:
    return session.get(Tenant, tenant_id)


def page(
    session: Session, *, only: str | None, status: str | None, after: str | None, limit: int
) -> Sequence[Tenant]:
    stmt = select(Tenant)
    if only is not None:
        stmt = stmt.where(Tenant.id == only)
    if status is not None:
        stmt = stmt.where(Tenant.status == status)
    return session.scalars(keyset(stmt, Tenant.id, after, limit)).all()


def keys_above(session: Session, tenant_id: str, limit_name: str, value: int) -> int:
    """How many live keys of the tenant have their own limit above `value` (keys without one
    are capped by the tenant's limit anyway). A key's unset burst counts as its rate."""
    column: ColumnElement[int | None] = getattr(ApiKey, limit_name)
    rate = BURSTS.get(limit_name)
    if rate is not None:
        column = func.coalesce(column, getattr(ApiKey, rate))
    stmt = select(func.count()).where(
        ApiKey.tenant_id == tenant_id, ApiKey.status != "revoked", column > value
    )
    return session.scalar(stmt) or 0
