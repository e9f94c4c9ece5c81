"""`GET /v1/admin/fleet`: the live replicas, the config version each runs, their limits' mode
and the leader (admin tokens only)."""

from __future__ import annotations

from fastapi import APIRouter

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.fleet import service
from control.fleet.schemas import FleetOut

router = APIRouter(prefix="/v1/admin/fleet", tags=["fleet"], responses=ERROR_RESPONSES)


@router.get(
    "",
    summary="The fleet's live replicas: applied config version (or the one refused), limits "
    "shared or on local shares, the leader",
)
def get_fleet(caller: CallerDep, ctx: ContextDep, session: SessionDep) -> FleetOut:
    return service.fleet(session, caller, ctx.settings.fleet.dead_after_ms)
