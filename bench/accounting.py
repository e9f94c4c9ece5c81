"""What usage accounting costs per request, in figures that repeat on a busy machine: a fixed
number of non-streaming requests at c=64 through one target, with each thread's CPU time and
context switches read from /proc before and after (`bench/threads.py`), and optionally the
futex calls of each thread group counted by `strace -f -ff`.

    python -m bench.accounting [--target usage_off|journal_only|serve] [--requests N]
                               [--concurrency C] [--strace]

`usage_off` is the data plane with its events drained and dropped, `journal_only` the same
journaling them (`bench/bare_core.py`), `serve` the whole product on SQLite. CPU times depend on
the machine's load; context switches and futex calls per request much less so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import loadgen, threads
from bench.compare import WHOLE
from bench.gateway import MODEL, Gateway, start_bare_core, start_gateway
from bench.procs import cpus, start_instant_sim


def start_target(name: str, workdir: Path, sim: str, cpu: int | None) -> Gateway:
    if name == "serve":
        return start_gateway(workdir, sim, cpu)
    return start_bare_core(workdir, sim, cpu, journal=name == "journal_only")


def futex_calls(traces: Path, pid: int) -> dict[str, int]:
    """futex calls per thread group, from `strace -ff` (one file per thread, named by its id)."""
    calls: dict[str, int] = {}
    for trace in traces.parent.glob(traces.name + ".*"):
        tid = trace.suffix.lstrip(".")
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            name = "ended"
        text = trace.read_text(errors="replace")
        count = sum(1 for line in text.splitlines() if line.startswith("futex("))
        label = threads.group(name)
        calls[label] = calls.get(label, 0) + count
    return calls


def measure(
    gateway: Gateway, workdir: Path, requests: int, concurrency: int, cpu: int | None, strace: bool
) -> dict[str, Any]:
    args = [*WHOLE, "--concurrency", str(concurrency), "--model", MODEL, "--duration", "600s"]
    # Warm up connections, allocator and caches, then the measured run.
    loadgen.run(workdir, "warmup", gateway.url, [*args, "--requests", "2000"], cpu, gateway.key)
    tracer = None
    traces = workdir / "strace"
    if strace:
        tracer = subprocess.Popen(
            [
                "strace",
                "-f",
                "-ff",
                "-e",
                "trace=futex",
                "-o",
                str(traces),
                "-p",
                str(gateway.proc.pid),
            ],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached to every thread
    before = threads.sample(gateway.proc.pid)
    report = loadgen.run(
        workdir, "measured", gateway.url, [*args, "--requests", str(requests)], cpu, gateway.key
    )
    after = threads.sample(gateway.proc.pid)
    result = threads.per_request(before, after, int(report["requests"]))
    result["errors"] = report["errors"]
    if tracer is not None:
        tracer.send_signal(2)
        tracer.wait(30)
        n = max(int(report["requests"]), 1)
        calls = futex_calls(traces, gateway.proc.pid)
        result["futex_calls_per_request"] = {k: round(v / n, 4) for k, v in sorted(calls.items())}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.accounting")
    parser.add_argument(
        "--target", choices=["usage_off", "journal_only", "serve"], default="journal_only"
    )
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--strace", action="store_true", help="count futex calls (slows the target)"
    )
    opts = parser.parse_args()
    proxy_cpu, client_cpu = cpus()
    with tempfile.TemporaryDirectory(prefix="sg-accounting-") as tmp:
        workdir = Path(tmp)
        sim, address = start_instant_sim(workdir / "sim", client_cpu)
        try:
            gateway = start_target(opts.target, workdir, address, proxy_cpu)
            try:
                result = measure(
                    gateway, workdir, opts.requests, opts.concurrency, client_cpu, opts.strace
                )
            finally:
                gateway.proc.stop()
        finally:
            sim.stop()
    print(json.dumps({"target": opts.target, **result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
