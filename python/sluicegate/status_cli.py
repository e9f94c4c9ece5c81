"""`sluicegate status` and `sluicegate doctor`: the admin API's windowed status and diagnosis as
readable tables (percentiles, never means); `--json` prints the API's answer as it is."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from sluicegate.admin_cli import Api, CliError, connection_options, duration, no_token

SHOWN_WINDOWS = ("1m", "5m", "1h")


def num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def triple(q: Mapping[str, Any]) -> str:
    return "/".join(num(q.get(p)) for p in ("p50", "p95", "p99"))


def pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def table(header: list[str], rows: Iterable[list[str]], indent: str = "  ") -> list[str]:
    """Left-aligned first column, the rest right-aligned, two spaces apart."""
    body = [header, *rows]
    widths = [max(len(row[i]) for row in body) for i in range(len(header))]
    lines = []
    for row in body:
        cells = [
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        lines.append(indent + "  ".join(cells).rstrip())
    return lines


WINDOW_HEADER = [
    "window",
    "req/s",
    "errors",
    "timeouts",
    "refused",
    "retries",
    "TTFT p50/p95/p99",
    "TPOT p50/p95/p99",
    "total p50/p95/p99",
    "queue wait p50/p95/p99",
]


def window_rows(windows: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    for name in SHOWN_WINDOWS:
        w = windows.get(name)
        if w is None:
            continue
        rows.append(
            [
                name,
                f"{w['rate_per_s']:.2f}",
                pct(w["error_rate"]),
                pct(w["timeout_rate"]),
                str(w["rejected"]),
                str(w["client_retries"]),
                triple(w["ttft_ms"]),
                triple(w["tpot_ms"]),
                triple(w["total_ms"]),
                triple(w["queue_wait_ms"]),
            ]
        )
    return rows


def _limit(value: int | None) -> str:
    return "no limit" if value is None else str(value)


def render_pool(pool: Mapping[str, Any]) -> list[str]:
    queues = ", ".join(
        f"{lane} {pool['queue_depth'].get(lane, 0)} of {limit}"
        for lane, limit in sorted(
            pool["queue_limit"].items(), key=lambda kv: kv[0] != "interactive"
        )
    )
    drilled = "  [DRILLED: out of service]" if pool["drilled"] else ""
    lines = [
        f"pool {pool['id']} ({pool['kind']}){drilled}",
        f"  now: in flight {pool['inflight']} of {_limit(pool['inflight_limit'])}; queue {queues}",
    ]
    members = [
        f"{m['id']} {m['state']} ({m['inflight']} in flight, {m['ejections']} ejections, "
        f"TTFB avg {num(m['ttfb_ewma_ms'])} ms)"
        for m in pool["members"]
    ]
    lines.append("  members: " + "; ".join(members))
    header = [*WINDOW_HEADER, "queue max", "in flight max"]
    rows = [
        [*row, str(pool["windows"][row[0]]["max_queue_depth"]), str(w_inflight)]
        for row in window_rows(pool["windows"])
        for w_inflight in [pool["windows"][row[0]]["max_inflight"]]
    ]
    lines += table(header, rows)
    return lines


def render_route(route: Mapping[str, Any]) -> list[str]:
    slo = route.get("slo_ttft_p95_ms")
    objective = f"; SLO: P95 of TTFT {slo} ms" if slo is not None else ""
    lines = [f"route {route['alias']} -> {', '.join(route['chain'])}{objective}"]
    lines += table(WINDOW_HEADER, window_rows(route["windows"]))
    return lines


def render_status(status: Mapping[str, Any]) -> str:
    lines = [
        f"sluicegate status at {status['at']} (config version {status['config_version']}); "
        "latencies in ms as P50/P95/P99",
    ]
    if not status["pools"]:
        lines.append("no pools configured")
    for pool in status["pools"]:
        lines += ["", *render_pool(pool)]
    for route in status["routes"]:
        lines += ["", *render_route(route)]
    return "\n".join(lines) + "\n"


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, width=100, initial_indent=indent, subsequent_indent=indent)


def render_checks(rule: Mapping[str, Any], indent: str) -> list[str]:
    lines = []
    for check in rule["checks"]:
        mark = "yes" if check["held"] else "no "
        lines += _wrap(f"[{mark}] {check['name']}: {check['detail']}", indent)
    return lines


def render_diagnosis(diagnosis: Mapping[str, Any], verbose: bool = False) -> str:
    lines = [
        f"sluicegate doctor at {diagnosis['at']}: the last {diagnosis['recent_seconds']} s "
        f"against the {diagnosis['baseline_seconds']} s before",
    ]
    if not diagnosis["pools"]:
        lines.append("no pools configured")
    for pool in diagnosis["pools"]:
        verdict = pool["verdict"].replace("_", " ").upper()
        lines += ["", f"pool {pool['pool']}: {verdict} (scale advice {pool['scale_advice']})"]
        lines += _wrap(pool["summary"], "  ")
        for rule in pool["rules"]:
            if rule["matched"]:
                state = "matched"
            elif rule["not_evaluated"]:
                state = f"not evaluated: {rule['not_evaluated']}"
            else:
                held = sum(c["held"] for c in rule["checks"])
                state = f"no ({held} of {len(rule['checks'])} checks held)"
            lines.append(f"  rule {rule['rule']}: {state}")
            if verbose or rule["rule"] == pool["verdict"]:
                lines += render_checks(rule, "      ")
    return "\n".join(lines) + "\n"


def add_status_commands(sub: Any) -> None:
    conn = connection_options()
    p = sub.add_parser(
        "status",
        parents=[conn],
        help="per pool and route over 1 min, 5 min and 1 h: rates, P50/P95/P99, limits, members",
    )
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")
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
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")


STATUS_COMMANDS = ("status", "doctor")


def run_status(args: argparse.Namespace) -> int:
    token = args.token or os.environ.get("SLUICEGATE_ADMIN_TOKEN")
    if not token:
        return no_token()
    api = Api(args.admin_url, token)
    try:
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
    except CliError as e:
        print(f"sluicegate {args.command}: {e}", file=sys.stderr)
        return 1
    except httpx.HTTPError as e:
        where = args.admin_url
        print(
            f"sluicegate {args.command}: cannot reach the admin API at {where}: {e}",
            file=sys.stderr,
        )
        return 1
    finally:
        api.close()
    sys.stdout.write(json.dumps(answer, indent=2) + "\n" if args.json else text)
    return 0
