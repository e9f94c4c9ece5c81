"""The translation scenario: what translating a stream between OpenAI's and Anthropic's APIs adds
to its time to first token. One `serve` (one CPU) with an OpenAI-kind and an Anthropic-kind pool
on the same simulator, which answers at once (a timed first token would bury a few microseconds
under its timer's slack, about 2 ms here); the load generator
(`sluicegate bench`, c=1, streaming) asks in both vocabularies, each to a pool that speaks it
(passthrough) and to one that does not (translated), in interleaved rounds. The figure is the
median per-round difference of TTFT p50 and p99, translated minus passthrough (target <= 0.2 ms
at c=1); the criterion benchmark `sse tap translating` prices one chunk alone."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

import httpx

from bench import loadgen
from bench.gateway import ADMIN_TOKEN, MODEL, SIM_HEADERS, Gateway, start_gateway
from bench.procs import cpus, start_instant_sim, write_results

CLAUDE = "bench-claude"
# Streams of 30 tokens from an upstream that sends them at once.
STREAM = ["--stream-ratio", "1", "--prompt-tokens", "fixed:100", "--output-tokens", "fixed:30"]
# (label, --api, model): the model's pool speaks `chat` (MODEL) or `messages` (CLAUDE).
TARGETS = [
    ("chat_passthrough", "chat", MODEL),
    ("chat_translated", "chat", CLAUDE),
    ("messages_passthrough", "messages", CLAUDE),
    ("messages_translated", "messages", MODEL),
]


def add_anthropic_pool(gateway: Gateway, sim: str) -> None:
    """An Anthropic-kind pool on the same simulator and a route to it, then wait until the data
    plane serves it."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    for path, body in [
        (
            "/v1/admin/providers",
            {
                "id": "sim-anthropic",
                "kind": "anthropic",
                "base_url": f"http://{sim}/v1",
                "forward_headers": SIM_HEADERS,
            },
        ),
        ("/v1/admin/pools", {"id": "anthropic", "members": [{"provider_id": "sim-anthropic"}]}),
        ("/v1/admin/routes", {"alias": CLAUDE, "chain": [{"pool": "anthropic", "model": "sim"}]}),
    ]:
        httpx.post(gateway.admin + path, json=body, headers=headers, timeout=30).raise_for_status()
    ask = {"model": CLAUDE, "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = httpx.post(
            gateway.url + "/v1/chat/completions",
            json=ask,
            headers={"Authorization": f"Bearer {gateway.key}"},
            timeout=10,
        )
        if answer.status_code == 200:
            return
        time.sleep(0.1)
    raise RuntimeError("the data plane did not take the Anthropic route")


def run(
    workdir: Path, sim: str, seconds: int, rounds: int, pinning: tuple[int | None, int | None]
) -> dict[str, Any]:
    proxy_cpu, client_cpu = pinning
    home = workdir / "translation"
    home.mkdir(parents=True)
    gateway = start_gateway(home, sim, proxy_cpu, name="translation")
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in TARGETS}
    try:
        add_anthropic_pool(gateway, sim)
        shape = [*STREAM, "--concurrency", "1", "--duration", f"{seconds}s"]
        for i in range(rounds):
            for label, api, model in TARGETS:
                runs[label].append(
                    loadgen.run(
                        home,
                        f"translation-{label}-{i + 1}",
                        gateway.url,
                        [*shape, "--api", api, "--model", model],
                        client_cpu,
                        gateway.key,
                    )
                )
    finally:
        gateway.proc.stop()
    return summary(runs)


def _added(runs: dict[str, list[dict[str, Any]]], api: str, pct: str) -> float | None:
    pairs = zip(runs[f"{api}_translated"], runs[f"{api}_passthrough"], strict=True)
    added = [t["ttft_ms"][pct] - p["ttft_ms"][pct] for t, p in pairs]
    return round(median(added), 3) if added else None


def summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "ttft_ms": {
            label: {pct: round(median(r["ttft_ms"][pct] for r in rs), 3) for pct in ("p50", "p99")}
            for label, rs in runs.items()
        },
        "added_ttft_ms": {
            api: {pct: _added(runs, api, pct) for pct in ("p50", "p99")}
            for api in ("chat", "messages")
        },
        "errors": {k: sum(int(r.get("errors", 0)) for r in v) for k, v in runs.items()},
        "rounds": len(runs["chat_translated"]),
    }


def markdown(data: dict[str, Any]) -> str:
    ttft, added = data["ttft_ms"], data["added_ttft_ms"]

    def row(api: str) -> str:
        p, t = ttft[f"{api}_passthrough"], ttft[f"{api}_translated"]
        return (
            f"| {api} client | {p['p50']} / {p['p99']} | {t['p50']} / {t['p99']} | "
            f"{added[api]['p50']} / {added[api]['p99']} | <= 0.2 |"
        )

    return "\n".join(
        [
            "## Translated streams",
            "",
            "`serve`, streaming c=1 from an upstream that answers at once, each client vocabulary",
            "to a pool that speaks it and to one that does not; TTFT p50 / p99 in ms, median of",
            f"interleaved rounds ({data['rounds']}).",
            "",
            "| | passthrough | translated | added | target (ms) |",
            "|---|---:|---:|---:|---|",
            row("chat"),
            row("messages"),
            "",
            f"Errors: {data['errors']}.",
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
    """`python -m bench.translation [--quick]`: the scenario alone, to
    bench/results/translation.* (translation-quick.* with --quick)."""
    quick = "--quick" in sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-translation-") as tmp:
        data = run_with_sim(Path(tmp), 3 if quick else 8, 2 if quick else 4, cpus())
    write_results("translation-quick" if quick else "translation", data, markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
