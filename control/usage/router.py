"""Usage over the admin API: `/v1/admin/usage` (raw rows, newest first), `/v1/admin/usage/groups`
(totals per tag value, end user, model or key) and a key's views under
`/v1/admin/keys/{key_id}/usage/...`: time series, totals per model, latency percentiles, CSV.
A tenant token sees its own tenant's usage only."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas import ModelName, Page, PageLimit, Timestamp
from control.usage import service
from control.usage.repository import UsageFilters
from control.usage.schemas import (
    Granularity,
    KeyLatency,
    Outcome,
    UsageByModel,
    UsageGroups,
    UsageOut,
    UsageSeries,
)

router = APIRouter(tags=["usage"], responses=ERROR_RESPONSES)

From = Annotated[
    Timestamp | None, Query(alias="from", description="Start of the range (ISO 8601, inclusive)")
]
To = Annotated[Timestamp | None, Query(description="End of the range (exclusive); default now")]
KEY_VIEWS = "/v1/admin/keys/{key_id}/usage"
TagFilter = Annotated[
    str | None,
    Query(description="Only rows with this tag, NAME=VALUE as in x-sluicegate-tags"),
]
EndUserFilter = Annotated[str | None, Query(description="Only rows naming this end user")]


class CsvResponse(StreamingResponse):
    media_type = "text/csv"


# Errors are JSON even where success is CSV (FastAPI would document them as the route's type).
JSON_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        "description": spec["description"],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for status, spec in ERROR_RESPONSES.items()
}


@router.get("/v1/admin/usage", summary="List usage rows, newest first (tenant tokens: their own)")
def list_usage(
    caller: CallerDep,
    session: SessionDep,
    tenant_id: str | None = None,
    key_id: str | None = None,
    model: str | None = None,
    outcome: Outcome | None = None,
    since: Timestamp | None = None,
    until: Timestamp | None = None,
    tag: TagFilter = None,
    end_user: EndUserFilter = None,
    limit: PageLimit = 50,
    cursor: str | None = None,
) -> Page[UsageOut]:
    filters = UsageFilters(
        tenant_id, key_id, model, outcome, since, until, service.parse_tag(tag), end_user
    )
    return service.list_page(session, caller, filters, limit, cursor)


@router.get(
    "/v1/admin/usage/groups",
    summary="Usage totals per tag value, end user, model or key over a range of raw rows "
    "(default: 24h; at most usage.latency_max_days, 31 days by default), the costliest first",
)
def usage_groups(
    caller: CallerDep,
    session: SessionDep,
    ctx: ContextDep,
    by: Annotated[str, Query(description="tag:NAME, end_user, model or key_id")],
    tenant_id: str | None = None,
    key_id: str | None = None,
    model: str | None = None,
    tag: TagFilter = None,
    end_user: EndUserFilter = None,
    start: From = None,
    to: To = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_GROUPS)] = 100,
) -> UsageGroups:
    filters = UsageFilters(tenant_id, key_id, model, tag=service.parse_tag(tag), end_user=end_user)
    max_days = ctx.settings.usage.latency_max_days
    return service.groups(session, caller, by, filters, (start, to), limit, max_days=max_days)


@router.get(
    f"{KEY_VIEWS}/series",
    summary="A key's usage per minute, hour or day (default: the last 60, 24 or 30 of them)",
)
def key_series(
    key_id: str,
    caller: CallerDep,
    session: SessionDep,
    start: From = None,
    to: To = None,
    granularity: Granularity = "hour",
    model: ModelName | None = None,
) -> UsageSeries:
    return service.series(session, caller, key_id, granularity, start, to, model)


@router.get(f"{KEY_VIEWS}/models", summary="A key's usage per model over a range (default: 24h)")
def key_models(
    key_id: str, caller: CallerDep, session: SessionDep, start: From = None, to: To = None
) -> UsageByModel:
    return service.by_model(session, caller, key_id, start, to)


@router.get(
    f"{KEY_VIEWS}/latency",
    summary="A key's TTFT and TPOT percentiles (P50/P95/P99) over a range (default: 24h; at "
    "most usage.latency_max_days, 31 days by default)",
)
def key_latency(
    key_id: str,
    caller: CallerDep,
    session: SessionDep,
    ctx: ContextDep,
    start: From = None,
    to: To = None,
) -> KeyLatency:
    max_days = ctx.settings.usage.latency_max_days
    return service.latency(session, caller, key_id, start, to, max_days=max_days)


@router.get(
    f"{KEY_VIEWS}/export",
    summary="A key's raw usage rows of a range as CSV, streamed (default: 24h)",
    response_class=CsvResponse,
    responses={**JSON_ERRORS, 200: {"content": {"text/csv": {"schema": {"type": "string"}}}}},
)
def key_export(
    key_id: str,
    caller: CallerDep,
    session: SessionDep,
    ctx: ContextDep,
    start: From = None,
    to: To = None,
    tag: TagFilter = None,
    end_user: EndUserFilter = None,
) -> CsvResponse:
    ident, begin, end = service.export_range(session, caller, key_id, start, to)
    filters = UsageFilters(key_id=ident, tag=service.parse_tag(tag), end_user=end_user)
    name = f"usage-{ident}-{begin:%Y%m%dT%H%M%SZ}-{end:%Y%m%dT%H%M%SZ}.csv"
    return CsvResponse(
        service.export_csv(ctx.sessions, filters, begin, end),
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
