"""Price queries, including the one costing needs: the version in force at a moment."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.api.pagination import keyset
from control.prices.models import Price


def in_force(session: Session, model: str, at: datetime) -> Price | None:
    stmt = (
        select(Price)
        .where(Price.model == model, Price.effective_from <= at)
        .order_by(Price.effective_from.desc())
        .limit(1)
    )
    return session.scalars(stmt).first()


def currency_of(session: Session, model: str) -> str | None:
    return session.scalar(select(Price.currency).where(Price.model == model).limit(1))


def exists_at(session: Session, model: str, effective_from: datetime) -> bool:
    stmt = select(Price.id).where(Price.model == model, Price.effective_from == effective_from)
    return session.scalar(stmt) is not None


def page(session: Session, *, model: str | None, after: int | None, limit: int) -> Sequence[Price]:
    stmt = select(Price)
    if model is not None:
        stmt = stmt.where(Price.model == model)
    return session.scalars(keyset(stmt, Price.id, after, limit)).all()
