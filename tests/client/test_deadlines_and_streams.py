"""Deadlines reach the gateway and the upstream; a stream is never retried once it began."""

from __future__ import annotations

import time
from dataclasses import replace

import openai
import pytest
from sluicegate.client import AsyncOpenAI, Governor, OpenAI, Policy

from tests.client.conftest import HELLO, QUICK, Stack

GENEROUS = dict(budget_ratio=1.0, budget_min_per_second=10.0, export=False)


def test_a_hang_ends_at_the_deadline_at_the_gateway_and_upstream_too(stack: Stack) -> None:
    governor = Governor(**GENEROUS)
    sdk = OpenAI(
        base_url=stack.openai_url, api_key=stack.key.secret, governor=governor, policy=QUICK
    )
    began = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        sdk.chat.completions.create(
            model="gpt",
            max_tokens=2,
            messages=HELLO,
            timeout=1.5,
            extra_headers={"x-sim-fault": "hang"},
        )
    waited = time.monotonic() - began
    assert 1.3 <= waited < 1.7, waited
    # The gateway stopped at the deadline the client sent (1.5 s less its 0.1 s margin) and
    # cancelled the upstream request, whose record ends then, not at the pool's 120 s.
    (event,) = stack.events(expect=1)
    assert event["outcome"] == "timeout"
    assert 1350 <= event["duration_ms"] <= 1500, event["duration_ms"]
    (row,) = stack.records(expect=1)
    assert row["outcome"] == "hang"
    assert 1.3 <= row["ended_at"] - row["started_at"] <= 1.5
    # Nothing was left for another attempt.
    time.sleep(0.3)
    assert len(stack.records()) == 1
    stats = governor.stats()
    assert stats["calls"]["timeout"] == 1


def test_the_deadline_of_every_call_is_below_the_gateways_own(stack: Stack) -> None:
    # The pool would wait 120 s for a first byte; a call with no timeout of its own gets the
    # policy's deadline, and the gateway ends the request there.
    policy = replace(QUICK, deadline=1.0)
    governor = Governor(export=False)
    sdk = OpenAI(
        base_url=stack.openai_url, api_key=stack.key.secret, governor=governor, policy=policy
    )
    with pytest.raises(openai.APITimeoutError):
        sdk.chat.completions.create(
            model="gpt", max_tokens=2, messages=HELLO, extra_headers={"x-sim-fault": "hang"}
        )
    (event,) = stack.events(expect=1)
    assert event["outcome"] == "timeout" and 850 <= event["duration_ms"] <= 1000


def test_a_stream_cut_after_its_first_tokens_is_not_retried(stack: Stack) -> None:
    governor = Governor(**GENEROUS)
    sdk = OpenAI(
        base_url=stack.openai_url,
        api_key=stack.key.secret,
        governor=governor,
        policy=replace(QUICK, max_attempts=5),
    )
    stream = sdk.chat.completions.create(
        model="gpt",
        max_tokens=10,
        stream=True,
        messages=HELLO,
        extra_headers={"x-sim-fault": "cut,after=3"},
    )
    received: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert len(received) == 3
    time.sleep(0.3)
    (row,) = stack.records(expect=1)
    assert row["outcome"] == "cut"
    (event,) = stack.events(expect=1)
    assert event["outcome"] == "upstream_error" and event["client_retry_count"] == 0
    stats = governor.stats()
    assert stats["calls"]["stream_error"] == 1 and stats["retries"] == 0


def test_a_stream_that_stalls_ends_at_the_deadline_without_a_retry(stack: Stack) -> None:
    governor = Governor(**GENEROUS)
    sdk = OpenAI(
        base_url=stack.openai_url, api_key=stack.key.secret, governor=governor, policy=QUICK
    )
    began = time.monotonic()
    with pytest.raises(openai.APIError):
        for _ in sdk.chat.completions.create(
            model="gpt",
            max_tokens=10,
            stream=True,
            messages=HELLO,
            timeout=1.0,
            extra_headers={"x-sim-fault": "hang_after,after=2"},
        ):
            pass
    assert time.monotonic() - began < 1.2
    (event,) = stack.events(expect=1)
    assert event["outcome"] == "timeout" and event["duration_ms"] <= 1000
    time.sleep(0.2)
    assert len(stack.records(expect=1)) == 1


def test_async_streams_and_a_hang_under_a_deadline(stack: Stack) -> None:
    import asyncio

    governor = Governor(**GENEROUS)
    policy = Policy(deadline=1.0, backoff_base=0.02, backoff_cap=0.1)

    async def scenario() -> None:
        sdk = AsyncOpenAI(
            base_url=stack.openai_url, api_key=stack.key.secret, governor=governor, policy=policy
        )
        stream = await sdk.chat.completions.create(
            model="gpt", max_tokens=4, stream=True, messages=HELLO
        )
        text = [c.choices[0].delta.content async for c in stream if c.choices]
        assert len("".join(t or "" for t in text).split()) == 4
        with pytest.raises(openai.APITimeoutError):
            await sdk.chat.completions.create(
                model="gpt", max_tokens=2, messages=HELLO, extra_headers={"x-sim-fault": "hang"}
            )
        await sdk.close()

    asyncio.run(scenario())
    events = sorted(stack.events(expect=2), key=lambda e: e["started_at"])
    assert [e["outcome"] for e in events] == ["complete", "timeout"]
    assert events[1]["duration_ms"] <= 1000
    assert governor.stats()["in_flight"] == 0
