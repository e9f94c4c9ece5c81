"""A key's page: its settings and actions, and its usage over a chosen range: requests, tokens in
and out, cost and errors per minute, hour or day (rollups, through
`GET /v1/admin/keys/{id}/usage/series`), totals per model over the same aligned range
(`.../usage/models`), quota used and remaining (`.../quota`), TTFT/TPOT percentiles
(`.../usage/latency`, raw rows: loaded after the page, so the page waits on rollups only), and
the CSV export (`.../usage/export`, relayed as it streams)."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query
from starlette.responses import Response, StreamingResponse

from control.console import forms
from control.console.api import ApiError
from control.console.pages.keys import key_body
from control.console.render import SECURITY_HEADERS
from control.console.web import ConsoleDep

router = APIRouter()

From = Annotated[str | None, Query(alias="from")]

# Preset ranges and the granularity each is shown at unless another is asked for.
RANGES = {
    "1h": ("minute", 3600),
    "24h": ("hour", 86400),
    "7d": ("hour", 7 * 86400),
    "30d": ("day", 30 * 86400),
}
GRANULARITIES = {"minute": 60, "hour": 3600, "day": 86400}
TABLE_ROWS = 500


def usage_range(
    preset: str | None, start: str | None, end: str | None, granularity: str | None
) -> dict[str, Any]:
    """What the usage part shows: a preset (default 24h) or an explicit from/to."""
    custom = bool(start or end)
    preset = None if custom else (preset if preset in RANGES else "24h")
    default_granularity, span = RANGES[preset or "24h"]
    if granularity not in GRANULARITIES:
        granularity = default_granularity
    query: dict[str, Any] = {"granularity": granularity}
    if custom:
        query["from"] = forms.moment({"from": start or ""}, "from")
        query["to"] = forms.moment({"to": end or ""}, "to")
    else:
        now = datetime.now(UTC)
        query["from"] = (now - timedelta(seconds=span)).isoformat()
    return {"preset": preset, "query": query, "granularity": granularity}


def chart_data(series: dict[str, Any]) -> dict[str, Any]:
    """The series as the chart script reads it: one row per bucket with requests."""
    return {
        "start": series["start"],
        "end": series["end"],
        "step": GRANULARITIES[series["granularity"]],
        "columns": ["requests", "errors", "prompt_tokens", "completion_tokens", "cost_micros"],
        "rows": [
            [
                b["start"],
                b["requests"],
                b["errors"],
                b["prompt_tokens"],
                b["completion_tokens"],
                b["cost_micros"],
            ]
            for b in series["buckets"]
        ],
    }


def series_totals(series: dict[str, Any]) -> dict[str, int]:
    names = (
        "requests",
        "errors",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "cost_micros",
    )
    return {n: sum(int(b[n]) for b in series["buckets"]) for n in names}


async def detail_context(
    console: ConsoleDep, key: dict[str, Any], params: dict[str, str | None]
) -> dict[str, Any]:
    api = console.api
    key_id = key["id"]
    shown = usage_range(
        params.get("range"), params.get("from"), params.get("to"), params.get("granularity")
    )
    range_error = None
    try:
        series = await api.get(f"/v1/admin/keys/{key_id}/usage/series", **shown["query"])
    except ApiError as refused:
        if refused.status != 422:
            raise
        range_error = refused.message
        shown = usage_range("24h", None, None, None)
        series = await api.get(f"/v1/admin/keys/{key_id}/usage/series", **shown["query"])
    aligned = {"from": series["start"], "to": series["end"]}
    calls = [api.get(f"/v1/admin/keys/{key_id}/usage/models", **aligned)]
    if key.get("quota") is not None:
        calls.append(api.get(f"/v1/admin/keys/{key_id}/quota"))
    models, *rest = await api.gather(*calls)
    buckets = [b for b in series["buckets"]]
    return {
        "key": key,
        "series": series,
        "chart": chart_data(series),
        "table": buckets[-TABLE_ROWS:],
        "table_cut": max(0, len(buckets) - TABLE_ROWS),
        "totals": series_totals(series),
        "models": models,
        "quota": rest[0] if rest else None,
        "shown": shown,
        "aligned": aligned,
        "ranges": list(RANGES),
        "granularities": list(GRANULARITIES),
        "range_error": range_error,
        "nonce": secrets.token_urlsafe(16),
    }


@router.get("/console/keys/{key_id}")
async def key_page(
    console: ConsoleDep,
    key_id: str,
    range: str | None = None,
    granularity: str | None = None,
    start: From = None,
    to: str | None = None,
    notice: str | None = None,
) -> Response:
    key = await console.api.get(f"/v1/admin/keys/{key_id}")
    params = {"range": range, "granularity": granularity, "from": start, "to": to}
    try:
        context = await detail_context(console, key, params)
    except forms.FormError as bad:
        context = await detail_context(console, key, {})
        context["range_error"] = bad.message
    return console.page("key.html", notice=notice, **context)


@router.get("/console/keys/{key_id}/latency")
async def key_latency(
    console: ConsoleDep, key_id: str, start: From = None, to: str | None = None
) -> Response:
    """TTFT/TPOT percentiles of the range: raw rows, so a fragment of its own."""
    error = None
    latency = None
    try:
        latency = await console.api.get(
            f"/v1/admin/keys/{key_id}/usage/latency", **{"from": start, "to": to}
        )
    except ApiError as refused:
        if refused.status != 422:
            raise
        error = refused.message
    return console.page("key_latency.html", latency=latency, error=error)


@router.get("/console/keys/{key_id}/usage.csv")
async def key_export(
    console: ConsoleDep, key_id: str, start: From = None, to: str | None = None
) -> Response:
    streamed = await console.api.stream(
        f"/v1/admin/keys/{key_id}/usage/export", {"from": start, "to": to}
    )
    headers = {
        **SECURITY_HEADERS,
        "Content-Disposition": streamed.headers.get("content-disposition", "attachment"),
    }
    return StreamingResponse(streamed.body, media_type="text/csv", headers=headers)


@router.post("/console/keys/{key_id}/edit")
async def edit_key(console: ConsoleDep, key_id: str) -> Response:
    form = await console.form()
    current = await console.api.get(f"/v1/admin/keys/{key_id}")
    try:
        body = forms.changes(key_body(form), current)
        if body:
            await console.api.call("PATCH", f"/v1/admin/keys/{key_id}", body=body)
    except ApiError as refused:
        if refused.status not in (403, 409, 422) or refused.code == "forbidden":
            raise
        context = await detail_context(console, current, {})
        return console.page(
            "key.html", http_status=refused.status, form=form, form_error=refused, **context
        )
    return console.redirect(f"/console/keys/{key_id}?notice=saved")
