"""`make demo`: the whole product on one machine, every figure measured in this run.

Two simulated upstreams behind one model alias, the data plane in front, a burst of streaming
and non-streaming traffic from a tenant key, then the latency table and the key's usage.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from sluicegate import _core
from sluicegate.stats import latency_table

PEPPER = "demo-pepper-0123456789abcdef"
REQUESTS = 240
CONCURRENCY = 24


@dataclass
class Result:
    status: int
    stream: bool
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    total_ms: float = 0.0
    tokens: int = 0
    timed_out: bool = False


@dataclass
class Run:
    results: list[Result] = field(default_factory=list)


async def one_request(client: httpx.AsyncClient, url: str, key: str, i: int) -> Result:
    stream = i % 3 != 0
    body = {
        "model": "demo-chat",
        "stream": stream,
        "max_tokens": 20 + (i * 7) % 60,
        "messages": [{"role": "user", "content": "Tell me about sluice gates. " * (1 + i % 5)}],
    }
    headers = {"Authorization": f"Bearer {key}"}
    start = time.perf_counter()
    stamps: list[float] = []
    try:
        if not stream:
            r = await client.post(url, json=body, headers=headers)
            total = (time.perf_counter() - start) * 1000
            tokens = (
                r.json().get("usage", {}).get("completion_tokens", 0) if r.status_code == 200 else 0
            )
            return Result(r.status_code, False, total_ms=total, tokens=tokens)
        async with client.stream("POST", url, json=body, headers=headers) as r:
            async for line in r.aiter_lines():
                if (
                    line.startswith("data: {")
                    and '"content":"' in line
                    and '"content":""' not in line
                ):
                    stamps.append(time.perf_counter())
            status = r.status_code
    except httpx.TimeoutException:
        return Result(0, stream, total_ms=(time.perf_counter() - start) * 1000, timed_out=True)
    end = time.perf_counter()
    ttft = (stamps[0] - start) * 1000 if stamps else None
    tpot = (end - stamps[0]) * 1000 / (len(stamps) - 1) if len(stamps) > 1 else None
    return Result(status, True, ttft, tpot, (end - start) * 1000, len(stamps))


async def burst(url: str, key: str) -> Run:
    run = Run()
    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(REQUESTS):
            queue.put_nowait(i)

        async def worker() -> None:
            while not queue.empty():
                run.results.append(await one_request(client, url, key, queue.get_nowait()))

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return run


def config(sims: list[_core.Simulator], key: str) -> str:
    members = [
        {"id": f"sim-{i}", "kind": "openai", "base_url": f"http://{s.address}/v1"}
        for i, s in enumerate(sims)
    ]
    return json.dumps(
        {
            "auth": {"key_pepper": PEPPER},
            "tenants": [{"id": "acme"}],
            "keys": [
                {
                    "id": "acme-key-1",
                    "tenant_id": "acme",
                    "hash": _core.hash_api_key(PEPPER, key),
                    "prefix": _core.api_key_prefix(key),
                }
            ],
            "pools": [{"id": "sims", "members": members}],
            "routes": [{"alias": "demo-chat", "chain": [{"pool": "sims", "model": "sim-llm"}]}],
        }
    )


def main() -> int:
    sims = [
        _core.Simulator(
            ["--port", "0", "--ttft-ms", "lognormal:120:0.3", "--itl-ms", "lognormal:15:0.2"]
        )
        for _ in range(2)
    ]
    core = _core.Core()
    key = _core.generate_api_key()
    core.apply_config(1, config(sims, key))
    address = core.start("127.0.0.1:0")
    print(f"simulators: {', '.join(s.address for s in sims)}; gateway: http://{address}")
    print(f"burst: {REQUESTS} requests (2/3 streaming) at concurrency {CONCURRENCY} ...")
    started = time.perf_counter()
    run = asyncio.run(burst(f"http://{address}/v1/chat/completions", key))
    elapsed = time.perf_counter() - started
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + 5
    while len(events) < REQUESTS and time.monotonic() < deadline:
        events.extend(json.loads(core.drain_usage(1000, 100)))
    core.stop(5)
    for s in sims:
        s.stop()

    ok = [r for r in run.results if r.status == 200]
    streams = [r for r in ok if r.stream]
    timeout_rate = sum(r.timed_out for r in run.results) / len(run.results)
    rate = len(run.results) / elapsed
    summary = f"{len(ok)}/{len(run.results)} ok, timeout rate {timeout_rate:.2%}, {rate:.1f} req/s"
    print(f"\nclient view: {summary}")
    print(
        latency_table(
            {
                "ttft": [r.ttft_ms for r in streams if r.ttft_ms is not None],
                "tpot": [r.tpot_ms for r in streams if r.tpot_ms is not None],
                "total (stream)": [r.total_ms for r in streams],
                "total (whole)": [r.total_ms for r in ok if not r.stream],
            }
        )
    )
    print("\ngateway view (usage events):")
    print(
        latency_table(
            {
                "queue wait": [e["queue_wait_ms"] for e in events],
                "connect": [e["connect_ms"] for e in events if e["connect_ms"] is not None],
                "ttft": [e["ttft_ms"] for e in events if e["ttft_ms"] is not None],
                "tpot": [e["tpot_ms"] for e in events if e["tpot_ms"] is not None],
                "total": [e["duration_ms"] for e in events],
            }
        )
    )
    prompt = sum(e["prompt_tokens"] for e in events)
    completion = sum(e["completion_tokens"] for e in events)
    by_upstream: dict[str, int] = {}
    for e in events:
        by_upstream[e["upstream"]] = by_upstream.get(e["upstream"], 0) + 1
    tokens = f"{prompt} prompt + {completion} completion tokens"
    print(f"\nkey acme-key-1: {len(events)} requests, {tokens}; by upstream {by_upstream}")
    return 0 if len(ok) == len(run.results) and len(events) == REQUESTS else 1


if __name__ == "__main__":
    sys.exit(main())
