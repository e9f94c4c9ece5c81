"""Reading usage: raw rows, and a key's series, totals per model, latency percentiles and CSV
export. A tenant token reads only its own tenant's: another tenant's key answers 404."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from control.api.caller import Caller
from control.api.errors import NotFound, Validation
from control.api.pagination import INT64, decode_cursor, encode_cursor
from control.api.schemas import Page
from control.keys import service as keys
from control.keys.models import ApiKey
from control.timeutil import as_utc, from_unix, utcnow
from control.usage import repository
from control.usage.events import FIELDS
from control.usage.models import GRANULARITIES
from control.usage.repository import Position, UsageFilters
from control.usage.rollups import COUNTERS, MINUTE, ceil_to, floor_to
from control.usage.schemas import (
    Bucket,
    Granularity,
    GroupTotals,
    KeyLatency,
    ModelTotals,
    Percentiles,
    Totals,
    UsageByModel,
    UsageGroups,
    UsageOut,
    UsageSeries,
)

MAX_BUCKETS = 10_000
# The range when none is given: the last hour of minutes, day of hours, 30 days of days; the last
# day for totals, latency and exports.
DEFAULT_SPAN = {"minute": 3600, "hour": 86400, "day": 30 * 86400}
DEFAULT_RANGE = timedelta(days=1)


# --- raw rows ----------------------------------------------------------------------------------


def _position(cursor: str | None) -> Position | None:
    text = decode_cursor(cursor, str)
    if text is None:
        return None
    started_at, _, row_id = text.rpartition("|")
    try:
        position = as_utc(datetime.fromisoformat(started_at)), int(row_id)
    except ValueError:
        raise Validation.field("cursor", "is not a cursor returned by this list") from None
    if position[1] not in INT64:
        raise Validation.field("cursor", "is not a cursor returned by this list")
    return position


def list_page(
    session: Session, caller: Caller, filters: UsageFilters, limit: int, cursor: str | None
) -> Page[UsageOut]:
    tenant_id = caller.scope(filters.tenant_id)
    if filters.key_id is not None and not caller.is_admin:
        key = session.get(ApiKey, filters.key_id)
        if key is None or key.tenant_id != caller.tenant_id:
            raise NotFound("key not found")
    rows = repository.page(session, replace(filters, tenant_id=tenant_id), _position(cursor), limit)
    items = list(rows[:limit])
    next_cursor = None
    if len(rows) > limit and items:
        last = items[-1]
        next_cursor = encode_cursor(f"{last.started_at.isoformat()}|{last.id}")
    return Page(items=[UsageOut.model_validate(r) for r in items], next_cursor=next_cursor)


# --- attribution: tags and end users -------------------------------------------------------------

# A tag as the core accepts it in `x-sluicegate-tags` (`proxy_core/src/proxy/attribution.rs`).
_TAG = re.compile(r"([a-z0-9_.-]{1,32})=([A-Za-z0-9_.:/@+-]{1,64})")
GROUP_BY = ("end_user", "model", "key_id")
MAX_GROUPS = 1000


def parse_tag(text: str | None) -> tuple[str, str] | None:
    """A `tag` filter, `NAME=VALUE`."""
    if text is None:
        return None
    match = _TAG.fullmatch(text)
    if match is None:
        raise Validation.field(
            "tag", "must be NAME=VALUE as in x-sluicegate-tags (e.g. team=search)"
        )
    return match[1], match[2]


def _group_by(by: str) -> str:
    name = by.removeprefix("tag:")
    if by in GROUP_BY or (by.startswith("tag:") and re.fullmatch(r"[a-z0-9_.-]{1,32}", name)):
        return by
    raise Validation.field("by", f"must be tag:NAME or one of {', '.join(GROUP_BY)}")


def raw_range(
    start: datetime | None, end: datetime | None, max_days: int
) -> tuple[datetime, datetime]:
    """The range of a read of raw rows (default: the last day), at most `max_days`
    (`usage.latency_max_days`): the range is the one input that sets how much a call reads."""
    stop = end or utcnow()
    begin = start or stop - DEFAULT_RANGE
    if begin >= stop:
        raise Validation.field("from", "must be before `to`")
    if stop - begin > timedelta(days=max_days):
        raise Validation.field(
            "from",
            f"the range covers more than {max_days} days (usage.latency_max_days): narrow it",
        )
    return begin, stop


def groups(
    session: Session,
    caller: Caller,
    by: str,
    filters: UsageFilters,
    range_: tuple[datetime | None, datetime | None],
    limit: int,
    *,
    max_days: int,
) -> UsageGroups:
    """Totals of the raw rows of a range per value of `by`; tenant tokens: their own tenant."""
    by = _group_by(by)
    if filters.key_id is not None:
        keys.visible(session, caller, filters.key_id)
    begin, stop = raw_range(*range_, max_days)
    scoped = replace(filters, tenant_id=caller.scope(filters.tenant_id), since=begin, until=stop)
    rows = repository.groups(session, scoped, by, limit)
    return UsageGroups(
        by=by,
        start=begin,
        end=stop,
        groups=[GroupTotals(value=value, **_totals(values)) for value, values in rows[:limit]],
        truncated=len(rows) > limit,
    )


# --- a key's views -----------------------------------------------------------------------------


def _range(start: datetime | None, end: datetime | None, default: timedelta) -> tuple[int, int]:
    """[start, end) in unix seconds, whole minutes (rollups have nothing finer)."""
    stop = ceil_to(int((end or utcnow()).timestamp()), MINUTE)
    begin = floor_to(int((start or from_unix(stop) - default).timestamp()), MINUTE)
    if begin >= stop:
        raise Validation.field("from", "must be before `to` (ranges are whole minutes)")
    return begin, stop


def _totals(values: list[int]) -> dict[str, int]:
    return dict(zip(COUNTERS, values, strict=True))


def series(
    session: Session,
    caller: Caller,
    key_id: str,
    granularity: Granularity,
    start: datetime | None,
    end: datetime | None,
    model: str | None,
) -> UsageSeries:
    key, _ = keys.visible(session, caller, key_id)
    size = GRANULARITIES[granularity]
    begin, stop = _range(start, end, timedelta(seconds=DEFAULT_SPAN[granularity]))
    begin, stop = floor_to(begin, size), ceil_to(stop, size)
    count = (stop - begin) // size
    if count > MAX_BUCKETS:
        raise Validation.field(
            "from",
            f"the range holds {count} {granularity}s; at most {MAX_BUCKETS} buckets: "
            "narrow it or take a coarser granularity",
        )
    rows = repository.buckets(session, key.id, granularity, begin, stop, model)
    return UsageSeries(
        key_id=key.id,
        granularity=granularity,
        model=model,
        start=from_unix(begin),
        end=from_unix(stop),
        buckets=[Bucket(start=from_unix(b), **_totals(v)) for b, v in rows],
    )


def by_model(
    session: Session, caller: Caller, key_id: str, start: datetime | None, end: datetime | None
) -> UsageByModel:
    key, _ = keys.visible(session, caller, key_id)
    begin, stop = _range(start, end, DEFAULT_RANGE)
    rows = repository.per_model(session, key.id, begin, stop)
    total = [sum(values[i] for _, values in rows) for i in range(len(COUNTERS))]
    return UsageByModel(
        key_id=key.id,
        start=from_unix(begin),
        end=from_unix(stop),
        models=[ModelTotals(model=m, **_totals(v)) for m, v in rows],
        total=Totals(**_totals(total)),
    )


def _percentiles(
    session: Session, key_id: str, start: datetime, end: datetime, column: str
) -> Percentiles:
    if session.get_bind().dialect.name == "postgresql":
        count, (p50, p95, p99) = repository.percentiles_sql(session, key_id, start, end, column)
    else:
        count, (p50, p95, p99) = repository.percentiles_ranked(session, key_id, start, end, column)
    return Percentiles(count=count, p50=p50, p95=p95, p99=p99)


def latency(
    session: Session,
    caller: Caller,
    key_id: str,
    start: datetime | None,
    end: datetime | None,
    *,
    max_days: int,
) -> KeyLatency:
    """Percentiles of raw rows over at most `max_days` (`usage.latency_max_days`): the range is
    the one input that sets how much a call reads."""
    key, _ = keys.visible(session, caller, key_id)
    begin, stop = raw_range(start, end, max_days)
    return KeyLatency(
        key_id=key.id,
        start=begin,
        end=stop,
        ttft_ms=_percentiles(session, key.id, begin, stop, "ttft_ms"),
        tpot_ms=_percentiles(session, key.id, begin, stop, "tpot_ms"),
    )


# --- CSV export ----------------------------------------------------------------------------------

# The raw row's fields, its start first; `seq` only numbered the core's hand-off.
CSV_COLUMNS = ("started_at", *(f for f in FIELDS if f not in ("seq", "started_at")))
EXPORT_PAGE = 2000


def export_range(
    session: Session, caller: Caller, key_id: str, start: datetime | None, end: datetime | None
) -> tuple[str, datetime, datetime]:
    """Check access and the range before the response starts (errors cannot follow a 200)."""
    key, _ = keys.visible(session, caller, key_id)
    stop = end or utcnow()
    begin = start or stop - DEFAULT_RANGE
    if begin >= stop:
        raise Validation.field("from", "must be before `to`")
    return key.id, begin, stop


def _csv_value(row: object, column: str) -> object:
    value = getattr(row, column)
    if column == "started_at":
        return value.isoformat()
    if column == "tags" and value is not None:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return value


def export_csv(
    sessions: sessionmaker[Session], filters: UsageFilters, start: datetime, end: datetime
) -> Iterator[str]:
    """The raw rows of the range (of the filters' key, tag and end user) in start order, a page
    at a time (one short read each)."""
    ranged = replace(filters, since=start, until=end)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    after: Position | None = None
    while True:
        with sessions() as session:
            rows = repository.export_page(session, ranged, after, EXPORT_PAGE)
        for r in rows:
            writer.writerow([_csv_value(r, c) for c in CSV_COLUMNS])
        yield out.getvalue()
        out.seek(0)
        out.truncate()
        if len(rows) < EXPORT_PAGE:
            return
        after = (rows[-1].started_at, rows[-1].id)
