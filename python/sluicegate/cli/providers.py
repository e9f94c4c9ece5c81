"""`sluicegate providers ...`: upstream providers. Credentials are never taken on the command
line (where `ps` and shell history would keep them): they come from a variable or stdin."""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from typing import Any

from sluicegate.cli.client import CliError
from sluicegate.cli.options import UNSET, Request, command, given, page_options, query
from sluicegate.cli.output import Column, render_object, render_page

KINDS = ["openai", "anthropic"]

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


def create(a: argparse.Namespace) -> Request:
    body: dict[str, Any] = {"kind": a.kind, "base_url": a.base_url, "internal": a.internal}
    given(body, a, "id", "name")
    credential = _credential(a)
    if credential is not None:
        body["credential"] = credential
    return Request("POST", "/v1/admin/providers", body, {})


def list_(a: argparse.Namespace) -> Request:
    return Request("GET", "/v1/admin/providers", None, query(a, "kind", "limit", "cursor"))


def show(a: argparse.Namespace) -> Request:
    return Request("GET", f"/v1/admin/providers/{a.id}", None, {})


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
    group = sub.add_parser("providers", help="register and list upstream providers")
    pr = group.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(pr, "create", create, conn, "register an upstream provider", render_object)
    p.add_argument("--id", default=UNSET)
    p.add_argument("--name", default=UNSET)
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--base-url", required=True, help="with the version segment, e.g. .../v1")
    p.add_argument("--internal", action="store_true", help="allow internal addresses")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--credential-env", metavar="VAR", help="read the credential from $VAR")
    source.add_argument(
        "--credential-stdin", action="store_true", help="read the credential from stdin"
    )
    p = command(pr, "list", list_, conn, "list providers", partial(render_page, columns=COLUMNS))
    p.add_argument("--kind", choices=KINDS)
    page_options(p)
    command(pr, "show", show, conn, "show a provider", render_object).add_argument("id")
