"""Key queries. Lists join the tenant (for the effective state) and page by key id."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Row, Select, select
from sqlalchemy.orm import Session

from control.api.pagination import keyset
from control.keys.models import ApiKey
from control.keys.schemas import KeyState
from control.keys.state import state_filter
from control.tenants.models import Tenant

# Public prefixes are `sk-sg-` plus six characters: a full one is matched exactly (index seek).
FULL_PREFIX_LEN = 12


@dataclass(frozen=True)
class KeyFilters:
    tenant_id: str | None = None
    prefix: str | None = None
    state: KeyState | None = None
    expires_before: datetime | None = None
    expires_after: datetime | None = None


def get(session: Session, key_id: str) -> ApiKey | None:
    return session.get(ApiKey, key_id)


def get_with_tenant_status(session: Session, key_id: str) -> Row[ApiKey, str] | None:
    stmt = (
        select(ApiKey, Tenant.status)
        .join(Tenant, Tenant.id == ApiKey.tenant_id)
        .where(ApiKey.id == key_id)
    )
    return session.execute(stmt).one_or_none()


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def page_query(
    filters: KeyFilters, now: datetime, after: str | None, limit: int
) -> Select[ApiKey, str]:
    stmt = select(ApiKey, Tenant.status).join(Tenant, Tenant.id == ApiKey.tenant_id)
    if filters.tenant_id is not None:
        stmt = stmt.where(ApiKey.tenant_id == filters.tenant_id)
    if filters.prefix is not None:
        if len(filters.prefix) == FULL_PREFIX_LEN:
            stmt = stmt.where(ApiKey.prefix == filters.prefix)
        else:
            pattern = _escape_like(filters.prefix) + "%"
            stmt = stmt.where(ApiKey.prefix.like(pattern, escape="\\"))
    if filters.state is not None:
        stmt = stmt.where(state_filter(filters.state, now))
    if filters.expires_before is not None:
        stmt = stmt.where(ApiKey.expires_at < filters.expires_before)
    if filters.expires_after is not None:
        stmt = stmt.where(ApiKey.expires_at > filters.expires_after)
    return keyset(stmt, ApiKey.id, after, limit)


def page(
    session: Session, filters: KeyFilters, now: datetime, after: str | None, limit: int
) -> Sequence[Row[ApiKey, str]]:
    return session.execute(page_query(filters, now, after, limit)).all()
