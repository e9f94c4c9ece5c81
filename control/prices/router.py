"""`/v1/admin/prices` (admin tokens only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas import Page, PageLimit, Timestamp
from control.prices import service
from control.prices.schemas import PriceCreate, PriceOut

router = APIRouter(prefix="/v1/admin/prices", tags=["prices"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, summary="Add a price version for a model")
def create_price(body: PriceCreate, caller: CallerDep, ctx: ContextDep) -> PriceOut:
    return PriceOut.model_validate(service.create(ctx, caller, body))


@router.get("", summary="List price versions")
def list_prices(
    caller: CallerDep,
    session: SessionDep,
    model: str | None = None,
    limit: PageLimit = 50,
    cursor: str | None = None,
) -> Page[PriceOut]:
    return service.list_page(session, caller, model, limit, cursor)


@router.get("/in-force", summary="The price version in force for a model at a moment")
def price_in_force(
    caller: CallerDep,
    session: SessionDep,
    model: Annotated[str, Query(min_length=1, max_length=200)],
    at: Timestamp | None = None,
) -> PriceOut:
    return PriceOut.model_validate(service.in_force(session, caller, model, at))


@router.get("/{price_id}", summary="Get a price version")
def get_price(
    price_id: Annotated[int, Path(ge=1, le=2**62)], caller: CallerDep, session: SessionDep
) -> PriceOut:
    return PriceOut.model_validate(service.get(session, caller, price_id))
