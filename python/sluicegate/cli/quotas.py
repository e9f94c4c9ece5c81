"""Quotas, which tenants and keys both have: the `--quota-*` options, the `quota` object of a
request, and a quota's use as a person reads it."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from sluicegate.cli.client import CliError
from sluicegate.cli.options import UNSET, given
from sluicegate.cli.output import render_object


def quota_options(p: argparse.ArgumentParser, update: bool) -> None:
    replaces = "; the quota is sent whole and replaces the one in force" if update else ""
    p.add_argument(
        "--quota-period",
        choices=["none", "daily", "monthly"],
        default=UNSET,
        help="required with a quota: daily resets at 00:00 UTC, monthly on the first; none: one "
        "allowance counted from when it was set" + replaces,
    )
    p.add_argument(
        "--quota-tokens",
        type=int,
        default=UNSET,
        metavar="N",
        help="prompt plus completion tokens per period",
    )
    p.add_argument(
        "--quota-cost-micros",
        type=int,
        default=UNSET,
        metavar="N",
        help="cost per period, in micro-units of the prices' currency",
    )
    if update:
        p.add_argument("--no-quota", action="store_true", help="remove the quota")


def quota_body(body: dict[str, Any], args: argparse.Namespace) -> None:
    """`quota` as the API takes it: an object of the parts given (sent whole: it replaces the
    quota in force), or null with `--no-quota`."""
    quota: dict[str, Any] = {}
    given(quota, args, "quota_period", "quota_tokens", "quota_cost_micros")
    if getattr(args, "no_quota", False):
        if quota:
            raise CliError("--no-quota cannot go with --quota-* options", code=2)
        body["quota"] = None
    elif quota:
        body["quota"] = {name.removeprefix("quota_"): value for name, value in quota.items()}


def render_quota(status: Mapping[str, Any]) -> str:
    """A quota and its use this period."""
    lines = []
    for unit, limit in (("tokens", "tokens"), ("cost micros", "cost_micros")):
        if status.get(limit) is not None:
            used, left = status[f"used_{limit}"], status[f"remaining_{limit}"]
            lines.append(f"{unit}: {used} used of {status[limit]} ({left} left)")
    head = "\n".join(lines) + "\n\n" if lines else ""
    return head + render_object(status)
