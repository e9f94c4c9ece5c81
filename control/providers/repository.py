"""Provider queries."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.api.pagination import keyset
from control.pools.models import PoolMember
from control.providers.models import Provider


def get(session: Session, provider_id: str) -> Provider | None:
    return session.get(Provider, provider_id)


def page(
    session: Session, *, kind: str | None, after: str | None, limit: int
) -> Sequence[Provider]:
    stmt = select(Provider)
    if kind is not None:
        stmt = stmt.where(Provider.kind == kind)
    return session.scalars(keyset(stmt, Provider.id, after, limit)).all()


def pools_using(session: Session, provider_id: str) -> list[str]:
    stmt = (
        select(PoolMember.pool_id)
        .where(PoolMember.provider_id == provider_id)
        .distinct()
        .order_by(PoolMember.pool_id)
    )
    return list(session.scalars(stmt))
