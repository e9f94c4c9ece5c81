"""The Markdown comparison written next to the JSON."""

from __future__ import annotations

from typing import Any

from bench import (
    fleet,
    floor,
    memory,
    overload,
    progress,
    standard_client,
    tls,
    tracing,
    translation,
)


def _f(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


SCENARIO_NAMES = ("whole_c1", "whole_c64", "stream_c1", "stream_c64")
THREAD_TARGETS = (
    ("usage_off", "data plane alone"),
    ("journal_only", "data plane + journal"),
    ("gateway", "`serve` (SQLite)"),
    ("serve_postgresql", "`serve` (PostgreSQL)"),
)


def threads_table(per: dict[str, Any]) -> list[str]:
    """Per-thread cost per request at c=64 (from /proc, `bench/threads.py`): the request
    path's own CPU, the journal syncer's, the usage drainer's, the rest (the control plane's
    other jobs, the admin API), and the context switches (each a sleep and a wake-up, or a
    preemption) of all of them."""
    if not per:
        return []
    lines = ["", "Per request at c=64, from /proc (median of the rounds):", ""]
    head = ["target", "request path CPU (us)", "syncer CPU (us)", "drainer CPU (us)"]
    head += ["other CPU (us)"]
    head += ["request path switches", "all switches"]
    lines += [_row(head), _row(["---"] * len(head))]
    for name, words in THREAD_TARGETS:
        t = per.get(name)
        if not t:
            continue
        g = t["groups"]

        def cpu(label: str, g: dict[str, Any] = g) -> str:
            return _f(g[label]["cpu_us_per_request"], 1) if label in g else "-"

        path = g.get("request_path", {})
        path_switches = path.get("voluntary_switches_per_request", 0.0) + path.get(
            "involuntary_switches_per_request", 0.0
        )
        cells = [words, cpu("request_path"), cpu("journal_syncer"), cpu("drainer"), cpu("other")]
        cells += [_f(path_switches, 3), _f(t["switches_per_request"], 3)]
        lines.append(_row(cells))
    return lines


def markdown(results: dict[str, Any]) -> str:
    s = results["summary"]
    g, n, d, r = s["gateway"], s["nginx"], s["direct"], s["ratios"]
    cpu = s["cpu_seconds_per_request"]
    pin = results["pinning"]
    quick = ", quick smoke run" if results["quick"] else ""

    def frames(x: dict[str, Any]) -> str:
        return f"{x['stream_multi_event_chunks']} / {x['stream_events']}"

    # (figure, direct, nginx, gateway, gateway / nginx)
    table = [
        (
            "non-streaming c=1, added latency p50 (ms)",
            "-",
            _f(n["whole_c1_added_p50_ms"], 3),
            _f(g["whole_c1_added_p50_ms"], 3),
            _f(r["added_p50_vs_nginx"]),
        ),
        (
            "non-streaming c=1, added latency p99 (ms)",
            "-",
            _f(n["whole_c1_added_p99_ms"], 3),
            _f(g["whole_c1_added_p99_ms"], 3),
            _f(r["added_p99_vs_nginx"]),
        ),
        (
            "non-streaming c=64, throughput (req/s)",
            _f(d["whole_c64_rps"], 0),
            _f(n["whole_c64_rps"], 0),
            _f(g["whole_c64_rps"], 0),
            _f(r["throughput_c64_vs_nginx"]),
        ),
        (
            "streaming c=1, added TTFT p50 (ms)",
            "-",
            _f(n["stream_c1_added_ttft_p50_ms"], 3),
            _f(g["stream_c1_added_ttft_p50_ms"], 3),
            "",
        ),
        (
            "streaming c=1, added TTFT p99 (ms)",
            "-",
            _f(n["stream_c1_added_ttft_p99_ms"], 3),
            _f(g["stream_c1_added_ttft_p99_ms"], 3),
            "",
        ),
        (
            "streaming c=64, added TTFT p50 (ms)",
            "-",
            _f(n["stream_c64_added_ttft_p50_ms"], 3),
            _f(g["stream_c64_added_ttft_p50_ms"], 3),
            "",
        ),
        (
            "streaming c=64, inter-token gap p99 (ms)",
            "-",
            _f(n["stream_c64_gap_p99_ms"]),
            _f(g["stream_c64_gap_p99_ms"]),
            "",
        ),
        ("chunks with more than one event / events", frames(d), frames(n), frames(g), ""),
        (
            "inter-token gaps of 35-45 ms (Nagle step)",
            "-",
            str(n["stream_gaps_35_45ms"]),
            str(g["stream_gaps_35_45ms"]),
            "",
        ),
        ("errors", "-", str(n["errors"]), str(g["errors"]), ""),
        (
            "CPU-seconds per request (c=64)",
            "-",
            _f(cpu.get("nginx"), 6),
            _f(cpu.get("gateway"), 6),
            "",
        ),
    ]
    lines = [
        f"# Benchmark results ({results['when']}{quick})",
        "",
        f"Machine: {results['machine']['cpus']} CPUs. Proxy under test on CPU {pin['proxy_cpu']}; "
        f"simulator and load generator on CPU {pin['client_and_sim_cpu']}. The gateway is "
        "`sluicegate serve` with auth, limits, usage accounting and metrics on, one core worker. "
        f"Each scenario ran {s.get('rounds', 1)} rounds over its targets in turn; every figure is "
        "the median of its rounds (added latency: proxy minus direct within a round).",
        "",
        _row(["figure", "direct", "nginx", "gateway", "gateway / nginx"]),
        _row(["---"] * 5),
        *(_row(list(cells)) for cells in table),
        "",
        f"Idle RSS of the whole `serve` process: {results['idle_rss_kib'] / 1024:.1f} MiB.",
    ]
    off = s.get("usage_off")
    if off and "whole_c1_added_p50_ms" in off:
        lines += [
            "",
            "The data plane alone (`bench/bare_core.py`): every usage event produced and drained, "
            "then dropped, nothing stored; the relay as its issue scopes it:",
            "",
            _row(["figure", "nginx", "data plane", "data plane / nginx"]),
            _row(["---"] * 4),
            _row(
                [
                    "non-streaming c=1, added latency p50 (ms)",
                    _f(n["whole_c1_added_p50_ms"], 3),
                    _f(off["whole_c1_added_p50_ms"], 3),
                    _f(off["added_p50_vs_nginx"]),
                ]
            ),
            _row(
                [
                    "non-streaming c=1, added latency p99 (ms)",
                    _f(n["whole_c1_added_p99_ms"], 3),
                    _f(off["whole_c1_added_p99_ms"], 3),
                    _f(off["added_p99_vs_nginx"]),
                ]
            ),
            _row(
                [
                    "non-streaming c=64, throughput (req/s)",
                    _f(n["whole_c64_rps"], 0),
                    _f(off["whole_c64_rps"], 0),
                    _f(off["throughput_c64_vs_nginx"]),
                ]
            ),
            _row(["errors", str(n["errors"]), str(off["errors"]), ""]),
        ]
    if off:
        lines += ["", "Usage accounting priced (non-streaming c=64, all on the proxy's CPU):", ""]
        lines += [_row(["gateway", "req/s", "CPU-seconds per request"]), _row(["---"] * 3)]
        for name, words in (
            ("usage_off", "data plane alone (usage events drained and dropped)"),
            ("journal_only", "data plane + usage journal (drained, acknowledged, dropped)"),
            ("gateway", "`serve`: journal + drainer + SQLite ledger (in process)"),
            (
                "serve_postgresql",
                "`serve`: journal + drainer + PostgreSQL (its server unpinned, uncounted)",
            ),
        ):
            rps = g["whole_c64_rps"] if name == "gateway" else s.get(name, {}).get("whole_c64_rps")
            lines.append(_row([words, _f(rps, 0), _f(cpu.get(name), 6)]))
        lines += ["", f"Usage on / off: {_f(r['throughput_usage_on_vs_off'])}."]
    lines += threads_table(s.get("threads_per_request", {}))
    journal = s.get("journal_bytes_per_request", {})
    if journal:
        lines += ["", "Usage journal bytes per request (begin, progress every 16 events, end):", ""]
        lines += [_row(["target", *SCENARIO_NAMES]), _row(["---"] * (1 + len(SCENARIO_NAMES)))]
        for name, words in THREAD_TARGETS:
            if name in journal:
                lines.append(
                    _row([words, *(_f(journal[name].get(sc), 0) for sc in SCENARIO_NAMES)])
                )
    cal = results.get("calibration")
    if cal:
        configured = (
            f"TTFT {cal['configured_ttft_ms']:.0f} ms, gap {cal['configured_itl_ms']:.0f} ms"
        )
        ttft, gap = cal["ttft_overhead_p50_ms"], cal["gap_overhead_p50_ms"]
        measured = f"TTFT p50 {ttft:+.3f} ms, gap p50 {gap:+.3f} ms"
        lines += ["", f"Load generator overhead (simulator set to {configured}): {measured}."]
    mem = results.get("memory")
    if mem:
        header = ["open streams", "serve RSS (MiB)", "its idle RSS (MiB)", "added (MiB)"]
        lines += ["", "Each level in a `serve` of its own.", "", _row(header), _row(["---"] * 4)]
        for p in mem["points"]:
            mib = [p["rss_kib"] / 1024, p["idle_rss_kib"] / 1024, memory.added_kib(p) / 1024]
            lines += [_row([str(p["streams"]), *(f"{v:.1f}" for v in mib)])]
        lines += ["", memory.summary_line(mem) + "."]
    if results.get("standard_client"):
        lines += ["", standard_client.markdown(results["standard_client"])]
    if results.get("floor"):
        lines += ["", floor.markdown(results["floor"])]
    if results.get("progress"):
        lines += ["", progress.markdown(results["progress"])]
    if results.get("overload"):
        lines += ["", overload.markdown(results["overload"])]
    if results.get("tracing"):
        lines += ["", tracing.markdown(results["tracing"])]
    if results.get("translation"):
        lines += ["", translation.markdown(results["translation"])]
    if results.get("tls"):
        lines += ["", tls.markdown(results["tls"])]
    if results.get("fleet"):
        lines += ["", fleet.markdown(results["fleet"])]
    return "\n".join(lines) + "\n"
