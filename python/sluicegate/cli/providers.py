"""`sluicegate providers ...`: upstream providers. Credentials are never taken on the command
line (where `ps` and shell history would keep them): they come from a variable or stdin."""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from typing import Any

from control.providers.kinds import PROVIDER_KINDS
from sluicegate.cli.client import CliError
from sluicegate.cli.options import (
    UNSET,
    Request,
    command,
    given,
    header_pair,
    page_options,
    query,
)
from sluicegate.cli.output import Column, render_object, render_page

KINDS = list(PROVIDER_KINDS)

COLUMNS: list[Column] = [
    ("ID", "id"),
    ("NAME", "name"),
    ("KIND", "kind"),
    ("BASE URL", "base_url"),
    ("INTERNAL", "internal"),
    ("CREDENTIAL", "credential_mask"),
]


def _credential(args: argparse.Namespace) -> str | None:
    if args.credential_env is not None:
        value = os.environ.get(args.credential_env)
        if not value:
            raise CliError(f"environment variable {args.credential_env} is empty or not set", 2)
        return value
    if args.credential_stdin:
        value = sys.stdin.readline().strip()
        if not value:
            raise CliError("no credential on stdin", 2)
        return value
    return None


def _headers(body: dict[str, Any], a: argparse.Namespace) -> None:
    if a.no_headers:
        body["headers"] = {}
    elif a.header is not None:
        body["headers"] = dict(a.header)
    if a.no_forward_headers:
        body["forward_headers"] = []
    elif a.forward_header is not None:
        body["forward_headers"] = a.forward_header


def create(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {"kind": a.kind, "base_url": a.base_url, "internal": a.internal}
    given(body, a, "id", "name", "api_version", "auth_header")
    credential = _credential(a)
    if credential is not None:
        body["credential"] = credential
    _headers(body, a)
    return Request("POST", "/v1/admin/providers", body, {})


def update(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {}
    given(body, a, "name", "base_url", "api_version", "auth_header")
    if a.bearer:
        body["auth_header"] = None
    if a.internal is not None:
        body["internal"] = a.internal
    credential = _credential(a)
    if credential is not None:
        body["credential"] = credential
    _headers(body, a)
    return Request("PATCH", f"/v1/admin/providers/{a.id}", body, {})


def list_(a: argparse.Namespace) -> Request:
    return Request("GET", "/v1/admin/providers", None, query(a, "kind", "limit", "cursor"))


def show(a: argparse.Namespace) -> Request:
    return Request("GET", f"/v1/admin/providers/{a.id}", None, {})


def _credential_options(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group()
    source.add_argument("--credential-env", metavar="VAR", help="read the credential from $VAR")
    source.add_argument(
        "--credential-stdin", action="store_true", help="read the credential from stdin"
    )


def _header_options(p: argparse.ArgumentParser) -> None:
    sent = p.add_mutually_exclusive_group()
    sent.add_argument(
        "--header",
        type=header_pair,
        action="append",
        metavar="NAME=VALUE",
        help="a header sent to this upstream with every request (repeat; replaces the set)",
    )
    sent.add_argument("--no-headers", action="store_true", help="send no headers of our own")
    passed = p.add_mutually_exclusive_group()
    passed.add_argument(
        "--forward-header",
        action="append",
        metavar="NAME",
        help="a client header this upstream may receive beyond the allow-list (repeat)",
    )
    passed.add_argument(
        "--no-forward-headers", action="store_true", help="the allow-list alone applies"
    )


def _kind_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--api-version",
        default=UNSET,
        help="azure_openai (required there): the api-version query, e.g. 2024-10-21",
    )
    p.add_argument(
        "--auth-header",
        default=UNSET,
        metavar="NAME",
        help="openai: the header the credential goes in, as it is (default Authorization: Bearer)",
    )


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
    group = sub.add_parser("providers", help="register and list upstream providers")
    pr = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(pr, "create", create, conn, "register an upstream provider", render_object)
    p.add_argument("--id", default=UNSET)
    p.add_argument("--name", default=UNSET)
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--base-url", required=True, help="with the version segment, e.g. .../v1")
    p.add_argument("--internal", action="store_true", help="allow link-local addresses")
    _kind_options(p)
    _credential_options(p)
    _header_options(p)
    p = command(pr, "update", update, conn, "change a provider", render_object)
    p.add_argument("id")
    p.add_argument("--name", default=UNSET)
    p.add_argument("--base-url", default=UNSET)
    p.add_argument(
        "--internal", action=argparse.BooleanOptionalAction, help="allow link-local addresses"
    )
    _kind_options(p)
    p.add_argument(
        "--bearer", action="store_true", help="send the credential as Authorization: Bearer again"
    )
    _credential_options(p)
    _header_options(p)
    p = command(pr, "list", list_, conn, "list providers", partial(render_page, columns=COLUMNS))
    p.add_argument("--kind", choices=KINDS)
    page_options(p)
    command(pr, "show", show, conn, "show a provider", render_object).add_argument("id")
