"""`/v1/admin/pools` (admin tokens only)."""

from __future__ import annotations

from fastapi import APIRouter

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas import Page, PageLimit
from control.pools import service
from control.pools.schemas import PoolCreate, PoolOut, PoolUpdate

router = APIRouter(prefix="/v1/admin/pools", tags=["pools"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, summary="Create a pool of upstream members")
def create_pool(body: PoolCreate, caller: CallerDep, ctx: ContextDep) -> PoolOut:
    return service.create(ctx, caller, body)


@router.get("", summary="List pools")
def list_pools(
    caller: CallerDep, session: SessionDep, limit: PageLimit = 50, cursor: str | None = None
) -> Page[PoolOut]:
    return service.list_page(session, caller, limit, cursor)


@router.get("/{pool_id}", summary="Get a pool")
def get_pool(pool_id: str, caller: CallerDep, session: SessionDep) -> PoolOut:
    return service.get(session, caller, pool_id)


@router.patch("/{pool_id}", summary="Change a pool's name, members or timeouts")
def update_pool(pool_id: str, body: PoolUpdate, caller: CallerDep, ctx: ContextDep) -> PoolOut:
    return service.update(ctx, caller, pool_id, body)


@router.delete("/{pool_id}", status_code=204, summary="Delete a pool no route uses")
def delete_pool(pool_id: str, caller: CallerDep, ctx: ContextDep) -> None:
    service.delete(ctx, caller, pool_id)
