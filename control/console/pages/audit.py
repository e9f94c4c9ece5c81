"""The audit log (admin tokens): who changed what, newest first, filtered by resource, action or
actor, a page at a time."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from control.console.api import ApiError
from control.console.web import ConsoleDep

router = APIRouter()


@router.get("/console/audit")
async def audit_page(
    console: ConsoleDep,
    resource_type: str | None = None,
    resource_id: str | None = None,
    action: str | None = None,
    actor_id: str | None = None,
    cursor: str | None = None,
) -> Response:
    filters = {
        "resource_type": resource_type,
        "resource_id": resource_id,
        "action": action,
        "actor_id": actor_id,
    }
    error = None
    try:
        page = await console.api.get("/v1/admin/audit", limit=50, cursor=cursor, **filters)
    except ApiError as refused:
        if refused.status != 422:
            raise
        page, error = {"items": [], "next_cursor": None}, refused.message
    return console.page(
        "audit.html",
        entries=page["items"],
        next_cursor=page["next_cursor"],
        filters=filters,
        list_error=error,
    )
