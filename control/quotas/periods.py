"""Quota periods in unix seconds, UTC, as the core computes them (`limits/quota.rs`)."""

from __future__ import annotations

from datetime import UTC, datetime

from control.usage.rollups import DAY, floor_to


def period_start(period: str, now: int) -> int | None:
    """Unix second the period containing `now` began; None for a quota that never resets."""
    if period == "daily":
        return floor_to(now, DAY)
    if period == "monthly":
        moment = datetime.fromtimestamp(now, UTC)
        return int(datetime(moment.year, moment.month, 1, tzinfo=UTC).timestamp())
    return None


def period_end(period: str, now: int) -> int | None:
    if period == "daily":
        return floor_to(now, DAY) + DAY
    if period == "monthly":
        moment = datetime.fromtimestamp(now, UTC)
        year, month = (
            (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
        )
        return int(datetime(year, month, 1, tzinfo=UTC).timestamp())
    return None


def counted_from(period: str, since: int | None, now: int) -> int:
    """Where the ledger's count starts (unix second): the period's start, or `quota_since`
    (set for `none`, last reset) when later."""
    return max(period_start(period, now) or 0, since or 0)


def core_period_start(period: str, anchor: int | None, now: int) -> int:
    """The `period_start` the core gets: moving it forward makes the core take the ledger's
    figure again (a new definition, a reset); within a period it stays put."""
    return max(period_start(period, now) or 0, anchor or 0)
