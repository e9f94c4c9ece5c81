"""What one busy thread beside the proxy does to its c=1 tail: the data plane alone
(`bench/bare_core.py`) at c=1 with wrk, against an instant nginx upstream, with nothing else on
the proxy's CPU, with a busy loop at nice 0 pinned there, and with one at nice 19, in
interleaved rounds. The added p99 is the system's p99 minus the upstream's own, measured in the
same round.

    .venv/bin/python -m bench.corunner [--rounds 3] [--seconds 5]

Why: `serve`'s drainer is such a thread, on the proxy's CPU whenever it writes a batch, and
`serve`'s c=1 added p99 sits well above the data plane's (`bench/README.md`). A busy loop is the
drainer with its work left out, so this shows how much of that tail the kernel's scheduler alone
gives a proxy that shares its CPU, whatever the thread does. Results: `results/corunner.*`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from statistics import median
from typing import Any

from bench import wrk
from bench.gateway import MODEL, start_bare_core
from bench.nginx import start_instant_upstream
from bench.procs import cpus, pinned, write_results
from bench.services import free_port
from bench.standard_client import BODY, wait_port

# A busy loop at a nice value, as its own process.
HOG = "import os, sys\nos.nice(int(sys.argv[1]))\nwhile True:\n    pass\n"
CASES: dict[str, int | None] = {"alone": None, "busy loop at nice 0": 0, "busy loop at nice 19": 19}


def run(workdir: Path, rounds: int, seconds: int) -> dict[str, Any]:
    proxy_cpu, client_cpu = cpus()
    added: dict[str, list[float]] = {case: [] for case in CASES}
    with ExitStack() as running:
        port = free_port()
        upstream = start_instant_upstream(workdir, port, client_cpu)
        running.callback(upstream.stop)
        wait_port(f"127.0.0.1:{port}")
        plane = start_bare_core(workdir, f"127.0.0.1:{port}", proxy_cpu)
        running.callback(plane.proc.stop)
        direct = wrk.Request("/v1/chat/completions", BODY.replace(MODEL, "sim-model"))
        through = wrk.Request("/v1/chat/completions", BODY, plane.key)
        time.sleep(1.0)
        for i in range(rounds):
            for case, nice in CASES.items():
                hog = None
                if nice is not None:
                    cmd = pinned([sys.executable, "-c", HOG, str(nice)], proxy_cpu)
                    hog = subprocess.Popen(cmd)
                    time.sleep(0.5)
                try:
                    base = wrk.run(
                        workdir,
                        f"direct-{i}",
                        f"http://127.0.0.1:{port}",
                        direct,
                        1,
                        seconds,
                        client_cpu,
                    )
                    label = f"plane-{i}-{nice}"
                    report = wrk.run(workdir, label, plane.url, through, 1, seconds, client_cpu)
                finally:
                    if hog is not None:
                        hog.kill()
                        hog.wait()
                added[case].append(
                    round(report["latency_ms"]["p99"] - base["latency_ms"]["p99"], 3)
                )
    return {
        "rounds": rounds,
        "seconds": seconds,
        "added_p99_ms": added,
        "median_added_p99_ms": {case: median(v) for case, v in added.items()},
    }


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "## The data plane's c=1 tail beside a busy thread",
        "",
        f"wrk c=1, {data['rounds']} interleaved rounds of {data['seconds']} s; added p99 = the "
        "data plane's p99 minus the upstream's in the same round.",
        "",
        "| on the proxy's CPU | added p99 per round (ms) | median |",
        "|---|---|---:|",
    ]
    for case, values in data["added_p99_ms"].items():
        rounds = ", ".join(f"{v:.3f}" for v in values)
        lines.append(f"| {case} | {rounds} | {data['median_added_p99_ms'][case]:.3f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-corunner-") as tmp:
        data = run(Path(tmp), args.rounds, args.seconds)
    write_results("corunner", data, markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
