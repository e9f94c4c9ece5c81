"""What each quota has used in its current period, from the rollups: whole days, then hours,
then minutes at the start of the counted period (which is always minute-aligned), in three
grouped queries for all the keys (or tenants) asked for at once. The start is computed in SQL
from each row's period and `quota_since`, so that a snapshot at 100k keys stays three queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from sqlalchemy import BigInteger, ColumnElement, Connection, and_, case, func, literal, select

from control.keys.models import ApiKey
from control.quotas.periods import period_start
from control.tenants.models import Tenant
from control.usage.models import UsageRollup
from control.usage.rollups import DAY, HOUR

Scope = Literal["key", "tenant"]
Used = dict[str, tuple[int, int]]


def _greatest(conn: Connection, a: ColumnElement[int], b: ColumnElement[int]) -> ColumnElement[int]:
    if conn.dialect.name == "sqlite":
        return func.max(a, b, type_=BigInteger)
    return func.greatest(a, b, type_=BigInteger)


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
    day_from, hour_from = _ceil(start, DAY), _ceil(start, HOUR)
    r = UsageRollup
    spans = [
        and_(r.granularity == "day", r.bucket >= day_from),
        and_(r.granularity == "hour", r.bucket >= hour_from, r.bucket < day_from),
        and_(r.granularity == "minute", r.bucket >= start, r.bucket < hour_from),
    ]
    totals: Used = {}
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
        for ident, tokens, cost in conn.execute(stmt):
            before = totals.get(ident, (0, 0))
            totals[ident] = (before[0] + int(tokens or 0), before[1] + int(cost or 0))
    return totals
