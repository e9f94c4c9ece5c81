"""`/v1/admin/audit` (admin tokens only): who changed what, newest first."""

from __future__ import annotations

from fastapi import APIRouter

from control.api.deps import CallerDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.api.pagination import decode_cursor, page
from control.api.schemas import Page, PageLimit
from control.audit import repository
from control.audit.repository import AuditFilters
from control.audit.schemas import AuditOut

router = APIRouter(prefix="/v1/admin/audit", tags=["audit"], responses=ERROR_RESPONSES)


@router.get("", summary="List audit entries")
def list_audit(
    caller: CallerDep,
    session: SessionDep,
    resource_type: str | None = None,
    resource_id: str | None = None,
    actor_id: str | None = None,
    action: str | None = None,
    limit: PageLimit = 50,
    cursor: str | None = None,
) -> Page[AuditOut]:
    caller.require_admin()
    filters = AuditFilters(resource_type, resource_id, actor_id, action)
    rows = repository.page(session, filters, decode_cursor(cursor, int), limit)
    items, next_cursor = page(rows, limit, lambda r: r.id)
    return Page(items=[AuditOut.model_validate(r) for r in items], next_cursor=next_cursor)
