"""The data plane of this checkout against another's, on this machine, in interleaved rounds:
did a change cost the request path anything? A figure from an earlier run on another machine
says little (the kernel's share of a loopback request, its wake-ups above all, differs from one
machine to the next by more than a change costs); the same machine, the same minute, does.

Each round runs wrk (one thread, 64 connections) against each checkout's data plane alone
(`bench/bare_core.py`, usage drained and dropped), the two in turn, the data plane on one CPU,
wrk and an instant nginx upstream on the other. A round reports each side's CPU per request
(from /proc: its own CPU time over the requests wrk counted) and its requests per second; the
report gives the medians and the ratio this/other.

    python -m bench.ab OTHER_CHECKOUT [--rounds 5] [--seconds 10] [--journal]

With `--journal` each data plane journals its usage events (acknowledging what it drains, as
`bench/bare_core.py` does): the comparison for a change to the journal.

OTHER_CHECKOUT is a checkout (`git worktree add /tmp/base COMMIT`) whose data plane is built
with `make build-release` there, as this one's must be.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path
from statistics import median
from typing import Any

from bench import threads, wrk
from bench.gateway import Gateway, start_bare_core
from bench.nginx import start_instant_upstream
from bench.procs import ROOT, cpus, write_results
from bench.services import free_port
from bench.standard_client import BODY, wait_port

CONNECTIONS = 64
WARM_SECONDS = 3


def _round(
    workdir: Path, gateway: Gateway, name: str, seconds: int, cpu: int | None
) -> dict[str, float]:
    request = wrk.Request("/v1/chat/completions", BODY, gateway.key)
    wrk.run(workdir, f"{name}-warm", gateway.url, request, CONNECTIONS, WARM_SECONDS, cpu)
    before = gateway.proc.cpu_seconds()
    before_threads = threads.sample(gateway.proc.pid)
    report = wrk.run(workdir, name, gateway.url, request, CONNECTIONS, seconds, cpu)
    used = gateway.proc.cpu_seconds() - before
    by_thread = threads.per_request(
        before_threads, threads.sample(gateway.proc.pid), report["requests"]
    )
    request_path = by_thread["groups"].get("request_path", {}).get("cpu_us_per_request", 0.0)
    if report["errors"]:
        raise RuntimeError(
            f"{name}: {report['errors']} requests failed; the comparison would mislead"
        )
    return {
        "cpu_us_per_request": round(used * 1e6 / max(report["requests"], 1), 2),
        "request_path_us_per_request": request_path,
        "requests_per_s": round(report["requests_per_s"], 1),
    }


def _commit(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def compare(other: Path, rounds: int, seconds: int, journal: bool = False) -> dict[str, Any]:
    proxy_cpu, client_cpu = cpus()
    sides = {"this": None, "other": other}
    rows: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="sluicegate-ab-") as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        port = free_port()
        upstream = start_instant_upstream(workdir, port, client_cpu)
        stack.callback(upstream.stop)
        wait_port(f"127.0.0.1:{port}")
        for number in range(rounds):
            # Alternate which side goes first, so a drift within a round falls on both.
            order = list(sides.items()) if number % 2 == 0 else list(reversed(sides.items()))
            for side, checkout in order:
                gateway = start_bare_core(
                    workdir, f"127.0.0.1:{port}", proxy_cpu, journal=journal, checkout=checkout
                )
                try:
                    rows[side].append(
                        _round(workdir, gateway, f"{side}-{number}", seconds, client_cpu)
                    )
                finally:
                    gateway.proc.stop()
    summary = {
        side: {
            field: median(r[field] for r in rows[side])
            for field in ("cpu_us_per_request", "request_path_us_per_request", "requests_per_s")
        }
        for side in sides
    }
    return {
        "this": f"{ROOT} at {_commit(ROOT)}",
        "other": f"{other.resolve()} at {_commit(other)}",
        "journal": journal,
        "rounds": rows,
        "median": summary,
        "cpu_ratio": round(
            summary["this"]["cpu_us_per_request"] / summary["other"]["cpu_us_per_request"], 3
        ),
        "throughput_ratio": round(
            summary["this"]["requests_per_s"] / summary["other"]["requests_per_s"], 3
        ),
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"# Data plane A/B: {result['this']} (this) against {result['other']} (other)",
        "",
        f"wrk c={CONNECTIONS}, {len(result['rounds']['this'])} interleaved rounds; medians;"
        f" usage {'journaled' if result.get('journal') else 'not journaled'}.",
        "",
        "| side | CPU us/request | request path's threads | req/s | rounds (us/request) |",
        "|---|---|---|---|---|",
    ]
    for side in ("this", "other"):
        m = result["median"][side]
        each = ", ".join(f"{r['cpu_us_per_request']:.1f}" for r in result["rounds"][side])
        lines.append(
            f"| {side} | {m['cpu_us_per_request']:.1f} | {m['request_path_us_per_request']:.1f}"
            f" | {m['requests_per_s']:.0f} | {each} |"
        )
    lines += [
        "",
        f"CPU per request this/other {result['cpu_ratio']},"
        f" throughput {result['throughput_ratio']}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="a checkout built with make build-release")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--journal", action="store_true", help="both data planes journal usage")
    args = parser.parse_args()
    python = args.other / ".venv" / "bin" / "python"
    if not python.exists():
        parser.error(f"{args.other} has no .venv: run `make build-release` there first")
    result = compare(args.other, args.rounds, args.seconds, args.journal)
    write_results("ab", result, report(result))


if __name__ == "__main__":
    main()
