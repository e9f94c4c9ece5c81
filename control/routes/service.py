"""Route operations (admin only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.api.errors import Conflict, FieldError, NotFound, Validation
from control.api.pagination import decode_cursor, page
from control.api.schemas import Page
from control.context import ControlContext
from control.routes import repository
from control.routes.models import Route, RouteTarget
from control.routes.schemas import RouteCreate, RouteOut, RouteUpdate, Target, TargetOut
from control.timeutil import utcnow


def to_out(route: Route) -> RouteOut:
    return RouteOut(
        alias=route.alias,
        chain=[TargetOut(pool=t.pool_id, model=t.model) for t in route.chain],
        max_output_tokens=route.max_output_tokens,
        slo_ttft_p95_ms=route.slo_ttft_p95_ms,
        created_at=route.created_at,
        updated_at=route.updated_at,
    )


def get(session: Session, caller: Caller, alias: str) -> RouteOut:
    caller.require_admin()
    route = repository.get(session, alias)
    if route is None:
        raise NotFound("route not found")
    return to_out(route)


def list_page(
    session: Session, caller: Caller, pool: str | None, limit: int, cursor: str | None
) -> Page[RouteOut]:
    caller.require_admin()
    rows = repository.page(session, pool=pool, after=decode_cursor(cursor, str), limit=limit)
    items, next_cursor = page(rows, limit, lambda r: r.alias)
    return Page(items=[to_out(r) for r in items], next_cursor=next_cursor)


def _chain(session: Session, chain: Sequence[Target]) -> list[RouteTarget]:
    known = repository.existing_pools(session, (t.pool for t in chain))
    errors = []
    seen: set[str] = set()
    for j, target in enumerate(chain):
        if target.pool not in known:
            errors.append(FieldError(f"chain[{j}].pool", "unknown pool"))
        elif target.pool in seen:
            errors.append(FieldError(f"chain[{j}].pool", "pool listed twice in one chain"))
        seen.add(target.pool)
    if errors:
        raise Validation("invalid route chain", errors)
    return [RouteTarget(position=j, pool_id=t.pool, model=t.model) for j, t in enumerate(chain)]


def _chain_summary(chain: Sequence[Target]) -> list[dict[str, Any]]:
    return [t.model_dump() for t in chain]


def create(ctx: ControlContext, caller: Caller, data: RouteCreate) -> RouteOut:
    caller.require_admin()
    with ctx.mutator.mutate(caller, subject=("route", data.alias)) as m:
        if repository.get(m.session, data.alias) is not None:
            raise Conflict(f"route {data.alias!r} already exists")
        now = utcnow()
        route = Route(
            alias=data.alias,
            max_output_tokens=data.max_output_tokens,
            slo_ttft_p95_ms=data.slo_ttft_p95_ms,
            chain=_chain(m.session, data.chain),
            created_at=now,
            updated_at=now,
        )
        m.session.add(route)
        m.record("route.create", "route", data.alias, data.model_dump(exclude_none=True))
    return to_out(route)


def update(ctx: ControlContext, caller: Caller, alias: str, data: RouteUpdate) -> RouteOut:
    caller.require_admin()
    sent = data.model_fields_set
    # The SLO lives in the control plane only: a change of it alone pushes no snapshot.
    affects_core = data.chain is not None or "max_output_tokens" in sent
    with ctx.mutator.mutate(caller, subject=("route", alias), affects_core=affects_core) as m:
        route = repository.get(m.session, alias)
        if route is None:
            raise NotFound("route not found")
        summary: dict[str, Any] = {}
        if data.chain is not None:
            chain = _chain(m.session, data.chain)
            current = [{"pool": t.pool_id, "model": t.model} for t in route.chain]
            if _chain_summary(data.chain) != current:
                route.chain.clear()
                m.session.flush()
                route.chain.extend(chain)
                summary["chain"] = _chain_summary(data.chain)
        if "max_output_tokens" in sent and data.max_output_tokens != route.max_output_tokens:
            route.max_output_tokens = summary["max_output_tokens"] = data.max_output_tokens
        if "slo_ttft_p95_ms" in sent and data.slo_ttft_p95_ms != route.slo_ttft_p95_ms:
            route.slo_ttft_p95_ms = summary["slo_ttft_p95_ms"] = data.slo_ttft_p95_ms
        if summary:
            route.updated_at = utcnow()
            m.record("route.update", "route", alias, summary)
    return to_out(route)


def delete(ctx: ControlContext, caller: Caller, alias: str) -> None:
    caller.require_admin()
    with ctx.mutator.mutate(caller, subject=("route", alias)) as m:
        route = repository.get(m.session, alias)
        if route is None:
            raise NotFound("route not found")
        m.session.delete(route)
        m.record("route.delete", "route", alias, {})
