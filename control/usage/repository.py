"""Usage queries: raw rows newest first (keyset on start time and id), a key's buckets and its
totals per model (rollups), latency percentiles (raw rows, in SQL on both databases), raw rows
in start order for the CSV export, and totals of raw rows grouped by a tag, the end user, the
model or the key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sluicegate.percentile import rank
from sqlalchemy import ColumnElement, Select, and_, case, func, or_, select
from sqlalchemy.orm import Session

from control.usage.events import ERROR_OUTCOMES
from control.usage.models import UsageRecord, UsageRollup
from control.usage.rollups import COUNTERS, in_pieces, pieces

# The latency views' percentiles: P50, P95, P99.
QUANTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True)
class UsageFilters:
    tenant_id: str | None = None
    key_id: str | None = None
    model: str | None = None
    outcome: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    # A tag's name and value (`x-sluicegate-tags`), and the end user.
    tag: tuple[str, str] | None = None
    end_user: str | None = None


def _where(filters: UsageFilters) -> list[ColumnElement[bool]]:
    r = UsageRecord
    where: list[ColumnElement[bool]] = []
    if filters.tenant_id is not None:
        where.append(r.tenant_id == filters.tenant_id)
    if filters.key_id is not None:
        where.append(r.key_id == filters.key_id)
    if filters.model is not None:
        where.append(r.model == filters.model)
    if filters.outcome is not None:
        where.append(r.outcome == filters.outcome)
    if filters.since is not None:
        where.append(r.started_at >= filters.since)
    if filters.until is not None:
        where.append(r.started_at < filters.until)
    if filters.tag is not None:
        name, value = filters.tag
        where.append(r.tags[name].as_string() == value)
    if filters.end_user is not None:
        where.append(r.end_user == filters.end_user)
    return where


# A position in the newest-first order: (started_at, id).
Position = tuple[datetime, int]


def _after(position: Position, descending: bool) -> ColumnElement[bool]:
    started_at, row_id = position
    r = UsageRecord
    if descending:
        return or_(r.started_at < started_at, and_(r.started_at == started_at, r.id < row_id))
    return or_(r.started_at > started_at, and_(r.started_at == started_at, r.id > row_id))


def page(
    session: Session, filters: UsageFilters, after: Position | None, limit: int
) -> Sequence[UsageRecord]:
    """Newest first (by start time); one more than `limit`, to know if more exist."""
    r = UsageRecord
    stmt = select(r).where(*_where(filters))
    if after is not None:
        stmt = stmt.where(_after(after, descending=True))
    stmt = stmt.order_by(r.started_at.desc(), r.id.desc()).limit(limit + 1)
    return session.scalars(stmt).all()


def _counters() -> list[Any]:
    return [func.sum(getattr(UsageRollup, c)).label(c) for c in COUNTERS]


def buckets(
    session: Session, key_id: str, granularity: str, start: int, end: int, model: str | None
) -> list[tuple[int, list[int]]]:
    r = UsageRollup
    stmt = (
        select(r.bucket, *_counters())
        .where(
            r.granularity == granularity,
            r.key_id == key_id,
            r.bucket >= start,
            r.bucket < end,
        )
        .group_by(r.bucket)
        .order_by(r.bucket)
    )
    if model is not None:
        stmt = stmt.where(r.model == model)
    return [(int(row[0]), [int(v) for v in row[1:]]) for row in session.execute(stmt)]


def per_model(session: Session, key_id: str, start: int, end: int) -> list[tuple[str, list[int]]]:
    """Counters per model over [start, end) (minute-aligned), from the coarsest buckets that fit."""
    ranges = pieces(start, end)
    if not ranges:
        return []
    r = UsageRollup
    stmt = (
        select(r.model, *_counters())
        .where(r.key_id == key_id, in_pieces(ranges))
        .group_by(r.model)
        .order_by(r.model)
    )
    return [(row[0], [int(v) for v in row[1:]]) for row in session.execute(stmt)]


def _in_range(key_id: str, start: datetime, end: datetime) -> list[ColumnElement[bool]]:
    r = UsageRecord
    return [r.key_id == key_id, r.started_at >= start, r.started_at < end]


def percentiles_sql(
    session: Session, key_id: str, start: datetime, end: datetime, column: str
) -> tuple[int, list[float | None]]:
    """PostgreSQL: `percentile_disc` is the nearest-rank percentile."""
    value = getattr(UsageRecord, column)
    stmt = select(
        func.count(value),
        *(func.percentile_disc(q).within_group(value) for q in QUANTILES),
    ).where(*_in_range(key_id, start, end), value.is_not(None))
    count, *values = session.execute(stmt).one()
    return int(count), [None if v is None else float(v) for v in values]


def percentiles_ranked(
    session: Session, key_id: str, start: datetime, end: datetime, column: str
) -> tuple[int, list[float | None]]:
    """SQLite: the count, then the values at the nearest ranks, picked by a window over the
    range sorted in SQL; at most three rows reach Python whatever the range holds."""
    value = getattr(UsageRecord, column)
    where = (*_in_range(key_id, start, end), value.is_not(None))
    count = session.scalar(select(func.count()).select_from(UsageRecord).where(*where)) or 0
    if not count:
        return 0, [None] * len(QUANTILES)
    ranks = [rank(count, q) for q in QUANTILES]
    ranked = (
        select(value.label("value"), func.row_number().over(order_by=value).label("rank"))
        .where(*where)
        .subquery()
    )
    stmt = select(ranked.c.rank, ranked.c.value).where(ranked.c.rank.in_(set(ranks)))
    picked = {int(at): float(v) for at, v in session.execute(stmt)}
    return count, [picked[r] for r in ranks]


def export_page(
    session: Session, filters: UsageFilters, after: Position | None, limit: int
) -> Sequence[UsageRecord]:
    """Raw rows of the filters' range in start order."""
    r = UsageRecord
    stmt: Select[UsageRecord] = select(r).where(*_where(filters))
    if after is not None:
        stmt = stmt.where(_after(after, descending=False))
    return session.scalars(stmt.order_by(r.started_at, r.id).limit(limit)).all()


def group_key(by: str) -> ColumnElement[Any]:
    """What `groups` groups by: `tag:NAME` (a tag's value), `end_user`, `model` or `key_id`."""
    r = UsageRecord
    if by.startswith("tag:"):
        tag: ColumnElement[Any] = r.tags[by.removeprefix("tag:")].as_string()
        return tag
    columns: dict[str, ColumnElement[Any]] = {
        "end_user": r.end_user.expression,
        "model": r.model.expression,
        "key_id": r.key_id.expression,
    }
    return columns[by]


def groups(
    session: Session, filters: UsageFilters, by: str, limit: int
) -> list[tuple[str | None, list[int]]]:
    """The counters of `COUNTERS` over the filtered raw rows, per value of `by` (None: rows
    without one), the costliest first; one more than `limit`, to know if more exist. Grouped
    in a subquery: PostgreSQL would not match a JSON path in GROUP BY to the same path in the
    select list (each has a parameter of its own)."""
    r = UsageRecord
    errors = case((or_(r.status >= 400, r.outcome.in_(sorted(ERROR_OUTCOMES))), 1), else_=0)
    rows = (
        select(
            group_key(by).label("value"),
            r.prompt_tokens,
            r.completion_tokens,
            r.cached_tokens,
            r.cost_micros,
            errors.label("error"),
        )
        .where(*_where(filters))
        .subquery()
    )
    c = rows.c
    cost = func.sum(c.cost_micros)
    stmt = (
        select(
            c.value,
            func.count(),
            func.sum(c.prompt_tokens),
            func.sum(c.completion_tokens),
            func.sum(c.cached_tokens),
            cost,
            func.sum(c.error),
        )
        .group_by(c.value)
        .order_by(cost.desc(), func.count().desc(), c.value)
        .limit(limit + 1)
    )
    return [(row[0], [int(v) for v in row[1:]]) for row in session.execute(stmt)]
