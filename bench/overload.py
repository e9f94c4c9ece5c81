"""The overload scenario: the simulator's `--max-concurrency` is the bottleneck; interactive and
batch traffic (1:5) arrive at 80% and at 3x of what it can serve, through the gateway with
admission (the pool's slots match the simulator's, bounded lanes, interactive weighted first)
and through the same gateway without admission limits, side by side.

What it shows, per run: interactive and batch TTFT percentiles, how many of each were served,
shed (503 + Retry-After) or timed out; that nothing shed was billed (the usage ledger holds one
row per request that was not shed and none for the shed ones); the deepest each lane got
against its bound (`sluicegate_queue_depth_peak`, the deepest since the gateway started).

`python -m bench.overload [--quick]`; `make bench` runs it too.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench import loadgen
from bench.gateway import MODEL, Gateway, start_gateway
from bench.procs import RESULTS, cpus, sluicegate, start, wait_for_line, write_results

SIM_SLOTS = 8
SIM_TTFT_MS = 40
SIM_ITL_MS = 8
OUTPUT_TOKENS = 24
MIX = ["--priority", "interactive:1", "--priority", "batch:5"]
SHAPE = [
    "--stream-ratio",
    "1",
    "--prompt-tokens",
    "lognormal:200:0.6",
    "--output-tokens",
    f"fixed:{OUTPUT_TOKENS}",
    "--timeout",
    "15s",
]
LOADS = {"80%": 0.8, "3x": 3.0}

# Interactive waits long and goes nearly always first; batch waits briefly in a short lane. The
# keep-alive is longer than any lane's wait, so a shed stream is a plain 503, never a 200 whose
# body then says so.
ADMISSION = {
    "interactive": {"max_depth": 64, "max_wait_ms": 10_000, "weight": 50},
    "batch": {"max_depth": 16, "max_wait_ms": 2_000, "weight": 1},
    "tenant_share": 1.0,
    "keepalive_ms": 15_000,
}
POOLS = {
    "with admission": {
        "members": [{"provider_id": "sim", "max_concurrency": SIM_SLOTS}],
        "admission": ADMISSION,
    },
    "without admission": {"members": [{"provider_id": "sim"}]},
}


def capacity(workdir: Path, sim: str, seconds: int, cpu: int | None) -> float:
    """Requests per second the simulator serves with every slot busy (closed loop, direct)."""
    report = loadgen.run(
        workdir,
        "overload-capacity",
        f"http://{sim}",
        [*SHAPE, "--concurrency", str(SIM_SLOTS), "--duration", f"{seconds}s"],
        cpu,
    )
    return float(report["requests_per_s"])


def metric_values(text: str, name: str) -> dict[str, float]:
    """`{priority: value}` of one pool-and-priority family in Prometheus text."""
    values = {}
    for match in re.finditer(rf'^{name}\{{pool="pool",priority="(\w+)"\}} (\S+)$', text, re.M):
        values[match.group(1)] = float(match.group(2))
    return values


def ledger(db: Path, expected: int, timeout: float = 30.0) -> dict[str, Any]:
    """The usage rows once the drainer has caught up (the count reaches `expected` or stops
    moving for two seconds)."""
    deadline = time.monotonic() + timeout
    last, still_since = -1, time.monotonic()
    while True:
        with sqlite3.connect(db) as conn:
            count = conn.execute("SELECT count(*) FROM usage_records").fetchone()[0]
            if (
                count >= expected
                or time.monotonic() > deadline
                or (count == last and time.monotonic() - still_since > 2.0)
            ):
                by_status = dict(
                    conn.execute("SELECT status, count(*) FROM usage_records GROUP BY status")
                )
                dupes = conn.execute(
                    "SELECT count(*) - count(DISTINCT request_id) FROM usage_records"
                ).fetchone()[0]
                return {"rows": count, "by_status": by_status, "duplicates": dupes}
        if count != last:
            last, still_since = count, time.monotonic()
        time.sleep(0.2)


def classes(report: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, c in report["by_priority"].items():
        status = {int(k): v for k, v in c["status"].items()}
        out[name] = {
            "requests": c["requests"],
            "ok": c["ok"],
            "shed_503": status.get(503, 0),
            "retry_after_on_503": c["retry_after_seen"],
            "ttft_ms": c["ttft_ms"],
            "total_ms": c["total_ms"],
        }
    return out


def run_case(
    workdir: Path,
    sim: str,
    label: str,
    pool: dict[str, Any],
    rates: dict[str, float],
    seconds: int,
    proxy_cpu: int | None,
    client_cpu: int | None,
) -> dict[str, Any]:
    case_dir = workdir / label.replace(" ", "-")
    case_dir.mkdir()
    gateway = start_gateway(case_dir, sim, proxy_cpu, pool=pool)
    try:
        results = {}
        for load, rate in rates.items():
            results[load] = run_load(case_dir, gateway, load, rate, seconds, client_cpu)
        return results
    finally:
        gateway.proc.stop()


def run_load(
    workdir: Path, gateway: Gateway, load: str, rate: float, seconds: int, cpu: int | None
) -> dict[str, Any]:
    db = workdir / "bench.db"
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT count(*) FROM usage_records").fetchone()[0]
    report = loadgen.run(
        workdir,
        f"overload-{load}",
        gateway.url,
        [*SHAPE, *MIX, "--rate", f"{rate:.2f}", "--duration", f"{seconds}s", "--model", MODEL],
        cpu,
        gateway.key,
    )
    status = {int(k): v for k, v in report["status"].items()}
    shed = status.get(503, 0) + status.get(429, 0)
    expected = before + report["requests"] - shed
    usage = ledger(db, expected)
    usage["rows"] -= before
    metrics = httpx.get(gateway.admin + "/metrics", timeout=30).text
    # Without a slot limit nothing ever waits: the lanes' bounds do not apply.
    limited = re.search(r'^sluicegate_pool_inflight_limit\{pool="pool"\}', metrics, re.M)
    return {
        "rate_per_s": round(rate, 2),
        "requests": report["requests"],
        "status": status,
        "timeouts": report["timeouts"],
        "dropped_by_generator": report["dropped"],
        "classes": classes(report),
        "usage": {
            **usage,
            "expected_rows": report["requests"] - shed,
            "shed_rows": sum(usage["by_status"].get(s, 0) for s in (503, 429)),
        },
        "queue_depth_peak": metric_values(metrics, "sluicegate_queue_depth_peak"),
        "queue_limit": metric_values(metrics, "sluicegate_queue_limit") if limited else {},
    }


def checks(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's conditions, each with the numbers it was judged on."""
    admitted = results["with admission"]
    base = admitted["80%"]["classes"]["interactive"]["ttft_ms"]["p99"] or 0.0
    over = admitted["3x"]["classes"]["interactive"]["ttft_ms"]["p99"] or 0.0
    batch = admitted["3x"]["classes"].get("batch", {})
    out: dict[str, Any] = {
        "interactive_p99_ttft_ms_80pct": base,
        "interactive_p99_ttft_ms_3x": over,
        "interactive_p99_within_2x": bool(base) and over <= 2 * base,
        "batch_shed_with_retry_after": batch.get("shed_503", 0) > 0
        and batch.get("retry_after_on_503", 0) >= batch.get("shed_503", 0),
    }
    for case, loads in results.items():
        for load, r in loads.items():
            u = r["usage"]
            out[f"ledger_exact[{case} {load}]"] = (
                u["rows"] == u["expected_rows"] and u["shed_rows"] == 0 and u["duplicates"] == 0
            )
            peaks, limits = r["queue_depth_peak"], r["queue_limit"]
            if case == "with admission":
                out[f"queue_within_bound[{load}]"] = bool(limits) and all(
                    peaks.get(lane, 0) <= limit for lane, limit in limits.items()
                )
    return out


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "## Overload: the simulator's slots are the bottleneck",
        "",
        f"Simulator: {SIM_SLOTS} slots, TTFT {SIM_TTFT_MS} ms, ITL {SIM_ITL_MS} ms, "
        f"{OUTPUT_TOKENS} output tokens; capacity measured at {data['capacity_per_s']:.1f} req/s. "
        "Mix interactive:batch = 1:5, Poisson arrivals.",
        "",
        "| case | load | class | sent | served | shed 503 | TTFT p50 ms | p95 | p99 |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case, loads in data["results"].items():
        for load, r in loads.items():
            for name, c in sorted(r["classes"].items(), reverse=True):
                t = c["ttft_ms"]
                lines.append(
                    f"| {case} | {load} | {name} | {c['requests']} | {c['ok']} | "
                    f"{c['shed_503']} | {_ms(t['p50'])} | {_ms(t['p95'])} | {_ms(t['p99'])} |"
                )
    lines += [
        "",
        "| case | load | timeouts | usage rows / expected | shed rows | queue peak / bound |",
        "|---|---|---:|---|---:|---|",
    ]
    for case, loads in data["results"].items():
        for load, r in loads.items():
            u = r["usage"]
            peaks = ", ".join(
                f"{lane} {int(r['queue_depth_peak'].get(lane, 0))}/{int(limit)}"
                for lane, limit in sorted(r["queue_limit"].items())
            )
            lines.append(
                f"| {case} | {load} | {r['timeouts']} | {u['rows']} / {u['expected_rows']} | "
                f"{u['shed_rows']} | {peaks or 'no slot limit, no queue'} |"
            )
    lines += ["", "| check | result |", "|---|---|"]
    lines += [
        f"| {name} | {f'{value:.1f}' if isinstance(value, float) else value} |"
        for name, value in data["checks"].items()
    ]
    return "\n".join(lines) + "\n"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def run(workdir: Path, seconds: int, proxy_cpu: int | None, client_cpu: int | None) -> Any:
    workdir.mkdir(parents=True, exist_ok=True)
    sim = start(
        "overload-sim",
        sluicegate(
            "sim",
            "--port",
            "0",
            "--workers",
            "1",
            "--max-concurrency",
            str(SIM_SLOTS),
            "--ttft-ms",
            str(SIM_TTFT_MS),
            "--itl-ms",
            str(SIM_ITL_MS),
        ),
        workdir,
        client_cpu,
    )
    try:
        address = wait_for_line(sim, r"listening on http://(\S+)").group(1)
        cap = capacity(workdir, address, max(seconds // 2, 3), client_cpu)
        rates = {load: cap * factor for load, factor in LOADS.items()}
        results = {
            label: run_case(workdir, address, label, pool, rates, seconds, proxy_cpu, client_cpu)
            for label, pool in POOLS.items()
        }
    finally:
        sim.stop()
    data = {"capacity_per_s": cap, "results": results}
    data["checks"] = checks(results)
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short phases: a smoke run")
    args = parser.parse_args()
    proxy_cpu, client_cpu = cpus()
    with tempfile.TemporaryDirectory(prefix="sluicegate-overload-") as tmp:
        data = run(Path(tmp), 5 if args.quick else 20, proxy_cpu, client_cpu)
    name = "overload-quick" if args.quick else "overload"
    write_results(name, data, markdown(data))
    print(f"[bench] written to {RESULTS}/{name}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
