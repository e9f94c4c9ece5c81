"""`/v1/admin/drills` (admin tokens only): force a pool or a member out for a while, watch the
traffic move, end it early."""

from __future__ import annotations

from fastapi import APIRouter

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas import Page, PageLimit
from control.drills import service, traffic
from control.drills.schemas import DrillCreate, DrillOut, DrillTraffic

router = APIRouter(prefix="/v1/admin/drills", tags=["drills"], responses=ERROR_RESPONSES)


@router.post(
    "",
    status_code=201,
    summary="Start a drill: a pool, or one member, out of service for some seconds",
)
def start_drill(body: DrillCreate, caller: CallerDep, ctx: ContextDep) -> DrillOut:
    return service.start(ctx, caller, body)


@router.get("", summary="List drills, newest first")
def list_drills(
    caller: CallerDep,
    session: SessionDep,
    pool: str | None = None,
    active: bool = False,
    limit: PageLimit = 50,
    cursor: str | None = None,
) -> Page[DrillOut]:
    return service.list_page(session, caller, pool=pool, active=active, limit=limit, cursor=cursor)


@router.get("/{drill_id}", summary="Get a drill")
def get_drill(drill_id: str, caller: CallerDep, session: SessionDep) -> DrillOut:
    return service.get(session, caller, drill_id)


@router.get(
    "/{drill_id}/traffic",
    summary="Request counters of the drill's routes by upstream, and the gateway's refusals",
)
def drill_traffic(
    drill_id: str, caller: CallerDep, ctx: ContextDep, session: SessionDep
) -> DrillTraffic:
    return traffic.read(ctx, session, caller, drill_id)


@router.delete("/{drill_id}", summary="End a drill (early: its target is back at once)")
def end_drill(drill_id: str, caller: CallerDep, ctx: ContextDep) -> DrillOut:
    return service.end(ctx, caller, drill_id)
