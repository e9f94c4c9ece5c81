"""The same scenarios against the simulator directly, nginx and the gateway, in one run:
non-streaming added latency at c=1 and throughput at c=64; streaming TTFT, inter-token gaps,
frame fidelity and Nagle steps at c=1 and c=64; gateway CPU-seconds per request."""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Any

from bench import loadgen, threads
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
# Bytes `serve` appended to its usage journal (begin, progress and end records).
JOURNAL_BYTES = "sluicegate_usage_journal_bytes_total"
SCENARIOS = {
    "whole_c1": [*WHOLE, "--concurrency", "1"],
    "whole_c64": [*WHOLE, "--concurrency", "64"],
    "stream_c1": [*STREAM, "--concurrency", "1"],
    "stream_c64": [*STREAM, "--concurrency", "64"],
}


# The data-plane baselines (`bench/bare_core.py`) that also run at c=1: the gateway as the relay
# issue scopes it (usage events produced and drained, nothing durable) has its own latency row.
C1_BASELINES = ("usage_off",)


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
    rounds: int = 3,
) -> dict[str, Any]:
    """Every scenario runs `rounds` times over its targets in turn, `seconds` each: a slow spell
    of this shared machine then lands on one round of every target, not on all the runs of one,
    and `summary` takes the median of the per-round figures. `baselines`: the data plane with its
    usage events drained and dropped (`usage_off`), the same journaling them (`journal_only`,
    `bench/bare_core.py`) and `serve` on PostgreSQL (`serve_postgresql`), run at c=64 (and
    `usage_off` at c=1 too), to price usage accounting on the request path."""
    endpoints = {
        name: (url, model, key, {"gateway": gateway.proc, "nginx": nginx_proc}.get(name))
        for name, (url, model, key) in targets(sim, nginx, gateway).items()
    }
    for name, baseline in (baselines or {}).items():
        endpoints[name] = (baseline.url, MODEL, baseline.key, baseline.proc)
    # `serve`s, whose /metrics say how many bytes their usage journal took.
    admins = {"gateway": gateway, **{k: v for k, v in (baselines or {}).items() if v.admin}}
    journal: dict[str, dict[str, list[float]]] = {}
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    cpu: dict[str, list[float]] = {}
    # Per thread group (request path, journal syncer, the rest), per request, each round.
    per_thread: dict[str, list[dict[str, Any]]] = {}
    for scenario, args in SCENARIOS.items():
        names = ["direct", "nginx", "gateway"]
        if scenario == "whole_c64":
            names += list(baselines or {})
        elif scenario == "whole_c1":
            names += [b for b in C1_BASELINES if b in (baselines or {})]
        results[scenario] = {name: [] for name in names}
        for i in range(rounds):
            for name in names:
                url, model, key, proc = endpoints[name]
                before = proc.cpu_seconds() if proc else 0.0
                sampled = threads.sample(proc.pid) if proc and scenario == "whole_c64" else None
                bytes_before = admins[name].metric(JOURNAL_BYTES) if name in admins else None
                report = loadgen.run(
                    workdir,
                    f"{scenario}-{name}-{i + 1}",
                    url,
                    [*args, "--model", model, "--duration", f"{seconds}s"],
                    client_cpu,
                    key,
                )
                if proc and scenario == "whole_c64":
                    used = (proc.cpu_seconds() - before) / max(report["requests"], 1)
                    cpu.setdefault(name, []).append(used)
                    if sampled is not None:
                        after = threads.sample(proc.pid)
                        costs = threads.per_request(sampled, after, int(report["requests"]))
                        per_thread.setdefault(name, []).append(costs)
                if bytes_before is not None:
                    written = (admins[name].metric(JOURNAL_BYTES) or 0.0) - bytes_before
                    by_scenario = journal.setdefault(name, {})
                    by_scenario.setdefault(scenario, []).append(
                        written / max(int(report["requests"]), 1)
                    )
                results[scenario][name].append(report)
    return {
        "reports": results,
        "cpu_seconds_per_request": {k: median(v) for k, v in cpu.items()},
        "threads_per_request": {k: threads.median_rounds(v) for k, v in per_thread.items()},
        "journal_bytes_per_request": {
            name: {scenario: round(median(v), 1) for scenario, v in by.items()}
            for name, by in journal.items()
        },
    }


def _p(report: dict[str, Any], metric: str, q: str) -> float:
    return float(report[metric][q] or 0.0)


Rounds = dict[str, dict[str, list[dict[str, Any]]]]


def _added(r: Rounds, scenario: str, proxy: str, metric: str, q: str) -> float:
    """The proxy's percentile minus the simulator's, in each round; the median of those."""
    runs = zip(r[scenario][proxy], r[scenario]["direct"], strict=True)
    return median(_p(mine, metric, q) - _p(direct, metric, q) for mine, direct in runs)


def _rps(r: Rounds, target: str) -> float:
    return median(float(x["requests_per_s"]) for x in r["whole_c64"][target])


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b > 0 else None


def _rps_ratio(r: Rounds, a: str, b: str) -> float | None:
    """Throughput of `a` over `b`, round by round (neighbouring runs); the median of those."""
    rounds = zip(r["whole_c64"][a], r["whole_c64"][b], strict=True)
    ratios = [x["requests_per_s"] / y["requests_per_s"] for x, y in rounds if y["requests_per_s"]]
    return round(median(ratios), 2) if ratios else None


def _total(r: Rounds, target: str, field: str, scenarios: tuple[str, ...]) -> int:
    return sum(int(x[field]) for s in scenarios for x in r[s][target])


def summary(data: dict[str, Any]) -> dict[str, Any]:
    """Added latency (proxy minus direct, same percentile, same round) and the ratios the targets
    are set on, each the median over the rounds."""
    r: Rounds = data["reports"]
    streams = ("stream_c1", "stream_c64")
    out: dict[str, Any] = {"rounds": len(r["whole_c64"]["direct"])}
    for proxy in ("nginx", "gateway"):
        out[proxy] = {
            "whole_c1_added_p50_ms": _added(r, "whole_c1", proxy, "total_ms", "p50"),
            "whole_c1_added_p99_ms": _added(r, "whole_c1", proxy, "total_ms", "p99"),
            "whole_c64_rps": _rps(r, proxy),
            "stream_c1_added_ttft_p50_ms": _added(r, "stream_c1", proxy, "ttft_ms", "p50"),
            "stream_c1_added_ttft_p99_ms": _added(r, "stream_c1", proxy, "ttft_ms", "p99"),
            "stream_c64_added_ttft_p50_ms": _added(r, "stream_c64", proxy, "ttft_ms", "p50"),
            "stream_c64_gap_p99_ms": median(_p(x, "gap_ms", "p99") for x in r["stream_c64"][proxy]),
            "stream_multi_event_chunks": _total(r, proxy, "multi_event_chunks", streams),
            "stream_events": _total(r, proxy, "events", streams),
            "stream_gaps_35_45ms": _total(r, proxy, "gaps_35_45ms", streams),
            "errors": _total(r, proxy, "errors", tuple(r)),
        }
    out["direct"] = {
        "whole_c1_p50_ms": median(_p(x, "total_ms", "p50") for x in r["whole_c1"]["direct"]),
        "whole_c64_rps": _rps(r, "direct"),
        "stream_multi_event_chunks": _total(r, "direct", "multi_event_chunks", streams),
        "stream_events": _total(r, "direct", "events", streams),
    }
    g, n = out["gateway"], out["nginx"]
    out["ratios"] = {
        "added_p50_vs_nginx": _ratio(g["whole_c1_added_p50_ms"], n["whole_c1_added_p50_ms"]),
        "added_p99_vs_nginx": _ratio(g["whole_c1_added_p99_ms"], n["whole_c1_added_p99_ms"]),
        "throughput_c64_vs_nginx": _rps_ratio(r, "gateway", "nginx"),
        "throughput_c64_vs_direct": _rps_ratio(r, "gateway", "direct"),
    }
    for name in ("usage_off", "journal_only", "serve_postgresql"):
        if name in r["whole_c64"]:
            out[name] = {
                "whole_c64_rps": _rps(r, name),
                "throughput_c64_vs_nginx": _rps_ratio(r, name, "nginx"),
                "errors": _total(r, name, "errors", ("whole_c64",)),
            }
    if "usage_off" in r["whole_c1"]:
        off = out["usage_off"]
        off["whole_c1_added_p50_ms"] = _added(r, "whole_c1", "usage_off", "total_ms", "p50")
        off["whole_c1_added_p99_ms"] = _added(r, "whole_c1", "usage_off", "total_ms", "p99")
        off["added_p50_vs_nginx"] = _ratio(off["whole_c1_added_p50_ms"], n["whole_c1_added_p50_ms"])
        off["added_p99_vs_nginx"] = _ratio(off["whole_c1_added_p99_ms"], n["whole_c1_added_p99_ms"])
        off["errors"] += _total(r, "usage_off", "errors", ("whole_c1",))
    if "usage_off" in out:
        out["ratios"]["throughput_usage_on_vs_off"] = _rps_ratio(r, "gateway", "usage_off")
    out["cpu_seconds_per_request"] = data["cpu_seconds_per_request"]
    out["threads_per_request"] = data.get("threads_per_request", {})
    out["journal_bytes_per_request"] = data.get("journal_bytes_per_request", {})
    return out
