"""Drill queries, newest first."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, and_, select
from sqlalchemy.orm import Session

from control.api.pagination import keyset
from control.drills.models import Drill


def is_active(now: datetime | ColumnElement[datetime]) -> ColumnElement[bool]:
    return and_(Drill.ended_at.is_(None), Drill.ends_at > now)


def get(session: Session, drill_id: str) -> Drill | None:
    return session.get(Drill, drill_id)


def active(session: Session, now: datetime) -> Sequence[Drill]:
    return session.scalars(select(Drill).where(is_active(now)).order_by(Drill.id)).all()


def page(
    session: Session,
    *,
    pool: str | None,
    active_at: datetime | None,
    after: str | None,
    limit: int,
) -> Sequence[Drill]:
    stmt = select(Drill)
    if pool is not None:
        stmt = stmt.where(Drill.pool_id == pool)
    if active_at is not None:
        stmt = stmt.where(is_active(active_at))
    return session.scalars(keyset(stmt, Drill.id, after, limit, descending=True)).all()
