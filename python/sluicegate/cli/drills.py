"""`sluicegate drills ...`: drills listed, shown and ended (`sluicegate drill` starts and watches
one: `drill_watch.py`)."""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from sluicegate.cli.options import Request, command, page_options, query
from sluicegate.cli.output import Column, render_object, render_page

COLUMNS: list[Column] = [
    ("ID", "id"),
    ("STATE", "state"),
    ("ROUTE", "route"),
    ("POOL", "pool"),
    ("MEMBER", lambda d: d["member"] or "(whole pool)"),
    ("STARTED", "started_at"),
    ("ENDS", "ends_at"),
    ("ENDED BY", "ended_by"),
    ("REASON", "reason"),
]


def list_(a: argparse.Namespace) -> Request:
    found = query(a, "pool", "limit", "cursor")
    if a.active:
        found["active"] = "true"
    return Request("GET", "/v1/admin/drills", None, found)


def show(a: argparse.Namespace) -> Request:
    return Request("GET", f"/v1/admin/drills/{a.id}", None, {})


def end(a: argparse.Namespace) -> Request:
    return Request("DELETE", f"/v1/admin/drills/{a.id}", None, {})


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
    group = sub.add_parser("drills", help="list drills, end one (see also `sluicegate drill`)")
    dr = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    listed = partial(render_page, columns=COLUMNS)
    p = command(dr, "list", list_, conn, "list drills, newest first", listed)
    p.add_argument("--pool")
    p.add_argument("--active", action="store_true", help="only drills still running")
    page_options(p)
    command(dr, "show", show, conn, "show a drill", render_object).add_argument("id")
    command(dr, "end", end, conn, "end a drill now", render_object).add_argument("id")
