"""`/v1/admin/routes` (admin tokens only). Aliases may contain `/` (`meta-llama/Llama-3-8B`)."""

from __future__ import annotations

from fastapi import APIRouter

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas import Page, PageLimit
from control.routes import service
from control.routes.schemas import RouteCreate, RouteOut, RouteUpdate

router = APIRouter(prefix="/v1/admin/routes", tags=["routes"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, summary="Create a route: model alias -> chain of pools")
def create_route(body: RouteCreate, caller: CallerDep, ctx: ContextDep) -> RouteOut:
    return service.create(ctx, caller, body)


@router.get("", summary="List routes (optionally those using a pool)")
def list_routes(
    caller: CallerDep,
    session: SessionDep,
    pool: str | None = None,
    limit: PageLimit = 50,
    cursor: str | None = None,
) -> Page[RouteOut]:
    return service.list_page(session, caller, pool, limit, cursor)


@router.get("/{alias:path}", summary="Get a route")
def get_route(alias: str, caller: CallerDep, session: SessionDep) -> RouteOut:
    return service.get(session, caller, alias)


@router.patch("/{alias:path}", summary="Change a route's chain, max_output_tokens or SLO")
def update_route(alias: str, body: RouteUpdate, caller: CallerDep, ctx: ContextDep) -> RouteOut:
    return service.update(ctx, caller, alias, body)


@router.delete("/{alias:path}", status_code=204, summary="Delete a route")
def delete_route(alias: str, caller: CallerDep, ctx: ContextDep) -> None:
    service.delete(ctx, caller, alias)
