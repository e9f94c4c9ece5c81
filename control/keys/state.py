"""A key's effective state, in Python (for responses) and in SQL (for filters); the two agree.

Precedence: revoked (explicitly, or a rotation's overlap has ended) > disabled (the key or its
tenant) > expired > active.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, and_, or_

from control.keys.models import ApiKey
from control.keys.schemas import KeyState
from control.tenants.models import Tenant


def effective_state(key: ApiKey, tenant_status: str, now: datetime) -> KeyState:
    ended = key.expires_at is not None and key.expires_at <= now
    if key.status == "revoked" or (key.replaced_by is not None and ended):
        return "revoked"
    if key.status == "disabled" or tenant_status == "disabled":
        return "disabled"
    if ended:
        return "expired"
    return "active"


def state_filter(state: KeyState, now: datetime) -> ColumnElement[bool]:
    """SQL condition for keys in `state`; needs `Tenant` joined on the key's tenant."""
    ended = and_(ApiKey.expires_at.is_not(None), ApiKey.expires_at <= now)
    running = or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > now)
    rotated_out = and_(ApiKey.replaced_by.is_not(None), ended)
    not_revoked = and_(
        ApiKey.status != "revoked",
        or_(ApiKey.replaced_by.is_(None), ApiKey.expires_at.is_(None), ApiKey.expires_at > now),
    )
    if state == "revoked":
        return or_(ApiKey.status == "revoked", rotated_out)
    if state == "disabled":
        return and_(not_revoked, or_(ApiKey.status == "disabled", Tenant.status == "disabled"))
    usable = and_(ApiKey.status == "active", Tenant.status == "active")
    if state == "expired":
        return and_(usable, ended, ApiKey.replaced_by.is_(None))
    return and_(usable, running)
