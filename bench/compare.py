"""The same scenarios against the simulator directly, nginx and the gateway, in one run:
non-streaming added latency at c=1 and throughput at c=64; streaming TTFT, inter-token gaps,
frame fidelity and Nagle steps at c=1 and c=64; gateway CPU-seconds per request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import loadgen
from bench.gateway import MODEL, Gateway
from bench.procs import Proc

# Non-streaming: an upstream that answers at once, so the figures are the proxies' own cost.
WHOLE = ["--stream-ratio", "0", "--prompt-tokens", "fixed:100", "--output-tokens", "fixed:16"]
# Streaming: 20 ms to the first token, then one every 10 ms.
STREAM = [
    "--stream-ratio",
    "1",
    "--prompt-tokens",
    "fixed:100",
    "--output-tokens",
    "fixed:30",
    "--header",
    "x-sim-ttft-ms: 20",
    "--header",
    "x-sim-itl-ms: 10",
]
SCENARIOS = {
    "whole_c1": [*WHOLE, "--concurrency", "1"],
    "whole_c64": [*WHOLE, "--concurrency", "64"],
    "stream_c1": [*STREAM, "--concurrency", "1"],
    "stream_c64": [*STREAM, "--concurrency", "64"],
}


def targets(sim: str, nginx: str, gateway: Gateway) -> dict[str, tuple[str, str, str | None]]:
    return {
        "direct": (f"http://{sim}", "sim-model", None),
        "nginx": (f"http://{nginx}", "sim-model", None),
        "gateway": (gateway.url, MODEL, gateway.key),
    }


def run(
    workdir: Path,
    sim: str,
    nginx: str,
    gateway: Gateway,
    nginx_proc: Proc,
    seconds: int,
    client_cpu: int | None,
    baselines: dict[str, Gateway] | None = None,
) -> dict[str, Any]:
    """`baselines`: the data plane alone (`usage_off`), journaling only (`journal_only`,
    `bench/bare_core.py`) and `serve` on PostgreSQL (`serve_postgresql`), run at c=64 only, to
    price usage accounting on the request path."""
    results: dict[str, dict[str, Any]] = {}
    cpu: dict[str, float] = {}
    for scenario, args in SCENARIOS.items():
        results[scenario] = {}
        for target, (url, model, key) in targets(sim, nginx, gateway).items():
            proc = {"gateway": gateway.proc, "nginx": nginx_proc}.get(target)
            before = proc.cpu_seconds() if proc else 0.0
            report = loadgen.run(
                workdir,
                f"{scenario}-{target}",
                url,
                [*args, "--model", model, "--duration", f"{seconds}s"],
                client_cpu,
                key,
            )
            if proc and scenario == "whole_c64":
                cpu[target] = (proc.cpu_seconds() - before) / max(report["requests"], 1)
            results[scenario][target] = report
    for name, baseline in (baselines or {}).items():
        before = baseline.proc.cpu_seconds()
        report = loadgen.run(
            workdir,
            f"whole_c64-{name}",
            baseline.url,
            [*SCENARIOS["whole_c64"], "--model", MODEL, "--duration", f"{seconds}s"],
            client_cpu,
            baseline.key,
        )
        cpu[name] = (baseline.proc.cpu_seconds() - before) / max(report["requests"], 1)
        results["whole_c64"][name] = report
    return {"reports": results, "cpu_seconds_per_request": cpu}


def _p(report: dict[str, Any], metric: str, q: str) -> float:
    return float(report[metric][q] or 0.0)


def summary(data: dict[str, Any]) -> dict[str, Any]:
    """Added latency (proxy minus direct, same percentile) and the ratios the targets are set on."""
    r = data["reports"]
    out: dict[str, Any] = {}
    for proxy in ("nginx", "gateway"):
        whole = r["whole_c1"]
        stream = r["stream_c1"]
        out[proxy] = {
            "whole_c1_added_p50_ms": _p(whole[proxy], "total_ms", "p50")
            - _p(whole["direct"], "total_ms", "p50"),
            "whole_c1_added_p99_ms": _p(whole[proxy], "total_ms", "p99")
            - _p(whole["direct"], "total_ms", "p99"),
            "whole_c64_rps": r["whole_c64"][proxy]["requests_per_s"],
            "stream_c1_added_ttft_p50_ms": _p(stream[proxy], "ttft_ms", "p50")
            - _p(stream["direct"], "ttft_ms", "p50"),
            "stream_c1_added_ttft_p99_ms": _p(stream[proxy], "ttft_ms", "p99")
            - _p(stream["direct"], "ttft_ms", "p99"),
            "stream_c64_added_ttft_p50_ms": _p(r["stream_c64"][proxy], "ttft_ms", "p50")
            - _p(r["stream_c64"]["direct"], "ttft_ms", "p50"),
            "stream_c64_gap_p99_ms": _p(r["stream_c64"][proxy], "gap_ms", "p99"),
            "stream_multi_event_chunks": sum(
                r[s][proxy]["multi_event_chunks"] for s in ("stream_c1", "stream_c64")
            ),
            "stream_events": sum(r[s][proxy]["events"] for s in ("stream_c1", "stream_c64")),
            "stream_gaps_35_45ms": sum(
                r[s][proxy]["gaps_35_45ms"] for s in ("stream_c1", "stream_c64")
            ),
            "errors": sum(r[s][proxy]["errors"] for s in r),
        }
    out["direct"] = {
        "whole_c1_p50_ms": _p(r["whole_c1"]["direct"], "total_ms", "p50"),
        "whole_c64_rps": r["whole_c64"]["direct"]["requests_per_s"],
        "stream_multi_event_chunks": sum(
            r[s]["direct"]["multi_event_chunks"] for s in ("stream_c1", "stream_c64")
        ),
        "stream_events": sum(r[s]["direct"]["events"] for s in ("stream_c1", "stream_c64")),
    }
    g, n = out["gateway"], out["nginx"]

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 2) if b > 0 else None

    out["ratios"] = {
        "added_p50_vs_nginx": ratio(g["whole_c1_added_p50_ms"], n["whole_c1_added_p50_ms"]),
        "added_p99_vs_nginx": ratio(g["whole_c1_added_p99_ms"], n["whole_c1_added_p99_ms"]),
        "throughput_c64_vs_nginx": ratio(g["whole_c64_rps"], n["whole_c64_rps"]),
        "throughput_c64_vs_direct": ratio(g["whole_c64_rps"], out["direct"]["whole_c64_rps"]),
    }
    for name in ("usage_off", "journal_only", "serve_postgresql"):
        if name in r["whole_c64"]:
            out[name] = {"whole_c64_rps": r["whole_c64"][name]["requests_per_s"]}
    if "usage_off" in out:
        out["ratios"]["throughput_usage_on_vs_off"] = ratio(
            g["whole_c64_rps"], out["usage_off"]["whole_c64_rps"]
        )
    out["cpu_seconds_per_request"] = data["cpu_seconds_per_request"]
    return out
