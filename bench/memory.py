"""Memory of the whole `serve` process: idle, then with 1k..10k streams held open. The gateway
speaks HTTP/2 to the simulator so 10k streams take 10k client sockets, not 20k (the sandbox caps
a process at 20k descriptors)."""

from __future__ import annotations

import json
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


def measure(
    workdir: Path, gateway: Gateway, levels: list[int], client_cpu: int | None
) -> dict[str, Any]:
    time.sleep(1.0)
    idle = gateway.proc.rss_kib()
    points: list[dict[str, Any]] = []
    for streams in levels:
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
            points.append({"streams": streams, "rss_kib": rss})
            print(
                f"[bench] memory: {streams} open streams, serve RSS {rss / 1024:.1f} MiB",
                flush=True,
            )
        finally:
            client.kill()
            client.wait(10)
        time.sleep(3.0)
    per_stream = None
    if len(points) >= 2:
        first, last = points[0], points[-1]
        per_stream = (
            (last["rss_kib"] - first["rss_kib"]) * 1024 / max(last["streams"] - first["streams"], 1)
        )
    return {"idle_rss_kib": idle, "points": points, "bytes_per_additional_stream": per_stream}


def run(
    workdir: Path, levels: list[int], proxy_cpu: int | None, client_cpu: int | None
) -> dict[str, Any]:
    """`serve` in front of a simulator it reaches over HTTP/2, measured at `levels` streams."""
    sim = start("sim-h2", sluicegate("sim", "--port", "0", "--workers", "1"), workdir, client_cpu)
    try:
        address = wait_for_line(sim, r"listening on http://(\S+)").group(1)
        members = [{"provider_id": "sim", "http2": True}]
        held = start_gateway(workdir, address, proxy_cpu, pool={"members": members})
        try:
            return measure(workdir, held, levels, client_cpu)
        finally:
            held.proc.stop()
    finally:
        sim.stop()


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
    per = data["bytes_per_additional_stream"]
    print(f"RSS per additional open stream: {per / 1024:.1f} KiB" if per else json.dumps(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
