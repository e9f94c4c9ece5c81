"""What the admin commands share: argument types, the connection and output options, and how a
command's options become a request's body and query."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any, NamedTuple

from control.limits import LIMITS
from control.tenants.schemas import TenantUpdate
from sluicegate.cli.admin import run_admin
from sluicegate.cli.client import DEFAULT_ADMIN_URL

# Default of options that are sent only when given (None is a value: it clears a limit).
UNSET: Any = object()


class Request(NamedTuple):
    """What a command asks of the admin API."""

    method: str
    path: str
    body: dict[str, Any] | None
    query: dict[str, Any]


Handler = Callable[[argparse.Namespace], Request]
# Turns an answer into text for a person (the `--json` option prints the answer as it is).
Render = Callable[[Any], str]


# --- argument types ------------------------------------------------------------------------------


def optional_int(text: str) -> int | None:
    """An integer, or `none` to clear a limit."""
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'none', got {text!r}") from None


def word_list(text: str) -> list[str]:
    """Comma-separated words (an empty string is an empty list)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def model_list(text: str) -> list[str] | None:
    """Comma-separated aliases; `all` (every route) clears the allowlist."""
    return None if text.lower() == "all" else word_list(text)


def header_pair(text: str) -> tuple[str, str]:
    """`NAME=VALUE` (the value may be empty)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value


def duration(text: str) -> int:
    """Whole seconds: `90`, `60s`, `5m`, `1h`."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    if not number.isdigit() or int(number) == 0:
        raise argparse.ArgumentTypeError(f"expected a duration like 60s, 5m or 1h, got {text!r}")
    return int(number) * units[unit]


# --- options every admin command has -------------------------------------------------------------


def connection_options(with_json: bool = True) -> Any:
    """The parent parser of commands that talk to the admin API; `--json` prints the API's
    answer as it came, for scripts."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--admin-url",
        default=os.environ.get("SLUICEGATE_ADMIN_URL", DEFAULT_ADMIN_URL),
        help="admin API base URL (default: env SLUICEGATE_ADMIN_URL or %(default)s)",
    )
    parent.add_argument(
        "--token",
        default=None,
        help="admin token (default: env SLUICEGATE_ADMIN_TOKEN; prefer the environment)",
    )
    if with_json:
        parent.add_argument("--json", action="store_true", help="print the API's JSON answer")
    return parent


def command(
    group: Any,
    name: str,
    handler: Handler,
    parent: argparse.ArgumentParser,
    help_text: str,
    render: Render,
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = group.add_parser(name, parents=[parent], help=help_text)
    p.set_defaults(handler=handler, render=render, run=run_admin)
    return p


def page_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, help="page size (at most 500)")
    p.add_argument("--cursor", help="next_cursor of the previous page")


def limit_options(p: argparse.ArgumentParser) -> None:
    """The rate and concurrency limits of tenants and keys: the names of `control.limits`, the
    descriptions of the API's schema."""
    for name in LIMITS:
        described = TenantUpdate.model_fields[name].description
        p.add_argument(
            f"--{name.replace('_', '-')}",
            type=optional_int,
            default=UNSET,
            metavar="N",
            help=f"{described} ('none' clears)",
        )


# --- request building ----------------------------------------------------------------------------


def given(body: dict[str, Any], args: argparse.Namespace, *names: str) -> None:
    """Copy the options given (not left UNSET) into `body`."""
    for name in names:
        value = getattr(args, name, UNSET)
        if value is not UNSET:
            body[name] = value


def query(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The query parameters given (None and UNSET are left out)."""
    out = {}
    for name in names:
        value = getattr(args, name, None)
        if value is not None and value is not UNSET:
            out[name] = value
    return out
