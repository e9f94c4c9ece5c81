"""Pool queries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.api.pagination import keyset
from control.pools.models import Pool
from control.providers.models import Provider
from control.routes.models import RouteTarget


def get(session: Session, pool_id: str) -> Pool | None:
    return session.get(Pool, pool_id)


def page(session: Session, *, after: str | None, limit: int) -> Sequence[Pool]:
    return session.scalars(keyset(select(Pool), Pool.id, after, limit)).all()


def provider_kinds(session: Session, provider_ids: Iterable[str]) -> dict[str, str]:
    ids = set(provider_ids)
    if not ids:
        return {}
    stmt = select(Provider.id, Provider.kind).where(Provider.id.in_(ids))
    return {row.id: row.kind for row in session.execute(stmt)}


def routes_using(session: Session, pool_id: str) -> list[str]:
    stmt = (
        select(RouteTarget.route_alias)
        .where(RouteTarget.pool_id == pool_id)
        .distinct()
        .order_by(RouteTarget.route_alias)
    )
    return list(session.scalars(stmt))
