"""`GET /v1/admin/status` (admin tokens only; a tenant token gets 403: pools and routes are
shared infrastructure)."""

from __future__ import annotations

from fastapi import APIRouter

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.status import service
from control.status.schemas import StatusOut

router = APIRouter(prefix="/v1/admin/status", tags=["status"], responses=ERROR_RESPONSES)


@router.get(
    "",
    summary="Per pool and route over 1 min, 5 min and 1 h: rate, P50/P95/P99 of TTFT, TPOT and "
    "total, error and timeout rates, queue and in-flight against their limits, member health",
)
def get_status(caller: CallerDep, ctx: ContextDep, session: SessionDep) -> StatusOut:
    return service.status(ctx, session, caller)
