"""A retry storm that does not happen: 100 clients in one process call at a steady rate through
a 10 s upstream outage (every request answered 503), and the upstream sees at most 1.1x the
rate it saw before. The same run with the plain SDKs' defaults (two retries per call) is
printed beside it; only ours is asserted.

Rates are counted from the simulator's record, in the healthy seconds before the outage and
over the outage. The pool's own retries and ejection are off, so the upstream sees exactly what
the clients send. About 40 s of wall time: 100 asyncio tasks, one process, one thread."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import openai
import sluicegate.client as sc

from tests.client.conftest import HELLO, Stack

CLIENTS = 100
PERIOD = 2.0  # each client calls once every 2 s: 50 calls/s in all
HEALTHY = 6.0
OUTAGE = 10.0
AFTER = 2.0


@dataclass
class Run:
    healthy_rate: float
    outage_rate: float
    calls: int
    failed: int

    @property
    def ratio(self) -> float:
        return self.outage_rate / self.healthy_rate


async def storm(stack: Stack, make: Callable[[], openai.AsyncOpenAI]) -> Run:
    clients = [make() for _ in range(CLIENTS)]
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.2
    end = start + HEALTHY + OUTAGE + AFTER
    counts = {"calls": 0, "failed": 0}

    async def client(i: int, sdk: openai.AsyncOpenAI) -> None:
        due = start + i * PERIOD / CLIENTS  # spread evenly over a period
        while due < end:
            await asyncio.sleep(max(0.0, due - loop.time()))
            counts["calls"] += 1
            try:
                await sdk.chat.completions.create(model="gpt", max_tokens=4, messages=HELLO)
            except openai.APIError:
                counts["failed"] += 1
            due += PERIOD
            while due < loop.time():  # a call that overran its turn does not queue more
                due += PERIOD

    async def outage() -> tuple[float, float]:
        await asyncio.sleep(start + HEALTHY - loop.time())
        await asyncio.to_thread(stack.set_faults, "status=1,code=503")
        began = time.time()
        await asyncio.sleep(OUTAGE)
        await asyncio.to_thread(stack.set_faults)
        return began, time.time()

    unix_start = time.time() + (start - loop.time())
    window, *_ = await asyncio.gather(outage(), *(client(i, c) for i, c in enumerate(clients)))
    for c in clients:
        await c.close()
    began, ended = window
    rows = stack.records()
    settled = unix_start + 1.0  # past the first period's ramp
    healthy = sum(settled <= r["started_at"] < began for r in rows) / (began - settled)
    during = sum(began <= r["started_at"] < ended for r in rows) / (ended - began)
    return Run(healthy, during, counts["calls"], counts["failed"])


def test_an_outage_does_not_turn_into_a_retry_storm(stack_factory: Callable[..., Stack]) -> None:
    ours_stack = stack_factory("--workers", "1")
    governor = sc.Governor(export=False)  # what the process's default governor is
    ours = asyncio.run(
        storm(
            ours_stack,
            lambda: sc.AsyncOpenAI(
                base_url=ours_stack.openai_url, api_key=ours_stack.key.secret, governor=governor
            ),
        )
    )
    plain_stack = stack_factory("--workers", "1")
    plain = asyncio.run(
        storm(
            plain_stack,
            lambda: openai.AsyncOpenAI(
                base_url=plain_stack.openai_url, api_key=plain_stack.key.secret
            ),
        )
    )
    for name, run in (("sluicegate.client", ours), ("plain SDK defaults", plain)):
        print(
            f"\n{name:>18}: upstream {run.healthy_rate:5.1f}/s healthy, "
            f"{run.outage_rate:5.1f}/s in the outage = {run.ratio:.2f}x "
            f"({run.calls} calls, {run.failed} failed)"
        )
    stats = governor.stats()
    print(f"{'':>18}  retries {stats['retries']}, budget {stats['budget']}")
    assert ours.healthy_rate > 0.9 * CLIENTS / PERIOD, ours  # the load was what it should be
    assert ours.ratio <= 1.1, ours
