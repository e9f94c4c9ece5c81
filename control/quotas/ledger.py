"""What each quota has used in its current period, from the rollups: whole days, then hours,
then minutes at the start of the counted period, and the raw rows of the second-aligned part
before its first whole minute (a quota set or reset mid-minute), in four grouped queries for all
the keys (or tenants) asked for at once. The start is computed in SQL from each row's period and
`quota_since`, so that a snapshot at 100k keys stays four queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy import BigInteger, ColumnElement, Connection, and_, case, func, literal, select

from control.keys.models import ApiKey
from control.quotas.periods import period_start
from control.tenants.models import Tenant
from control.usage.models import UsageRecord, UsageRollup
from control.usage.rollups import DAY, HOUR, MINUTE

Scope = Literal["key", "tenant"]
Used = dict[str, tuple[int, int]]


def _greatest(conn: Connection, a: ColumnElement[int], b: ColumnElement[int]) -> ColumnElement[int]:
    if conn.dialect.name == "sqlite":
        return func.max(a, b, type_=BigInteger)
    return func.greatest(a, b, type_=BigInteger)


def _moment(conn: Connection, unix: ColumnElement[int]) -> ColumnElement[Any]:
    """Unix seconds as the database's `started_at`: SQLite's text form compares as text (the
    stored one has microseconds, so a row at exactly that second compares after it)."""
    if conn.dialect.name == "sqlite":
        return func.datetime(unix, "unixepoch")
    return func.to_timestamp(unix)


def _ceil(value: ColumnElement[int], seconds: int) -> ColumnElement[int]:
    return ((value + (seconds - 1)) // seconds) * seconds


def used(conn: Connection, scope: Scope, now: int, ids: Sequence[str] | None = None) -> Used:
    """`{id: (tokens, cost_micros)}` for the quota-bearing keys or tenants (all, or `ids`)."""
    table = ApiKey if scope == "key" else Tenant
    owner = UsageRollup.key_id if scope == "key" else UsageRollup.tenant_id
    natural = case(
        (table.quota_period == "daily", literal(period_start("daily", now))),
        (table.quota_period == "monthly", literal(period_start("monthly", now))),
        else_=literal(0),
    )
    start = _greatest(conn, natural, func.coalesce(table.quota_since, 0))
    day_from, hour_from, minute_from = _ceil(start, DAY), _ceil(start, HOUR), _ceil(start, MINUTE)
    r = UsageRollup
    spans = [
        and_(r.granularity == "day", r.bucket >= day_from),
        and_(r.granularity == "hour", r.bucket >= hour_from, r.bucket < day_from),
        and_(r.granularity == "minute", r.bucket >= minute_from, r.bucket < hour_from),
    ]
    totals: Used = {}

    def add(rows: Any) -> None:
        for ident, tokens, cost in rows:
            before = totals.get(ident, (0, 0))
            totals[ident] = (before[0] + int(tokens or 0), before[1] + int(cost or 0))

    for span in spans:
        stmt = (
            select(
                table.id,
                func.sum(r.prompt_tokens + r.completion_tokens),
                func.sum(r.cost_micros),
            )
            .join(r, and_(owner == table.id, span))
            .where(table.quota_period.is_not(None))
            .group_by(table.id)
        )
        if ids is not None:
            stmt = stmt.where(table.id.in_(ids))
        add(conn.execute(stmt))

    # The seconds before the first whole minute, from the raw rows (kept far longer than that).
    u = UsageRecord
    raw_owner = u.key_id if scope == "key" else u.tenant_id
    stmt = (
        select(table.id, func.sum(u.prompt_tokens + u.completion_tokens), func.sum(u.cost_micros))
        .join(
            u,
            and_(
                raw_owner == table.id,
                u.started_at >= _moment(conn, start),
                u.started_at < _moment(conn, minute_from),
            ),
        )
        .where(table.quota_period.is_not(None), start < minute_from)
        .group_by(table.id)
    )
    if ids is not None:
        stmt = stmt.where(table.id.in_(ids))
    add(conn.execute(stmt))
    return totals
