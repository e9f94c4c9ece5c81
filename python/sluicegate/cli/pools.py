"""`sluicegate pools ...`: pools of upstream members, their timeouts and policies."""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from sluicegate.cli.options import UNSET, Request, command, given, page_options, query
from sluicegate.cli.output import Column, render_object, render_page
from sluicegate.cli.pool_options import add_pool_options, pool_settings

COLUMNS: list[Column] = [
    ("ID", "id"),
    ("NAME", "name"),
    ("MEMBERS", lambda p: [f"{m['id']}:{m['weight']}" for m in p["members"]]),
    ("MAX INFLIGHT", lambda p: p["admission"]["max_inflight"]),
    ("HEALTH CHECK", lambda p: p["health_check"] and p["health_check"]["path"]),
]
MEMBER = "PROVIDER[:WEIGHT[:MAX_CONCURRENCY]]"


def member_spec(text: str) -> dict[str, Any]:
    """PROVIDER[:WEIGHT[:MAX_CONCURRENCY]]."""
    parts = text.split(":")
    if not parts[0] or len(parts) > 3:
        raise argparse.ArgumentTypeError(f"expected {MEMBER}")
    member: dict[str, Any] = {"provider_id": parts[0]}
    try:
        if len(parts) > 1 and parts[1]:
            member["weight"] = int(parts[1])
        if len(parts) > 2 and parts[2]:
            member["max_concurrency"] = int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError("weight and max concurrency must be integers") from None
    return member


def create(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {"members": a.member}
    given(body, a, "id", "name")
    pool_settings(body, a)
    return Request("POST", "/v1/admin/pools", body, {})


def update(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {}
    given(body, a, "name")
    if a.member is not None:
        body["members"] = a.member
    pool_settings(body, a)
    return Request("PATCH", f"/v1/admin/pools/{a.id}", body, {})


def list_(a: argparse.Namespace) -> Request:
    return Request("GET", "/v1/admin/pools", None, query(a, "limit", "cursor"))


def show(a: argparse.Namespace) -> Request:
    return Request("GET", f"/v1/admin/pools/{a.id}", None, {})


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
    group = sub.add_parser("pools", help="create, update, list and show pools")
    po = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(po, "create", create, conn, "create a pool", render_object)
    p.add_argument("--id", default=UNSET)
    p.add_argument("--name", default=UNSET)
    p.add_argument(
        "--member",
        type=member_spec,
        action="append",
        required=True,
        metavar=MEMBER,
        help="repeat for each member",
    )
    add_pool_options(p, update=False)
    p = command(
        po, "update", update, conn, "change a pool's members, timeouts, policies", render_object
    )
    p.add_argument("id")
    p.add_argument("--name", default=UNSET)
    p.add_argument(
        "--member",
        type=member_spec,
        action="append",
        metavar=MEMBER,
        help="repeat for each member; replaces the whole list",
    )
    add_pool_options(p, update=True)
    p = command(po, "list", list_, conn, "list pools", partial(render_page, columns=COLUMNS))
    page_options(p)
    command(po, "show", show, conn, "show a pool", render_object).add_argument("id")
