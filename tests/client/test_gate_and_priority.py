"""The process's concurrency gate and the priority class, seen at the gateway."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import openai
import pytest
import sluicegate.client as sc
from sluicegate.client import AsyncOpenAI, Governor, OpenAI

from tests.client.conftest import HELLO, QUICK, Stack


def max_overlap(events: list[dict[str, Any]]) -> int:
    """Most requests the gateway had in hand at once, from its usage events."""
    edges = [(e["started_at"], 1) for e in events]
    edges += [(e["started_at"] + e["duration_ms"] / 1000, -1) for e in events]
    running = peak = 0
    for _, step in sorted(edges, key=lambda x: (x[0], x[1])):
        running += step
        peak = max(peak, running)
    return peak


def test_the_gate_bounds_calls_in_flight_and_refuses_past_the_waiting_line(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(ttft_ms="fixed:400")
    governor = Governor(max_in_flight=2, max_waiting=1, export=False)
    sdk = OpenAI(
        base_url=stack.openai_url, api_key=stack.key.secret, governor=governor, policy=QUICK
    )
    start = threading.Barrier(5)
    outcomes: list[str] = []
    refused_after: list[float] = []

    def one() -> None:
        start.wait()
        began = time.monotonic()
        try:
            sdk.chat.completions.create(model="gpt", max_tokens=1, messages=HELLO)
            outcomes.append("ok")
        except sc.ConcurrencyLimitExceeded as error:
            assert isinstance(error, openai.APIConnectionError)  # the SDK's own class too
            refused_after.append(time.monotonic() - began)
            outcomes.append("refused")

    threads = [threading.Thread(target=one) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(outcomes) == ["ok", "ok", "ok", "refused", "refused"]
    assert max(refused_after) < 0.3  # refused at once, not after waiting
    events = stack.events(expect=3)
    assert len(events) == 3 and max_overlap(events) == 2
    assert len(stack.records(expect=3)) == 3
    stats = governor.stats()
    assert stats["calls"]["refused"] == 2 and stats["in_flight"] == 0


def test_async_tasks_share_the_gate_and_wait_their_turn(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(ttft_ms="fixed:200")
    governor = Governor(max_in_flight=3, max_waiting=20, export=False)

    async def scenario() -> list[str]:
        clients = [
            AsyncOpenAI(base_url=stack.openai_url, api_key=stack.key.secret, governor=governor)
            for _ in range(4)
        ]
        calls = [
            c.chat.completions.create(model="gpt", max_tokens=1, messages=HELLO)
            for c in clients
            for _ in range(3)
        ]
        answers = await asyncio.gather(*calls)
        return [a.id for a in answers]

    assert len(asyncio.run(scenario())) == 12
    events = stack.events(expect=12)
    assert len(events) == 12 and max_overlap(events) == 3
    stats = governor.stats()
    assert stats["calls"]["ok"] == 12 and stats["waiting"] == 0


def test_priority_is_sent_and_can_only_lower_the_keys_class(
    stack_factory: Callable[..., Stack], governor: Governor
) -> None:
    stack = stack_factory()
    batch_key = stack.config.key("k-batch", "t", priority="batch")
    stack.gateway.apply(stack.config)
    url = stack.openai_url
    plain = OpenAI(base_url=url, api_key=stack.key.secret, governor=governor)
    low = OpenAI(base_url=url, api_key=stack.key.secret, governor=governor, priority="batch")
    asks_more = OpenAI(
        base_url=url, api_key=batch_key.secret, governor=governor, priority="interactive"
    )
    for sdk in (plain, low, plain.with_options(priority="batch"), asks_more):
        sdk.chat.completions.create(model="gpt", max_tokens=1, messages=HELLO)
    events = sorted(stack.events(expect=4), key=lambda e: e["started_at"])
    assert [e["priority"] for e in events] == ["interactive", "batch", "batch", "batch"]
    with pytest.raises(ValueError):
        OpenAI(base_url=url, api_key=stack.key.secret, priority="urgent")
