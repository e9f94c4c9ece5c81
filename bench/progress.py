"""What progress records cost: two `serve`s on SQLite, one journaling what each stream relayed
every 16 content events (the default `usage.progress_every_events`), one writing none (0), driven
in turn with the streaming scenario at c=64 (30 tokens 10 ms apart). Per request: the bytes the
usage journal took, the CPU of the whole process, and the throughput, each the median of
interleaved rounds. `python -m bench.progress [--quick]` runs this phase alone."""

from __future__ import annotations

import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from statistics import median
from typing import Any

from bench import loadgen
from bench.compare import JOURNAL_BYTES, STREAM
from bench.gateway import MODEL, Gateway, start_gateway
from bench.procs import cpus, start_instant_sim, write_results

SETTINGS = {"every_16": 16, "none": 0}
C64 = [*STREAM, "--concurrency", "64"]


def start(workdir: Path, sim: str, cpu: int | None, every: int) -> Gateway:
    workdir.mkdir(parents=True)
    env = {"SLUICEGATE_USAGE_PROGRESS_EVERY_EVENTS": str(every)}
    return start_gateway(workdir, sim, cpu, name=f"serve-progress-{every}", env=env)


def run(
    workdir: Path,
    sim: str,
    seconds: int,
    rounds: int,
    proxy_cpu: int | None,
    client_cpu: int | None,
) -> dict[str, Any]:
    points: dict[str, list[dict[str, float]]] = {name: [] for name in SETTINGS}
    with ExitStack() as running:
        gateways = {}
        for name, every in SETTINGS.items():
            gateway = start(workdir / name, sim, proxy_cpu, every)
            running.callback(gateway.proc.stop)
            gateways[name] = gateway
        for i in range(rounds):
            for name, gateway in gateways.items():
                cpu_before = gateway.proc.cpu_seconds()
                bytes_before = gateway.metric(JOURNAL_BYTES) or 0.0
                report = loadgen.run(
                    workdir,
                    f"progress-{name}-{i + 1}",
                    gateway.url,
                    [*C64, "--model", MODEL, "--duration", f"{seconds}s"],
                    client_cpu,
                    gateway.key,
                )
                requests = max(int(report["requests"]), 1)
                points[name].append(
                    {
                        "requests_per_s": float(report["requests_per_s"]),
                        "journal_bytes_per_request": (
                            (gateway.metric(JOURNAL_BYTES) or 0.0) - bytes_before
                        )
                        / requests,
                        "cpu_us_per_request": (gateway.proc.cpu_seconds() - cpu_before)
                        * 1e6
                        / requests,
                        "errors": float(report.get("errors", 0)),
                    }
                )
    return summary(points)


def summary(points: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        name: {
            field: round(median(p[field] for p in rows), 2)
            for field in ("requests_per_s", "journal_bytes_per_request", "cpu_us_per_request")
        }
        | {"errors": sum(p["errors"] for p in rows)}
        for name, rows in points.items()
    }
    with_, without = points["every_16"], points["none"]
    out["throughput_ratio"] = round(
        median(
            a["requests_per_s"] / b["requests_per_s"] for a, b in zip(with_, without, strict=True)
        ),
        3,
    )
    out["rounds"] = len(with_)
    return out


def markdown(data: dict[str, Any]) -> str:
    rows = [
        "## Progress records: what they cost",
        "",
        "Streaming c=64 (30 tokens, 10 ms apart) through `serve` on SQLite, with progress "
        f"records every 16 content events and with none; medians of {data['rounds']} "
        "interleaved rounds.",
        "",
        "| progress records | req/s | journal bytes / request | CPU us / request | errors |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, label in (("every_16", "every 16 events"), ("none", "none")):
        d = data[name]
        rows.append(
            f"| {label} | {d['requests_per_s']:.0f} | {d['journal_bytes_per_request']:.0f} | "
            f"{d['cpu_us_per_request']:.1f} | {d['errors']:.0f} |"
        )
    rows += ["", f"Throughput with / without: {data['throughput_ratio']}."]
    return "\n".join(rows)


def run_with_sim(
    workdir: Path, seconds: int, rounds: int, proxy_cpu: int | None, client_cpu: int | None
) -> dict[str, Any]:
    """`run` against a simulator of its own (it paces the streams' tokens itself)."""
    sim, address = start_instant_sim(workdir, client_cpu)
    try:
        return run(workdir, address, seconds, rounds, proxy_cpu, client_cpu)
    finally:
        sim.stop()


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    proxy_cpu, client_cpu = cpus()
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-progress-") as tmp:
        data = run_with_sim(Path(tmp), 3 if quick else 8, 1 if quick else 3, proxy_cpu, client_cpu)
    write_results("progress-quick" if quick else "progress", data, markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
