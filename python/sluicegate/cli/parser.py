"""The `sluicegate` parser: every command's options, and what runs each (`run` in its defaults)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sluicegate.cli import (
    completion,
    drill_watch,
    drills,
    fleet,
    keys,
    pools,
    providers,
    routes,
    status,
    tenants,
    usage,
)
from sluicegate.cli.native import NATIVE_COMMANDS
from sluicegate.cli.options import connection_options
from sluicegate.cli.version import version_text

ADMIN_GROUPS = (tenants, keys, providers, pools, routes, drills, usage)


def cmd_serve(args: argparse.Namespace) -> int:
    from control.process.serve import run

    return run(args.config)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluicegate",
        description="A multi-tenant LLM API gateway: one key and one base URL in front of many "
        "model servers, with bounded queues, retries, fallback and honest latency figures.",
    )
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in NATIVE_COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    serve = sub.add_parser("serve", help="run the gateway: data plane and admin API in one process")
    serve.add_argument(
        "--config",
        type=Path,
        help="TOML or YAML settings (see control/sluicegate.example.toml); "
        "SLUICEGATE_* environment variables override it",
    )
    serve.set_defaults(run=cmd_serve)
    conn = connection_options()
    for group in ADMIN_GROUPS:
        group.register(sub, conn)
    drill_watch.register(sub, connection_options(with_json=False))
    status.register(sub, conn)
    fleet.register(sub, conn)
    completion.register(sub, build_parser)
    return parser
