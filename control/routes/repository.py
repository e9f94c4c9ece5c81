"""Route queries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.api.pagination import keyset
from control.pools.models import Pool
from control.routes.models import Route, RouteTarget


def get(session: Session, alias: str) -> Route | None:
    return session.get(Route, alias)


def page(session: Session, *, pool: str | None, after: str | None, limit: int) -> Sequence[Route]:
    stmt = select(Route)
    if pool is not None:
        using = select(RouteTarget.route_alias).where(RouteTarget.pool_id == pool)
        stmt = stmt.where(Route.alias.in_(using))
    return session.scalars(keyset(stmt, Route.alias, after, limit)).all()


def existing_pools(session: Session, pool_ids: Iterable[str]) -> set[str]:
    ids = set(pool_ids)
    if not ids:
        return set()
    return set(session.scalars(select(Pool.id).where(Pool.id.in_(ids))))


def objectives(session: Session) -> dict[str, int]:
    """Each route's `slo_ttft_p95_ms`, for the routes that have one."""
    rows = session.execute(
        select(Route.alias, Route.slo_ttft_p95_ms).where(Route.slo_ttft_p95_ms.is_not(None))
    )
    return {alias: slo for alias, slo in rows if slo is not None}
