"""`sluicegate keys ...`: tenant API keys (the secret printed once, at creation and rotation),
their settings and quotas."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
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
    page_options,
    query,
)
from sluicegate.cli.output import Column, render_object, render_page, render_secret
from sluicegate.cli.quotas import quota_body, quota_options, render_quota

SETTINGS = ("name", "models", "priority", "expires_at", *LIMITS)

COLUMNS: list[Column] = [
    ("ID", "id"),
    ("TENANT", "tenant_id"),
    ("NAME", "name"),
    ("PREFIX", "prefix"),
    ("STATUS", "status"),
    ("PRIORITY", "priority"),
    ("MODELS", lambda k: "(every route)" if k["models"] is None else k["models"]),
    ("EXPIRES", "expires_at"),
]


def _readable(key: Mapping[str, Any]) -> dict[str, Any]:
    """A key as a person reads it: no allowlist means every route, not none."""
    return {**key, "models": "(every route)" if key["models"] is None else key["models"]}


def render_key(key: Mapping[str, Any]) -> str:
    return render_object(_readable(key))


def render_created(key: Mapping[str, Any]) -> str:
    return render_secret("key", _readable(key), "key")


def render_rotated(answer: Mapping[str, Any]) -> str:
    previous = answer["previous"]
    ends = previous["expires_at"] or "now"
    return (
        render_secret("new key", _readable(answer["key"]), "key")
        + f"\nprevious key {previous['id']} ({previous['prefix']}...): {previous['status']}, "
        f"works until {ends}\n"
    )


def create(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {"tenant_id": a.tenant}
    given(body, a, *SETTINGS)
    quota_body(body, a)
    return Request("POST", "/v1/admin/keys", body, {})


def list_(a: argparse.Namespace) -> Request:
    found = query(a, "prefix", "status", "expires_before", "expires_after", "limit", "cursor")
    if a.tenant is not None:
        found["tenant_id"] = a.tenant
    return Request("GET", "/v1/admin/keys", None, found)


def show(a: argparse.Namespace) -> Request:
    return Request("GET", f"/v1/admin/keys/{a.id}", None, {})


def update(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {}
    given(body, a, "status", *SETTINGS)
    quota_body(body, a)
    return Request("PATCH", f"/v1/admin/keys/{a.id}", body, {})


def rotate(a: argparse.Namespace) -> Request:
    return Request("POST", f"/v1/admin/keys/{a.id}/rotate", {"overlap_seconds": a.overlap}, {})


def revoke(a: argparse.Namespace) -> Request:
    return Request("POST", f"/v1/admin/keys/{a.id}/revoke", None, {})


def quota(a: argparse.Namespace) -> Request:
    return Request("GET", f"/v1/admin/keys/{a.id}/quota", None, {})


def quota_reset(a: argparse.Namespace) -> Request:
    return Request("POST", f"/v1/admin/keys/{a.id}/quota/reset", None, {})


def _settings(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default=UNSET)
    p.add_argument(
        "--models", type=model_list, default=UNSET, help="comma-separated aliases, or 'all'"
    )
    p.add_argument("--priority", choices=["interactive", "batch"], default=UNSET)
    p.add_argument("--expires-at", default=UNSET, help="ISO 8601 time (UTC without an offset)")
    limit_options(p)


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
    group = sub.add_parser(
        "keys", help="create, list, show, update, rotate, revoke keys; their quotas"
    )
    k = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(k, "create", create, conn, "create a key (printed once)", render_created)
    p.add_argument("--tenant", required=True)
    _settings(p)
    quota_options(p, update=False)
    p = command(
        k, "list", list_, conn, "list and search keys", partial(render_page, columns=COLUMNS)
    )
    p.add_argument("--tenant")
    p.add_argument("--prefix", help="start of the public prefix (sk-sg-...)")
    p.add_argument("--status", choices=["active", "disabled", "expired", "revoked"])
    p.add_argument("--expires-before")
    p.add_argument("--expires-after")
    page_options(p)
    command(k, "show", show, conn, "show a key", render_key).add_argument("id")
    p = command(k, "update", update, conn, "change a key's settings", render_key)
    p.add_argument("id")
    p.add_argument("--status", choices=["active", "disabled"], default=UNSET)
    _settings(p)
    quota_options(p, update=True)
    p = command(k, "rotate", rotate, conn, "issue a new secret (printed once)", render_rotated)
    p.add_argument("id")
    p.add_argument(
        "--overlap", type=int, default=0, help="seconds the old key keeps working (default 0)"
    )
    command(k, "revoke", revoke, conn, "revoke a key", render_key).add_argument("id")
    p = command(k, "quota", quota, conn, "show a key's quota and its use this period", render_quota)
    p.add_argument("id")
    p = command(
        k, "quota-reset", quota_reset, conn, "count a key's quota again from now", render_quota
    )
    p.add_argument("id")
