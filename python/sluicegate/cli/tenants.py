"""`sluicegate tenants ...`: tenants, their limits and quotas, and tenant-scoped admin tokens."""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from control.limits import LIMITS
from sluicegate.cli.options import (
    UNSET,
    Request,
    command,
    given,
    limit_options,
    model_list,
    optional_int,
    page_options,
    query,
)
from sluicegate.cli.output import Column, render_object, render_page, render_secret
from sluicegate.cli.quotas import quota_body, quota_options, render_quota

COLUMNS: list[Column] = [
    ("ID", "id"),
    ("NAME", "name"),
    ("STATUS", "status"),
    *[(name.upper().replace("_", " "), name) for name in LIMITS],
    ("QUOTA", lambda t: t["quota"] and t["quota"]["period"]),
]


def create(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {"name": a.name}
    given(body, a, "id", "models", "max_keys", *LIMITS)
    quota_body(body, a)
    return Request("POST", "/v1/admin/tenants", body, {})


def list_(a: argparse.Namespace) -> Request:
    return Request("GET", "/v1/admin/tenants", None, query(a, "status", "limit", "cursor"))


def show(a: argparse.Namespace) -> Request:
    return Request("GET", f"/v1/admin/tenants/{a.id}", None, {})


def update(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {}
    given(body, a, "name", "models", "max_keys", *LIMITS)
    quota_body(body, a)
    return Request("PATCH", f"/v1/admin/tenants/{a.id}", body, {})


def disable(a: argparse.Namespace) -> Request:
    return Request("PATCH", f"/v1/admin/tenants/{a.id}", {"status": "disabled"}, {})


def enable(a: argparse.Namespace) -> Request:
    return Request("PATCH", f"/v1/admin/tenants/{a.id}", {"status": "active"}, {})


def token(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {"name": a.name}
    given(body, a, "expires_at")
    return Request("POST", f"/v1/admin/tenants/{a.id}/tokens", body, {})


def _bounds(p: argparse.ArgumentParser) -> None:
    """What every key of the tenant stays within: the models it may use, how many keys."""
    p.add_argument(
        "--models", type=model_list, default=UNSET, help="comma-separated aliases, or 'all'"
    )
    p.add_argument("--max-keys", type=optional_int, default=UNSET, metavar="N", help="keys at most")


def quota(a: argparse.Namespace) -> Request:
    return Request("GET", f"/v1/admin/tenants/{a.id}/quota", None, {})


def quota_reset(a: argparse.Namespace) -> Request:
    return Request("POST", f"/v1/admin/tenants/{a.id}/quota/reset", None, {})


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
    group = sub.add_parser(
        "tenants", help="create, list, show, update, disable tenants; their quotas"
    )
    t = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(t, "create", create, conn, "create a tenant", render_object)
    p.add_argument("--id", default=UNSET, help="chosen id (generated if absent)")
    p.add_argument("--name", required=True)
    _bounds(p)
    limit_options(p)
    quota_options(p, update=False)
    p = command(t, "list", list_, conn, "list tenants", partial(render_page, columns=COLUMNS))
    p.add_argument("--status", choices=["active", "disabled"])
    page_options(p)
    command(t, "show", show, conn, "show a tenant", render_object).add_argument("id")
    p = command(t, "update", update, conn, "change a tenant's name, limits or quota", render_object)
    p.add_argument("id")
    p.add_argument("--name", default=UNSET)
    _bounds(p)
    limit_options(p)
    quota_options(p, update=True)
    p = command(t, "disable", disable, conn, "disable a tenant and its keys", render_object)
    p.add_argument("id")
    command(t, "enable", enable, conn, "enable a tenant again", render_object).add_argument("id")
    tokens = partial(render_secret, "admin token", field="token")
    p = command(
        t, "token", token, conn, "create a tenant-scoped admin token (printed once)", tokens
    )
    p.add_argument("id")
    p.add_argument("--name", required=True)
    p.add_argument("--expires-at", default=UNSET, help="ISO 8601 time after which it is refused")
    p = command(
        t, "quota", quota, conn, "show a tenant's quota and its use this period", render_quota
    )
    p.add_argument("id")
    p = command(
        t, "quota-reset", quota_reset, conn, "count a tenant's quota again from now", render_quota
    )
    p.add_argument("id")
