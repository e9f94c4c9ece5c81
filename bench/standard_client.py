"""Throughput and latency with a standard client: wrk beside our own load generator, each system
under test alone on the proxy's CPU, wrk and an instant nginx upstream (`return 200`, a ~300 B
chat completion) on the other, the same chat request for all, in interleaved rounds.

Systems: nginx (`proxy_pass`, one worker), the data plane alone (`bench/bare_core.py`: usage
events drained and dropped), the data plane with its journal, `serve` on SQLite and `serve` on
PostgreSQL (its server unpinned and uncounted). `direct` is wrk against the upstream itself: the
calibration, the ceiling of client and upstream together. Each point says what share of a CPU
the client (wrk or our generator, with the upstream) and the system under test used, from their
own CPU times (so other work on the machine does not count): a figure whose client used its CPU
(>= 95%) while the system had room (< 95%) is marked client-bound: it says how much the client
could send, not what the system could serve.

Per request at c=64 and at c=1 (from /proc, no profiler): the CPU of every thread group of each
process (the request path's workers, the journal's syncer, the rest) and its context switches.
`python -m bench.standard_client [--quick]` runs this phase alone."""

from __future__ import annotations

import json
import resource
import socket
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from bench import loadgen, postgres, threads, wrk
from bench.compare import WHOLE
from bench.gateway import MODEL, start_bare_core, start_gateway
from bench.nginx import start_instant_upstream, start_nginx
from bench.procs import Proc, cpus, write_results
from bench.services import free_port

LEVELS = (1, 16, 64)
# Our own load generator runs at the throughput points only.
LOADGEN_LEVELS = (16, 64)
# Where each thread group's cost per request is sampled: saturated, and one request at a time
# (where the drainer's and the syncer's wake-ups are paid per few events, beside the tail).
THREAD_LEVELS = (1, 64)
BODY = json.dumps(
    {"model": MODEL, "messages": [{"role": "user", "content": "Say something short."}]},
    separators=(",", ":"),
)
BUSY = 0.95


@dataclass
class Target:
    url: str
    model: str
    key: str | None
    proc: Proc | None


def wait_port(address: str, timeout: float = 20.0) -> None:
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {address}")


def start_targets(
    workdir: Path, upstream: str, proxy_cpu: int | None, running: ExitStack
) -> dict[str, Target]:
    targets = {"direct": Target(f"http://{upstream}", "sim-model", None, None)}
    nginx_port = free_port()
    nginx = start_nginx(workdir, upstream, nginx_port, proxy_cpu)
    running.callback(nginx.stop)
    wait_port(f"127.0.0.1:{nginx_port}")
    targets["nginx"] = Target(f"http://127.0.0.1:{nginx_port}", "sim-model", None, nginx)
    for name, journal in (("data_plane", False), ("data_plane_journal", True)):
        bare = start_bare_core(workdir, upstream, proxy_cpu, journal=journal)
        running.callback(bare.proc.stop)
        targets[name] = Target(bare.url, MODEL, bare.key, bare.proc)
    (workdir / "serve-sqlite").mkdir()
    serve = start_gateway(workdir / "serve-sqlite", upstream, proxy_cpu)
    running.callback(serve.proc.stop)
    targets["serve_sqlite"] = Target(serve.url, MODEL, serve.key, serve.proc)
    pg_url = postgres.fresh_database("sluicegate_bench_standard")
    if pg_url:
        (workdir / "serve-pg").mkdir()
        pg = start_gateway(workdir / "serve-pg", upstream, proxy_cpu, database_url=pg_url)
        running.callback(pg.proc.stop)
        targets["serve_postgresql"] = Target(pg.url, MODEL, pg.key, pg.proc)
    return targets


def children_cpu_seconds() -> float:
    """CPU time of this process's children that ended (the clients, once waited for)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def measure(
    workdir: Path,
    label: str,
    upstream: Proc,
    target: Target,
    connections: int,
    seconds: float,
    client_cpu: int | None,
    client: str,
) -> dict[str, Any]:
    """One point: the client's report, the shares of a CPU the client (with the upstream) and the
    system used, and (c=1 and c=64, a process of ours) the per-thread cost per request."""
    before_client = children_cpu_seconds() + upstream.cpu_seconds()
    started = time.monotonic()
    before_threads = threads.sample(target.proc.pid) if target.proc else None
    before_proc = target.proc.cpu_seconds() if target.proc else 0.0
    if client == "wrk":
        request = wrk.Request("/v1/chat/completions", BODY.replace(MODEL, target.model), target.key)
        report = wrk.run(workdir, label, target.url, request, connections, seconds, client_cpu)
    else:
        args = [*WHOLE, "--concurrency", str(connections), "--model", target.model]
        report = loadgen.run(
            workdir, label, target.url, [*args, "--duration", f"{seconds}s"], client_cpu, target.key
        )
    wall = max(time.monotonic() - started, 1e-3)
    client_used = children_cpu_seconds() + upstream.cpu_seconds() - before_client
    requests = int(report["requests"])
    point: dict[str, Any] = {
        "requests_per_s": float(report["requests_per_s"]),
        "errors": int(report.get("errors", 0)),
        "client_cpu_busy": round(min(client_used / wall, 1.0), 3),
        "proxy_cpu_busy": None,
    }
    if client == "wrk":
        point["latency_ms"] = report["latency_ms"]
    if target.proc:
        used = target.proc.cpu_seconds() - before_proc
        point["proxy_cpu_busy"] = round(min(used / wall, 1.0), 3)
        point["cpu_us_per_request"] = round(used * 1e6 / max(requests, 1), 2)
        if before_threads is not None and connections in THREAD_LEVELS:
            after = threads.sample(target.proc.pid)
            point["threads"] = threads.per_request(before_threads, after, requests)
    return point


def run(
    workdir: Path, seconds: float, rounds: int, proxy_cpu: int | None, client_cpu: int | None
) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    points: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {"wrk": {}, "loadgen": {}}
    with ExitStack() as running:
        port = free_port()
        upstream = start_instant_upstream(workdir, port, client_cpu)
        running.callback(upstream.stop)
        wait_port(f"127.0.0.1:{port}")
        targets = start_targets(workdir, f"127.0.0.1:{port}", proxy_cpu, running)
        time.sleep(1.0)
        for i in range(rounds):
            for level in LEVELS:
                for name, target in targets.items():
                    clients = ["wrk", "loadgen"] if level in LOADGEN_LEVELS else ["wrk"]
                    for client in clients:
                        label = f"std-{client}-{name}-c{level}-{i + 1}"
                        point = measure(
                            workdir, label, upstream, target, level, seconds, client_cpu, client
                        )
                        by_level = points[client].setdefault(f"c{level}", {})
                        by_level.setdefault(name, []).append(point)
    return summary(points, rounds)


def _median(rows: list[dict[str, Any]], pick: Any) -> float | None:
    values = [pick(r) for r in rows if pick(r) is not None]
    return round(median(values), 3) if values else None


def _ratio_rounds(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> float | None:
    """`a` over `b` round by round (neighbouring runs), the median of those."""
    ratios = [x["requests_per_s"] / y["requests_per_s"] for x, y in zip(a, b, strict=True)]
    return round(median(ratios), 2) if ratios else None


def bound(rows: list[dict[str, Any]]) -> str:
    """What limited a point, from the median busy shares of its CPUs."""
    client = _median(rows, lambda r: r["client_cpu_busy"])
    proxy = _median(rows, lambda r: r["proxy_cpu_busy"])
    if client is None:
        return "unknown"
    if client >= BUSY and (proxy is None or proxy < BUSY):
        return "client-bound"
    if proxy is not None and proxy >= BUSY:
        return "proxy-bound"
    return "latency-bound"


def summary(points: dict[str, Any], rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"rounds": rounds, "levels": {}, "c1": {}}
    for client, by_level in points.items():
        for level, by_target in by_level.items():
            row = out["levels"].setdefault(level, {}).setdefault(client, {})
            for name, rows in by_target.items():
                row[name] = {
                    "requests_per_s": _median(rows, lambda r: r["requests_per_s"]),
                    "vs_nginx": _ratio_rounds(rows, by_target["nginx"])
                    if "nginx" in by_target
                    else None,
                    "cpu_us_per_request": _median(rows, lambda r: r.get("cpu_us_per_request")),
                    "client_cpu_busy": _median(rows, lambda r: r["client_cpu_busy"]),
                    "proxy_cpu_busy": _median(rows, lambda r: r["proxy_cpu_busy"]),
                    "bound": bound(rows),
                    "errors": sum(r["errors"] for r in rows),
                }
    c1 = points["wrk"].get("c1", {})
    direct = c1.get("direct", [])
    for name, rows in c1.items():
        if name == "direct":
            continue
        added = {
            q: round(
                median(
                    r["latency_ms"][q] - d["latency_ms"][q]
                    for r, d in zip(rows, direct, strict=True)
                ),
                4,
            )
            for q in ("p50", "p99")
        }
        out["c1"][name] = {"added_ms": added}
    if "nginx" in out["c1"]:
        nginx = out["c1"]["nginx"]["added_ms"]
        for row in out["c1"].values():
            row["vs_nginx"] = {
                q: round(row["added_ms"][q] / nginx[q], 2) if nginx[q] > 0 else None
                for q in ("p50", "p99")
            }
    for level in THREAD_LEVELS:
        out[f"threads_c{level}"] = per_thread(points["wrk"].get(f"c{level}", {}))
    return out


def per_thread(by_target: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each system's per-thread cost per request at one level (medians of the rounds), and the
    request path's in `serve` against the data plane's alone."""
    out: dict[str, Any] = {}
    for name, rows in by_target.items():
        sampled = [r["threads"] for r in rows if "threads" in r]
        if sampled:
            out[name] = threads.median_rounds(sampled)
    alone = out.get("data_plane", {}).get("groups", {}).get("request_path")
    for name in ("serve_sqlite", "serve_postgresql"):
        mine = out.get(name, {}).get("groups", {}).get("request_path")
        if alone and mine and alone["cpu_us_per_request"]:
            out[name]["request_path_vs_data_plane"] = round(
                mine["cpu_us_per_request"] / alone["cpu_us_per_request"], 2
            )
    return out


NAMES = {
    "direct": "direct (client ceiling)",
    "nginx": "nginx",
    "data_plane": "data plane alone",
    "data_plane_journal": "data plane + journal",
    "serve_sqlite": "`serve`, SQLite",
    "serve_postgresql": "`serve`, PostgreSQL",
}


def _f(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "## Standard client: wrk beside our load generator",
        "",
        "wrk (1 thread) and an instant nginx upstream on the client's CPU, each system alone on "
        "the proxy's CPU, the same chat request; medians of "
        f"{data['rounds']} interleaved rounds. `bound`: which CPU was busy (>= 95%).",
        "",
        "| system | client | c | req/s | / nginx | CPU us/req | client CPU | proxy CPU | bound |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for level, by_client in data["levels"].items():
        for client, rows in by_client.items():
            for name, r in rows.items():
                lines.append(
                    f"| {NAMES.get(name, name)} | {client} | {level[1:]} | "
                    f"{_f(r['requests_per_s'], 0)} | {_f(r['vs_nginx'])} | "
                    f"{_f(r['cpu_us_per_request'], 1)} | {_f(r['client_cpu_busy'])} | "
                    f"{_f(r['proxy_cpu_busy'])} | {r['bound']} |"
                )
    if data["c1"]:
        lines += [
            "",
            "c=1 with wrk, added latency (system minus direct, per round):",
            "",
            "| system | added p50 ms | added p99 ms | p50 / nginx | p99 / nginx |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, r in data["c1"].items():
            vs = r.get("vs_nginx", {})
            lines.append(
                f"| {NAMES.get(name, name)} | {_f(r['added_ms']['p50'], 3)} | "
                f"{_f(r['added_ms']['p99'], 3)} | {_f(vs.get('p50'))} | {_f(vs.get('p99'))} |"
            )
    for level in reversed(THREAD_LEVELS):
        lines += _thread_table(level, data.get(f"threads_c{level}", {}))
    return "\n".join(lines)


def _thread_table(level: int, by_system: dict[str, Any]) -> list[str]:
    if not by_system:
        return []
    lines = [
        "",
        f"Per request at c={level} (wrk), by thread group: CPU us / context switches (voluntary "
        "+ involuntary).",
        "",
        "| system | request path | journal syncer | usage drainer | other | switches/req | "
        "request path vs data plane |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in by_system.items():
        g = t["groups"]

        def cell(label: str, g: dict[str, Any] = g) -> str:
            row = g.get(label)
            if not row:
                return "-"
            switches = (
                row["voluntary_switches_per_request"] + row["involuntary_switches_per_request"]
            )
            return f"{row['cpu_us_per_request']:.1f} / {switches:.3f}"

        lines.append(
            f"| {NAMES.get(name, name)} | {cell('request_path')} | {cell('journal_syncer')} "
            f"| {cell('drainer')} | {cell('other')} | {_f(t['switches_per_request'], 3)} | "
            f"{_f(t.get('request_path_vs_data_plane'))} |"
        )
    return lines


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    proxy_cpu, client_cpu = cpus()
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-std-") as tmp:
        data = run(Path(tmp), 2 if quick else 6, 1 if quick else 3, proxy_cpu, client_cpu)
    write_results("standard-client-quick" if quick else "standard-client", data, markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
