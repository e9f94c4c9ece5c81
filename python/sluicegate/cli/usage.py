"""`sluicegate usage ...`: a key's usage (series, totals per model, latency percentiles, the raw
rows as CSV), the raw rows of all keys, and totals per tag value, end user, model or key."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from functools import partial
from typing import Any

from control.usage.events import OUTCOMES
from sluicegate.cli.options import Request, command, page_options, query
from sluicegate.cli.output import Column, render_page, table

FROM_HELP = "start of the range (ISO 8601, inclusive; UTC without an offset)"
TO_HELP = "end of the range (ISO 8601, exclusive; default now)"
TOTALS = (
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cost_micros",
    "errors",
)
PERCENTILES = ("p50", "p95", "p99")
TOTALS_HEADER = ["REQUESTS", "PROMPT", "COMPLETION", "CACHED", "COST MICROS", "ERRORS"]

COLUMNS: list[Column] = [
    ("STARTED", "started_at"),
    ("REQUEST", "request_id"),
    ("KEY", "key_id"),
    ("MODEL", "model"),
    ("UPSTREAM", lambda r: r["upstream"] and f"{r['pool']}/{r['upstream']}"),
    ("STATUS", "status"),
    ("OUTCOME", "outcome"),
    ("PROMPT", "prompt_tokens"),
    ("COMPLETION", "completion_tokens"),
    ("COST MICROS", "cost_micros"),
    ("TTFT MS", "ttft_ms"),
    ("DURATION MS", "duration_ms"),
]


def _range(answer: Mapping[str, Any]) -> str:
    return f"key {answer['key_id']}, {answer['start']} to {answer['end']}"


def _totals(row: Mapping[str, Any]) -> list[str]:
    return [str(row[name]) for name in TOTALS]


def render_series(answer: Mapping[str, Any]) -> str:
    model = f", model {answer['model']}" if answer["model"] else ""
    lines = [f"{_range(answer)}, per {answer['granularity']}{model}"]
    rows = [[b["start"], *_totals(b)] for b in answer["buckets"]]
    lines += table(["START", *TOTALS_HEADER], rows, numeric=True) if rows else ["(no requests)"]
    return "\n".join(lines) + "\n"


def render_models(answer: Mapping[str, Any]) -> str:
    rows = [[m["model"], *_totals(m)] for m in answer["models"]]
    rows.append(["(total)", *_totals(answer["total"])])
    return "\n".join([_range(answer), *table(["MODEL", *TOTALS_HEADER], rows, numeric=True)]) + "\n"


def render_latency(answer: Mapping[str, Any]) -> str:
    def cells(q: Mapping[str, Any]) -> list[str]:
        return [str(q["count"]), *("-" if q[p] is None else f"{q[p]:.1f}" for p in PERCENTILES)]

    rows = [["TTFT", *cells(answer["ttft_ms"])], ["TPOT", *cells(answer["tpot_ms"])]]
    header = ["MS", "COUNT", "P50", "P95", "P99"]
    return "\n".join([_range(answer), *table(header, rows, numeric=True)]) + "\n"


def _key_view(view: str, a: argparse.Namespace, *names: str) -> Request:
    found = query(a, *names)
    if a.start is not None:
        found["from"] = a.start  # `from` is the API's name (a Python keyword here)
    return Request("GET", f"/v1/admin/keys/{a.key_id}/usage/{view}", None, found)


def series(a: argparse.Namespace) -> Request:
    return _key_view("series", a, "to", "granularity", "model")


def models(a: argparse.Namespace) -> Request:
    return _key_view("models", a, "to")


def latency(a: argparse.Namespace) -> Request:
    return _key_view("latency", a, "to")


def export(a: argparse.Namespace) -> Request:
    return _key_view("export", a, "to", "tag", "end_user")


def list_(a: argparse.Namespace) -> Request:
    names = ("tenant_id", "key_id", "model", "outcome", "since", "until", "tag", "end_user")
    return Request("GET", "/v1/admin/usage", None, query(a, *names, "limit", "cursor"))


def groups(a: argparse.Namespace) -> Request:
    found = query(a, "by", "tenant_id", "key_id", "model", "tag", "end_user", "to", "limit")
    if a.start is not None:
        found["from"] = a.start
    return Request("GET", "/v1/admin/usage/groups", None, found)


def render_groups(answer: Mapping[str, Any]) -> str:
    rows = [["(none)" if g["value"] is None else g["value"], *_totals(g)] for g in answer["groups"]]
    lines = [f"per {answer['by']}, {answer['start']} to {answer['end']}"]
    lines += table(["VALUE", *TOTALS_HEADER], rows, numeric=True) if rows else ["(no requests)"]
    if answer["truncated"]:
        lines.append("(more groups: raise --limit)")
    return "\n".join(lines) + "\n"


def _attribution(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tag", metavar="NAME=VALUE", help="only rows with this tag")
    p.add_argument("--end-user", help="only rows naming this end user")


def _key_range(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("key_id", metavar="KEY_ID", help="the key's id (not its secret)")
    p.add_argument(
        "--from", dest="start", metavar="TIME", help=f"{FROM_HELP}; default: {default} before --to"
    )
    p.add_argument("--to", metavar="TIME", help=TO_HELP)


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
    group = sub.add_parser(
        "usage",
        help="a key's usage: series, totals per model, latency, CSV export; raw rows",
        description="A key's usage views (series and totals from the rollups, kept for ever; "
        "latency percentiles and the export from the raw rows, kept usage.raw_retention_days) "
        "and the raw rows of all keys. Tenant tokens see their own keys only.",
    )
    us = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(us, "series", series, conn, "a key's usage per minute, hour or day", render_series)
    _key_range(p, "60 minutes, 24 hours or 30 days (by granularity)")
    p.add_argument(
        "--granularity", choices=["minute", "hour", "day"], help="bucket size (default: hour)"
    )
    p.add_argument("--model", help="only this model (the alias clients asked for)")
    p = command(us, "models", models, conn, "a key's usage totals per model", render_models)
    _key_range(p, "24 hours")
    p = command(us, "latency", latency, conn, "a key's TTFT and TPOT P50/P95/P99", render_latency)
    _key_range(p, "24 hours")
    p = command(us, "export", export, conn, "a key's raw usage rows as CSV", str)
    _key_range(p, "24 hours")
    _attribution(p)
    p.add_argument("-o", "--output", metavar="FILE", help="write the CSV to FILE (default: stdout)")
    p.set_defaults(download=True)
    listed = partial(render_page, columns=COLUMNS)
    p = command(us, "list", list_, conn, "list raw usage rows, newest first", listed)
    p.add_argument("--tenant-id", help="only this tenant's rows")
    p.add_argument("--key-id", help="only this key's rows")
    p.add_argument("--model", help="only this model (the alias clients asked for)")
    p.add_argument("--outcome", help="only rows that ended this way", choices=OUTCOMES)
    p.add_argument("--since", metavar="TIME", help="started at or after (ISO 8601)")
    p.add_argument("--until", metavar="TIME", help="started before (ISO 8601)")
    _attribution(p)
    page_options(p)
    p = command(
        us, "groups", groups, conn, "totals per tag value, end user, model or key", render_groups
    )
    p.add_argument("--by", required=True, help="tag:NAME, end_user, model or key_id")
    p.add_argument("--tenant-id", help="only this tenant's rows")
    p.add_argument("--key-id", help="only this key's rows")
    p.add_argument("--model", help="only this model")
    _attribution(p)
    p.add_argument("--from", dest="start", metavar="TIME", help=f"{FROM_HELP}; default: 24h ago")
    p.add_argument("--to", metavar="TIME", help=TO_HELP)
    p.add_argument("--limit", type=int, help="at most this many groups (default 100, max 1000)")
