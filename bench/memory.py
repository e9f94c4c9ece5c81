"""Memory of the whole `serve` process: idle, then with 1k..10k streams held open. The gateway
speaks HTTP/2 to the simulator so 10k streams take 10k client sockets, not 20k (the sandbox caps
a process at 20k descriptors).

Each level runs in a `serve` of its own, measured against that process's own idle RSS: in one
process kept across levels, the memory a level freed stays mapped (the allocators keep it for
reuse) and the next level grows into it, so each level's figure would depend on the ones before
it (the 2k level then cost 1.8 KiB a stream and the 5k one 32).

The figures per stream: at the largest level, all the RSS it added over its own idle RSS
divided by its streams (the process's fixed costs of serving included), and the least-squares
slope of the added RSS over all levels (what one more stream costs; a slope from two levels
alone swings with either of them).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.gateway import MODEL, Gateway, start_gateway
from bench.procs import RESULTS, cpus, pinned, sluicegate, start, wait_for_line

# Streams that last far longer than the measurement: one token a second.
HOLD = [
    "--stream-ratio",
    "1",
    "--prompt-tokens",
    "fixed:50",
    "--output-tokens",
    "fixed:120",
    "--header",
    "x-sim-ttft-ms: 5",
    "--header",
    "x-sim-itl-ms: 1000",
]


def hold(gateway: Gateway, streams: int, client_cpu: int | None) -> tuple[int, int]:
    """The highest RSS of `gateway` (KiB) while `streams` streams are held open, and how many
    were open at the end (the client may not have opened them all)."""
    cmd = sluicegate(
        "bench",
        "--url",
        gateway.url,
        "--model",
        MODEL,
        "--key",
        gateway.key,
        "--quiet",
        "--workers",
        "1",
        "--concurrency",
        str(streams),
        "--duration",
        "25s",
        "--timeout",
        "25s",
        "--max-inflight",
        str(streams),
        *HOLD,
    )
    client = subprocess.Popen(
        pinned(cmd, client_cpu), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        # Let every stream connect and get its first tokens, then read the memory.
        deadline = time.monotonic() + 20
        rss = gateway.proc.rss_kib()
        while time.monotonic() < deadline:
            time.sleep(1.0)
            rss = max(rss, gateway.proc.rss_kib())
        # Requests at the upstreams: every pool's in-flight gauge.
        return rss, int(gateway.metric("sluicegate_pool_inflight") or 0)
    finally:
        client.kill()
        client.wait(10)


def added_kib(point: dict[str, Any]) -> int:
    return int(point["rss_kib"] - point["idle_rss_kib"])


def per_stream(points: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """Bytes of RSS per open stream: (at the largest level, all it added over its idle RSS
    divided by its streams, fixed costs of serving included; the least-squares slope of the
    added RSS over the levels, what one more stream costs). One level alone has no slope."""
    if not points:
        return None, None
    largest = points[-1]
    at_largest = added_kib(largest) * 1024 / largest["streams"]
    if len(points) < 2:
        return at_largest, None
    fit = statistics.linear_regression(
        [p["streams"] for p in points], [added_kib(p) * 1024 for p in points]
    )
    return at_largest, fit.slope


def run(
    workdir: Path, levels: list[int], proxy_cpu: int | None, client_cpu: int | None
) -> dict[str, Any]:
    """Each level in a new `serve` in front of a simulator it reaches over HTTP/2."""
    sim = start("sim-h2", sluicegate("sim", "--port", "0", "--workers", "1"), workdir, client_cpu)
    points: list[dict[str, Any]] = []
    try:
        address = wait_for_line(sim, r"listening on http://(\S+)").group(1)
        members = [{"provider_id": "sim", "http2": True}]
        for streams in levels:
            level_dir = workdir / f"serve-{streams}"
            level_dir.mkdir()
            held = start_gateway(level_dir, address, proxy_cpu, pool={"members": members})
            try:
                time.sleep(1.0)
                idle = held.proc.rss_kib()
                rss, opened = hold(held, streams, client_cpu)
            finally:
                held.proc.stop()
            if opened < streams * 0.98:
                raise RuntimeError(f"{streams} streams asked for, {opened} open: not measured")
            points.append(
                {"streams": streams, "open": opened, "idle_rss_kib": idle, "rss_kib": rss}
            )
            added = added_kib(points[-1]) / 1024
            print(
                f"[bench] memory: {streams} open streams, serve RSS {rss / 1024:.1f} MiB "
                f"({added:.1f} over its idle {idle / 1024:.1f}; {opened} streams open at the end)",
                flush=True,
            )
    finally:
        sim.stop()
    at_largest, slope = per_stream(points)
    return {
        "points": points,
        "bytes_per_stream_at_largest": at_largest,
        "bytes_per_additional_stream": slope,
    }


def summary_line(data: dict[str, Any]) -> str:
    at_largest, slope = data["bytes_per_stream_at_largest"], data["bytes_per_additional_stream"]
    if at_largest is None:
        return "no level measured"
    largest = data["points"][-1]["streams"]
    line = f"RSS per open stream at {largest} streams: {at_largest / 1024:.1f} KiB"
    if slope is not None:
        line += f"; per additional stream (slope over the levels): {slope / 1024:.1f} KiB"
    return line


def main() -> int:
    """`python -m bench.memory [--quick]`: this phase alone, to bench/results/memory.json."""
    quick = "--quick" in sys.argv[1:]
    proxy_cpu, client_cpu = cpus()
    levels = [200, 400] if quick else [1000, 2000, 5000, 10000]
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-memory-") as tmp:
        data = run(Path(tmp), levels, proxy_cpu, client_cpu)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / ("memory-quick.json" if quick else "memory.json")).write_text(
        json.dumps(data, indent=2)
    )
    print(summary_line(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
