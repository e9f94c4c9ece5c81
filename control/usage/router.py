"""`/v1/admin/usage`: raw usage rows, newest first."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter

from control.deps import CallerDep, SessionDep
from control.errors import ERROR_RESPONSES
from control.schemas import Page, PageLimit, Timestamp
from control.usage import service
from control.usage.repository import UsageFilters
from control.usage.schemas import UsageOut

router = APIRouter(prefix="/v1/admin/usage", tags=["usage"], responses=ERROR_RESPONSES)

Outcome = Literal["complete", "client_cancelled", "upstream_error", "timeout"]


@router.get("", summary="List usage rows (a tenant token sees its own tenant's)")
def list_usage(
    caller: CallerDep,
    session: SessionDep,
    tenant_id: str | None = None,
    key_id: str | None = None,
    model: str | None = None,
    outcome: Outcome | None = None,
    since: Timestamp | None = None,
    until: Timestamp | None = None,
    limit: PageLimit = 50,
    cursor: str | None = None,
) -> Page[UsageOut]:
    filters = UsageFilters(tenant_id, key_id, model, outcome, since, until)
    return service.list_page(session, caller, filters, limit, cursor)
