"""`sluicegate routes ...`: model aliases and the chain of pools that serves each."""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from sluicegate.cli.options import UNSET, Request, command, given, optional_int, page_options, query
from sluicegate.cli.output import Column, render_object, render_page

SLO_HELP = "objective for the P95 of time to first token, read by `sluicegate doctor`"

COLUMNS: list[Column] = [
    ("ALIAS", "alias"),
    ("CHAIN", lambda r: " -> ".join(f"{t['pool']}:{t['model']}" for t in r["chain"])),
    ("MAX OUTPUT", "max_output_tokens"),
    ("SLO TTFT P95 MS", "slo_ttft_p95_ms"),
]


def target_spec(text: str) -> dict[str, str]:
    """POOL:MODEL (the model may itself contain ':')."""
    pool, sep, model = text.partition(":")
    if not sep or not pool or not model:
        raise argparse.ArgumentTypeError("expected POOL:MODEL")
    return {"pool": pool, "model": model}


def create(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {"alias": a.alias, "chain": a.target}
    given(body, a, "max_output_tokens", "slo_ttft_p95_ms")
    return Request("POST", "/v1/admin/routes", body, {})


def update(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {}
    if a.target is not None:
        body["chain"] = a.target
    given(body, a, "max_output_tokens", "slo_ttft_p95_ms")
    return Request("PATCH", f"/v1/admin/routes/{a.alias}", body, {})


def list_(a: argparse.Namespace) -> Request:
    return Request("GET", "/v1/admin/routes", None, query(a, "pool", "limit", "cursor"))


def show(a: argparse.Namespace) -> Request:
    return Request("GET", f"/v1/admin/routes/{a.alias}", None, {})


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
    group = sub.add_parser("routes", help="create, update, list and show routes")
    ro = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(ro, "create", create, conn, "route a model alias to pools", render_object)
    p.add_argument("--alias", required=True, help="the model name clients ask for")
    p.add_argument(
        "--target",
        type=target_spec,
        action="append",
        required=True,
        metavar="POOL:MODEL",
        help="repeat for fallbacks, in order",
    )
    p.add_argument("--max-output-tokens", type=int, default=UNSET)
    p.add_argument("--slo-ttft-p95-ms", type=int, default=UNSET, help=SLO_HELP)
    p = command(ro, "update", update, conn, "change a route's chain, limits or SLO", render_object)
    p.add_argument("alias")
    p.add_argument(
        "--target",
        type=target_spec,
        action="append",
        metavar="POOL:MODEL",
        help="repeat for fallbacks, in order; replaces the whole chain",
    )
    p.add_argument("--max-output-tokens", type=optional_int, default=UNSET, help="'none' clears")
    p.add_argument(
        "--slo-ttft-p95-ms", type=optional_int, default=UNSET, help=SLO_HELP + "; 'none' clears"
    )
    p = command(ro, "list", list_, conn, "list routes", partial(render_page, columns=COLUMNS))
    p.add_argument("--pool")
    page_options(p)
    command(ro, "show", show, conn, "show a route", render_object).add_argument("alias")
