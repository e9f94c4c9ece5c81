"""Rollups: per (granularity, bucket, tenant, key, model) sums of requests, tokens, cost and
errors (added by the database itself for the rows each batch inserted: `writer.py`); and sums over
any minute-aligned range, read from the coarsest buckets that fit in it.

Buckets are unix seconds (UTC) of the minute, hour or day a request started in: a request that
started before midnight counts on the day it started, as the core bills it to the quota period
it started in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, or_

from control.usage.models import UsageRollup

MINUTE, HOUR, DAY = 60, 3600, 86400

# Counters of one rollup row, in this order everywhere below.
COUNTERS = (
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cost_micros",
    "errors",
)


# --- sums over ranges ------------------------------------------------------------------------


def floor_to(moment: int, seconds: int) -> int:
    return moment - moment % seconds


def ceil_to(moment: int, seconds: int) -> int:
    return -(-moment // seconds) * seconds


@dataclass(frozen=True)
class Piece:
    granularity: str
    start: int
    end: int | None  # None: open-ended


def pieces(start: int, end: int | None) -> list[Piece]:
    """[start, end) as whole days, with hours then minutes at either edge. `start` and `end` are
    minute-aligned unix seconds."""
    out: list[Piece] = []
    day_start, hour_start = ceil_to(start, DAY), ceil_to(start, HOUR)
    if end is None:
        out.append(Piece("minute", start, hour_start))
        out.append(Piece("hour", hour_start, day_start))
        out.append(Piece("day", day_start, None))
        return [p for p in out if p.end is None or p.start < p.end]
    day_end, hour_end = floor_to(end, DAY), floor_to(end, HOUR)
    if day_start >= day_end:
        # No whole day inside: hours, with minutes at the edges.
        if hour_start >= hour_end:
            return [Piece("minute", start, end)] if start < end else []
        out = [
            Piece("minute", start, hour_start),
            Piece("hour", hour_start, hour_end),
            Piece("minute", hour_end, end),
        ]
    else:
        out = [
            Piece("minute", start, hour_start),
            Piece("hour", hour_start, day_start),
            Piece("day", day_start, day_end),
            Piece("hour", day_end, hour_end),
            Piece("minute", hour_end, end),
        ]
    return [p for p in out if p.end is None or p.start < p.end]


def in_pieces(ranges: Sequence[Piece]) -> ColumnElement[bool]:
    r = UsageRollup
    clauses = []
    for p in ranges:
        cond = and_(r.granularity == p.granularity, r.bucket >= p.start)
        if p.end is not None:
            cond = and_(cond, r.bucket < p.end)
        clauses.append(cond)
    return or_(*clauses)
