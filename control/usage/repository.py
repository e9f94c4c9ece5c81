"""Usage rows: idempotent batch insert (by request id, on SQLite and PostgreSQL) and queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from control.pagination import keyset
from control.timeutil import from_unix, utcnow
from control.usage.models import UsageRecord
from control.usage.schemas import UsageEvent


def _insert_ignoring_duplicates(dialect: str) -> Insert:
    if dialect == "sqlite":
        return sqlite.insert(UsageRecord).on_conflict_do_nothing(index_elements=["request_id"])
    if dialect == "postgresql":
        return postgresql.insert(UsageRecord).on_conflict_do_nothing(index_elements=["request_id"])
    raise RuntimeError(f"usage rows need SQLite or PostgreSQL, not {dialect}")


def _row(event: UsageEvent, recorded_at: datetime) -> dict[str, Any]:
    row = event.model_dump()
    row["started_at"] = from_unix(event.started_at)
    row["recorded_at"] = recorded_at
    return row


def insert_events(session: Session, events: Sequence[UsageEvent]) -> int:
    """Insert the events not already stored; returns how many were new."""
    if not events:
        return 0
    now = utcnow()
    stmt = _insert_ignoring_duplicates(session.get_bind().dialect.name)
    result = session.execute(stmt.returning(UsageRecord.request_id), [_row(e, now) for e in events])
    return len(result.all())


@dataclass(frozen=True)
class UsageFilters:
    tenant_id: str | None = None
    key_id: str | None = None
    model: str | None = None
    outcome: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def page(
    session: Session, filters: UsageFilters, after: int | None, limit: int
) -> Sequence[UsageRecord]:
    """Newest first."""
    stmt = select(UsageRecord)
    if filters.tenant_id is not None:
        stmt = stmt.where(UsageRecord.tenant_id == filters.tenant_id)
    if filters.key_id is not None:
        stmt = stmt.where(UsageRecord.key_id == filters.key_id)
    if filters.model is not None:
        stmt = stmt.where(UsageRecord.model == filters.model)
    if filters.outcome is not None:
        stmt = stmt.where(UsageRecord.outcome == filters.outcome)
    if filters.since is not None:
        stmt = stmt.where(UsageRecord.started_at >= filters.since)
    if filters.until is not None:
        stmt = stmt.where(UsageRecord.started_at < filters.until)
    return session.scalars(keyset(stmt, UsageRecord.id, after, limit, descending=True)).all()
