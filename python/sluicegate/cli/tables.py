"""`sluicegate status` and `sluicegate doctor` as a person reads them: the admin API's windowed
status and diagnosis as tables (percentiles, never means)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

from sluicegate.cli import output

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
    return output.table(header, list(rows), indent, numeric=True)


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
    replicas = status.get("replicas", [])
    scope = f"the fleet of {len(replicas)} replicas" if len(replicas) > 1 else "this replica"
    lines = [
        f"sluicegate status at {status['at']} (config version {status['config_version']}) for "
        f"{scope}; latencies in ms as P50/P95/P99",
    ]
    if len(replicas) > 1:
        from sluicegate.cli.fleet import REPLICA_HEADER, replica_rows

        lines += ["", *table(REPLICA_HEADER, replica_rows(replicas))]
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
