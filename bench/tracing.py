"""The tracing scenario: what traces cost the request path when the collector is away. Two
`serve`s on the same CPU against the instant simulator, one with tracing off, one tracing every
request (`sample_ratio = 1.0`, so every request builds and hands over its spans) to an OTLP
endpoint nobody listens on (each export fails and is counted; a full queue drops traces). Both
run the non-streaming c=64 scenario in interleaved rounds (this shared machine drifts); the
figure is the median per-round throughput of traced over untraced (target >= 0.95), with the
spans exported, dropped and lost as the traced gateway counted them."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

from bench import loadgen
from bench.compare import WHOLE
from bench.gateway import MODEL, Gateway, start_gateway
from bench.procs import cpus, start_instant_sim, write_results
from bench.services import free_port

C64 = [*WHOLE, "--concurrency", "64"]
COUNTERS = {
    "queued": "sluicegate_trace_spans_queued_total",
    "dropped": "sluicegate_trace_spans_dropped_total",
    "export_failed": "sluicegate_trace_spans_export_failed_total",
    "exported": "sluicegate_trace_spans_exported_total",
}


def start(workdir: Path, name: str, sim: str, cpu: int | None, extra: str) -> Gateway:
    home = workdir / name
    home.mkdir(parents=True)
    return start_gateway(home, sim, cpu, extra=extra, name=name)


def run(
    workdir: Path, sim: str, seconds: int, rounds: int, pinning: tuple[int | None, int | None]
) -> dict[str, Any]:
    proxy_cpu, client_cpu = pinning
    closed = free_port()
    traced_conf = (
        f'[tracing]\nendpoint = "http://127.0.0.1:{closed}/v1/traces"\nsample_ratio = 1.0\n'
    )
    gateways = {
        "off": start(workdir, "tracing-off", sim, proxy_cpu, ""),
        "on_collector_down": start(workdir, "tracing-on", sim, proxy_cpu, traced_conf),
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in gateways}
    try:
        for i in range(rounds):
            for name, gateway in gateways.items():
                runs[name].append(
                    loadgen.run(
                        workdir,
                        f"tracing-{name}-{i + 1}",
                        gateway.url,
                        [*C64, "--model", MODEL, "--duration", f"{seconds}s"],
                        client_cpu,
                        gateway.key,
                    )
                )
        traced = gateways["on_collector_down"]
        spans = {label: traced.metric(name) or 0.0 for label, name in COUNTERS.items()}
    finally:
        for gateway in gateways.values():
            gateway.proc.stop()
    return summary(runs, spans)


def summary(runs: dict[str, list[dict[str, Any]]], spans: dict[str, float]) -> dict[str, Any]:
    pairs = zip(runs["on_collector_down"], runs["off"], strict=True)
    ratios = [
        on["requests_per_s"] / off["requests_per_s"] for on, off in pairs if off["requests_per_s"]
    ]
    return {
        "c64_requests_per_s": {
            k: round(median(r["requests_per_s"] for r in v)) for k, v in runs.items()
        },
        "per_round_ratio": [round(r, 3) for r in ratios],
        "throughput_on_vs_off": round(median(ratios), 3) if ratios else None,
        "spans": spans,
        "errors": {k: sum(int(r.get("errors", 0)) for r in v) for k, v in runs.items()},
        "rounds": len(ratios),
    }


def markdown(data: dict[str, Any]) -> str:
    rps, spans = data["c64_requests_per_s"], data["spans"]
    return "\n".join(
        [
            "## Tracing with the collector away",
            "",
            "`serve` tracing every request (ratio 1.0) to an OTLP endpoint nobody listens on,",
            "against the same `serve` with tracing off; non-streaming, c=64, interleaved rounds.",
            "",
            "| | tracing off | tracing on, collector down | target |",
            "|---|---:|---:|---|",
            f"| c=64 req/s (median) | {rps['off']} | {rps['on_collector_down']} | "
            f"on/off {data['throughput_on_vs_off']} (>= 0.95) |",
            f"| per-round on/off | | {', '.join(map(str, data['per_round_ratio']))} | |",
            f"| errors | {data['errors']['off']} | {data['errors']['on_collector_down']} | 0 |",
            "",
            f"Spans handed over {spans['queued']:.0f}, dropped at the full queue "
            f"{spans['dropped']:.0f}, lost with failed exports {spans['export_failed']:.0f}, "
            f"exported {spans['exported']:.0f}.",
        ]
    )


def run_with_sim(
    workdir: Path, seconds: int, rounds: int, pinning: tuple[int | None, int | None]
) -> dict[str, Any]:
    """`run` against an instant simulator of its own."""
    sim, address = start_instant_sim(workdir / "sim", pinning[1])
    try:
        return run(workdir, address, seconds, rounds, pinning)
    finally:
        sim.stop()


def main() -> int:
    """`python -m bench.tracing [--quick]`: the scenario alone, to bench/results/tracing.*
    (tracing-quick.* with --quick)."""
    quick = "--quick" in sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-tracing-") as tmp:
        data = run_with_sim(Path(tmp), 3 if quick else 8, 2 if quick else 4, cpus())
    write_results("tracing-quick" if quick else "tracing", data, markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
