"""The floor under the data plane's throughput: how fast the gateway's libraries relay alone.

`floor_relay` (bench/tools/src/bin/floor_relay.rs) is an HTTP/1 relay made of what the request
path is made of (tokio, hyper's server with HTTP/1-or-2 detection, hyper_util's pooled client)
and nothing else. Measured beside nginx and the data plane alone (`bench/bare_core.py`), it
splits the data plane's distance from nginx into what those libraries cost and what the
gateway's own work (key check, routing, limits, metering, the usage event, metrics) adds.

Each system runs alone on the proxy's CPU, wrk and an instant nginx upstream on the other; the
same chat request for all; interleaved rounds at c=16 and c=64; each point's CPU per request
from the system's own CPU time over the requests wrk counted. The relay runs on tokio's
multi-threaded scheduler with one worker thread (as the data plane did with `core.workers = 1`
until 2026-12-07), on its single-threaded scheduler (as the data plane does with one worker
since), and there with its upstream exchange written by hand in the request's task instead of
through hyper_util's client (as the data plane reaches plain-HTTP members since 2026-12-07).

    python -m bench.floor [--rounds 3] [--seconds 6]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from contextlib import ExitStack
from pathlib import Path
from statistics import median
from typing import Any

from bench import wrk
from bench.gateway import MODEL, start_bare_core
from bench.nginx import start_instant_upstream, start_nginx
from bench.procs import ROOT, Proc, cpus, start, wait_for_line, write_results
from bench.services import free_port
from bench.standard_client import BODY, Target, wait_port

LEVELS = (16, 64)
RELAY = ROOT / "target" / "release" / "floor_relay"


def build_relay() -> Path:
    """The relay, built in release mode (cargo skips the work when it is current)."""
    cmd = ["cargo", "build", "--release", "-q", "-p", "sluicegate_tools", "--bin", "floor_relay"]
    subprocess.run(cmd, cwd=ROOT, check=True)
    return RELAY


# Each relay variant: its flags.
RELAYS = {
    "relay": [],
    "relay_current_thread": ["--current-thread"],
    "relay_own_client": ["--current-thread", "--own-client"],
}


def start_relay(workdir: Path, upstream: str, cpu: int | None, name: str) -> Proc:
    args = [str(RELAY), f"127.0.0.1:{free_port()}", upstream, *RELAYS[name]]
    return start(f"floor-{name}", args, workdir, cpu)


def _point(
    workdir: Path, label: str, target: Target, connections: int, seconds: int, cpu: int | None
) -> dict[str, float]:
    if target.proc is None:
        raise ValueError(f"{label}: a point needs a process of its own to read its CPU")
    request = wrk.Request("/v1/chat/completions", BODY.replace(MODEL, target.model), target.key)
    before = target.proc.cpu_seconds()
    report = wrk.run(workdir, label, target.url, request, connections, seconds, cpu)
    used = target.proc.cpu_seconds() - before
    if report["errors"]:
        raise RuntimeError(f"{label}: {report['errors']} requests failed")
    return {
        "requests_per_s": round(float(report["requests_per_s"]), 1),
        "cpu_us_per_request": round(used * 1e6 / max(int(report["requests"]), 1), 2),
    }


def run(
    workdir: Path, seconds: int, rounds: int, proxy_cpu: int | None, client_cpu: int | None
) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    build_relay()
    rows: dict[str, dict[str, list[dict[str, float]]]] = {}
    with ExitStack() as running:
        port = free_port()
        upstream_address = f"127.0.0.1:{port}"
        upstream = start_instant_upstream(workdir, port, client_cpu)
        running.callback(upstream.stop)
        wait_port(upstream_address)
        nginx_port = free_port()
        nginx = start_nginx(workdir, upstream_address, nginx_port, proxy_cpu)
        running.callback(nginx.stop)
        wait_port(f"127.0.0.1:{nginx_port}")
        targets = {"nginx": Target(f"http://127.0.0.1:{nginx_port}", "sim-model", None, nginx)}
        for name in RELAYS:
            relay = start_relay(workdir, upstream_address, proxy_cpu, name)
            running.callback(relay.stop)
            url = wait_for_line(relay, r"listening on (http://\S+)").group(1)
            targets[name] = Target(url, "sim-model", None, relay)
        bare = start_bare_core(workdir, upstream_address, proxy_cpu)
        running.callback(bare.proc.stop)
        targets["data_plane"] = Target(bare.url, MODEL, bare.key, bare.proc)
        for target in targets.values():
            _point(workdir, "warm", target, 16, 2, client_cpu)
        for number in range(rounds):
            for level in LEVELS:
                for name, target in targets.items():
                    label = f"floor-{name}-c{level}-{number + 1}"
                    point = _point(workdir, label, target, level, seconds, client_cpu)
                    rows.setdefault(f"c{level}", {}).setdefault(name, []).append(point)
    return summary(rows, rounds)


def summary(rows: dict[str, dict[str, list[dict[str, float]]]], rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"rounds": rounds, "levels": {}, "raw": rows}
    for level, by_target in rows.items():
        nginx = by_target["nginx"]
        out["levels"][level] = {
            name: {
                "requests_per_s": median(p["requests_per_s"] for p in points),
                "cpu_us_per_request": median(p["cpu_us_per_request"] for p in points),
                # Round by round against nginx's neighbouring run, then the median.
                "vs_nginx": round(
                    median(
                        p["requests_per_s"] / n["requests_per_s"]
                        for p, n in zip(points, nginx, strict=True)
                    ),
                    2,
                ),
            }
            for name, points in by_target.items()
        }
    return out


NAMES = {
    "nginx": "nginx (`proxy_pass`, 1 worker)",
    "relay": "floor relay, 1 worker thread",
    "relay_current_thread": "floor relay, single-threaded scheduler",
    "relay_own_client": "floor relay, single-threaded, its own HTTP/1 client",
    "data_plane": "data plane alone",
}


def markdown(data: dict[str, Any]) -> str:
    lines = [
        f"# The floor under the data plane ({data['rounds']} interleaved rounds, wrk, medians)",
        "",
        "| system | level | req/s | vs nginx | CPU us/request |",
        "|---|---|---|---|---|",
    ]
    for level, by_target in data["levels"].items():
        for name, row in by_target.items():
            lines.append(
                f"| {NAMES[name]} | {level} | {row['requests_per_s']:.0f} |"
                f" {row['vs_nginx']:.2f}x | {row['cpu_us_per_request']:.1f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sluicegate-floor-") as tmp:
        data = run(Path(tmp), args.seconds, args.rounds, *cpus())
    write_results("floor", data, markdown(data))


if __name__ == "__main__":
    main()
