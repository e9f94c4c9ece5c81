"""`sluicegate status` and `sluicegate doctor`: the admin API's windowed status and diagnosis,
as tables (`tables.py`) or, with `--json`, as the API gave them."""

from __future__ import annotations

import argparse
from typing import Any

from sluicegate.cli.client import AdminClient, run
from sluicegate.cli.options import duration
from sluicegate.cli.output import as_json, write
from sluicegate.cli.tables import render_diagnosis, render_status


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "status",
        parents=[conn],
        help="per pool and route over 1 min, 5 min and 1 h: rates, P50/P95/P99, limits, members",
    )
    p.set_defaults(run=run_status)
    p = sub.add_parser(
        "doctor",
        parents=[conn],
        help="per pool: queueing, upstream compute, a bottleneck outside compute, a backlog, "
        "or healthy, with the numbers behind it",
    )
    p.add_argument(
        "--recent",
        type=duration,
        metavar="DURATION",
        help="the recent window (default: the server's [doctor] recent_seconds), e.g. 60s",
    )
    p.add_argument(
        "--baseline",
        type=duration,
        metavar="DURATION",
        help="the window before it (default: [doctor] baseline_seconds), e.g. 5m",
    )
    p.add_argument("--verbose", action="store_true", help="the checks of every rule")
    p.set_defaults(run=run_status)


def run_status(args: argparse.Namespace) -> int:
    def show(api: AdminClient) -> int:
        if args.command == "status":
            answer = api.call("GET", "/v1/admin/status")
            text = render_status(answer)
        else:
            query = {}
            if args.recent is not None:
                query["recent_seconds"] = args.recent
            if args.baseline is not None:
                query["baseline_seconds"] = args.baseline
            answer = api.call("GET", "/v1/admin/diagnosis", params=query)
            text = render_diagnosis(answer, args.verbose)
        write(as_json(answer) if args.json else text)
        return 0

    return run(args, show, timeout=10.0)
