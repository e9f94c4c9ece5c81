"""Reading usage rows; a tenant token reads only its own tenant's."""

from __future__ import annotations

from sqlalchemy.orm import Session

from control.caller import Caller
from control.errors import NotFound
from control.keys.models import ApiKey
from control.pagination import decode_cursor, page
from control.schemas import Page
from control.usage import repository
from control.usage.repository import UsageFilters
from control.usage.schemas import UsageOut


def list_page(
    session: Session, caller: Caller, filters: UsageFilters, limit: int, cursor: str | None
) -> Page[UsageOut]:
    tenant_id = caller.scope(filters.tenant_id)
    if filters.key_id is not None and not caller.is_admin:
        key = session.get(ApiKey, filters.key_id)
        if key is None or key.tenant_id != caller.tenant_id:
            raise NotFound("key not found")
    scoped = UsageFilters(
        tenant_id=tenant_id,
        key_id=filters.key_id,
        model=filters.model,
        outcome=filters.outcome,
        since=filters.since,
        until=filters.until,
    )
    rows = repository.page(session, scoped, decode_cursor(cursor, int), limit)
    items, next_cursor = page(rows, limit, lambda r: r.id)
    return Page(items=[UsageOut.model_validate(r) for r in items], next_cursor=next_cursor)
