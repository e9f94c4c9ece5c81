"""Price operations (admin only). A change is a new version; existing rows never change and a
version cannot take effect in the past, so usage already recorded keeps its price.

The core costs every request at the version in force (the snapshot carries it), so a new version
pushes a snapshot; one that takes effect later is pushed again then by the price activator."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.api.errors import Conflict, NotFound, Validation
from control.api.pagination import decode_cursor, page
from control.api.schemas import Page
from control.context import ControlContext
from control.prices import repository
from control.prices.models import Price
from control.prices.schemas import PriceCreate, PriceOut
from control.timeutil import utcnow

# Tolerated clock difference between the caller and the server for "now".
SKEW = timedelta(seconds=60)


def create(ctx: ControlContext, caller: Caller, data: PriceCreate) -> Price:
    caller.require_admin()
    now = utcnow()
    effective_from = data.effective_from or now
    if effective_from < now - SKEW:
        raise Validation.field(
            "effective_from", "cannot be in the past: recorded usage keeps the price it had"
        )
    with ctx.mutator.mutate(caller, subject=("price", data.model)) as m:
        currency = repository.currency_of(m.session, data.model)
        if currency is not None and currency != data.currency:
            raise Validation.field("currency", f"{data.model} is priced in {currency}")
        if repository.exists_at(m.session, data.model, effective_from):
            raise Conflict("a price for this model already takes effect at that moment")
        price = Price(
            model=data.model,
            currency=data.currency,
            input_micros_per_mtok=data.input_micros_per_mtok,
            output_micros_per_mtok=data.output_micros_per_mtok,
            cached_input_micros_per_mtok=data.cached_input_micros_per_mtok,
            cache_write_micros_per_mtok=data.cache_write_micros_per_mtok,
            reasoning_micros_per_mtok=data.reasoning_micros_per_mtok,
            effective_from=effective_from,
            created_at=now,
            created_by=caller.token_id,
        )
        m.session.add(price)
        m.session.flush()
        summary = data.model_dump(mode="json") | {"effective_from": effective_from.isoformat()}
        m.record("price.create", "price", str(price.id), summary)
    ctx.prices_changed.set()
    return price


def in_force(session: Session, caller: Caller, model: str, at: datetime | None) -> Price:
    caller.require_admin()
    price = repository.in_force(session, model, at or utcnow())
    if price is None:
        raise NotFound("no price in force for this model at that moment")
    return price


def get(session: Session, caller: Caller, price_id: int) -> Price:
    caller.require_admin()
    price = session.get(Price, price_id)
    if price is None:
        raise NotFound("price not found")
    return price


def list_page(
    session: Session, caller: Caller, model: str | None, limit: int, cursor: str | None
) -> Page[PriceOut]:
    caller.require_admin()
    rows = repository.page(session, model=model, after=decode_cursor(cursor, int), limit=limit)
    items, next_cursor = page(rows, limit, lambda p: p.id)
    return Page(items=[PriceOut.model_validate(p) for p in items], next_cursor=next_cursor)
