"""The wrappers pass the checks the plain SDKs pass through the gateway: the same calls, return
types and exception classes, sync and async, OpenAI and Anthropic."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
import sluicegate.client as sc

from tests.client.conftest import HELLO, QUICK, Stack

OpenAIFactory = Callable[..., openai.OpenAI]


def plain_openai(stack: Stack, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.openai_url, api_key=key or stack.key.secret, max_retries=0)


def wrapped_openai(stack: Stack, key: str | None = None) -> openai.OpenAI:
    return sc.OpenAI(
        base_url=stack.openai_url,
        api_key=key or stack.key.secret,
        max_retries=0,
        governor=sc.Governor(export=False),
    )


def wrapped_openai_retrying(stack: Stack, key: str | None = None) -> openai.OpenAI:
    """The wrapper as most will use it: retries on (short waits for the test's sake)."""
    return sc.OpenAI(
        base_url=stack.openai_url,
        api_key=key or stack.key.secret,
        policy=QUICK,
        governor=sc.Governor(export=False),
    )


OPENAI_CLIENTS = pytest.mark.parametrize(
    "make",
    [plain_openai, wrapped_openai, wrapped_openai_retrying],
    ids=["plain", "wrapped", "retrying"],
)


@OPENAI_CLIENTS
def test_openai_non_stream_and_stream(stack: Stack, make: OpenAIFactory) -> None:
    sdk = make(stack)
    assert isinstance(sdk, openai.OpenAI)
    raw = sdk.chat.completions.with_raw_response.create(model="gpt", max_tokens=5, messages=HELLO)
    assert raw.headers["x-request-id"] == raw.headers["request-id"]
    completion = raw.parse()
    assert isinstance(completion, openai.types.chat.ChatCompletion)
    assert completion.model == "sim-gpt"
    assert completion.usage is not None and completion.usage.completion_tokens == 5
    stream = sdk.chat.completions.create(model="gpt", max_tokens=4, stream=True, messages=HELLO)
    assert isinstance(stream, openai.Stream)
    chunks = list(stream)
    assert len("".join(c.choices[0].delta.content or "" for c in chunks if c.choices).split()) == 4
    assert all(c.usage is None for c in chunks)
    asked = sdk.chat.completions.create(
        model="gpt",
        max_tokens=3,
        stream=True,
        stream_options={"include_usage": True},
        messages=HELLO,
    )
    last = list(asked)[-1]
    assert last.usage is not None and last.usage.completion_tokens == 3
    with sdk.chat.completions.with_streaming_response.create(
        model="gpt", max_tokens=2, messages=HELLO
    ) as response:
        assert response.parse().usage.completion_tokens == 2
    assert (
        sdk.completions.create(model="gpt", prompt="abcd", max_tokens=2).usage.completion_tokens
        == 2
    )
    assert len(sdk.embeddings.create(model="gpt", input=["a", "b"]).data) == 2
    assert sorted(m.id for m in sdk.models.list()) == ["claude", "gpt"]


@OPENAI_CLIENTS
def test_openai_errors_are_the_sdks_own_classes(stack: Stack, make: OpenAIFactory) -> None:
    with pytest.raises(openai.AuthenticationError):
        make(stack, key="sk-sg-" + "x" * 38).models.list()
    limited = stack.config.key("k-limited", "t", models=["claude"])
    stack.gateway.apply(stack.config)
    with pytest.raises(openai.PermissionDeniedError):
        make(stack, key=limited.secret).chat.completions.create(model="gpt", messages=HELLO)
    sdk = make(stack)
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.create(model="no-such-model", messages=HELLO)
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(
            model="gpt", messages=HELLO, extra_body={"api_base": "http://evil"}
        )
    faults = {
        "status,code=503": openai.InternalServerError,
        "status,code=422": openai.UnprocessableEntityError,
        "status,code=429,retry_after=0.05": openai.RateLimitError,
    }
    for fault, error in faults.items():
        with pytest.raises(error) as caught:
            sdk.chat.completions.create(
                model="gpt", max_tokens=2, messages=HELLO, extra_headers={"x-sim-fault": fault}
            )
        assert caught.value.request_id  # the gateway's id, read by the SDK
    time.sleep(0.1)  # the upstream's 429 cooled its member down at the gateway for 50 ms
    stream = sdk.chat.completions.create(
        model="gpt",
        max_tokens=10,
        stream=True,
        messages=HELLO,
        extra_headers={"x-sim-fault": "cut,after=3"},
    )
    with pytest.raises(openai.APIError):
        list(stream)
    with pytest.raises(openai.APITimeoutError):
        sdk.chat.completions.create(
            model="gpt",
            max_tokens=2,
            messages=HELLO,
            timeout=0.5,
            extra_headers={"x-sim-fault": "hang"},
        )


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "wrapped"])
def test_async_openai(stack: Stack, wrapped: bool) -> None:
    async def scenario() -> None:
        kwargs: dict[str, Any] = {
            "base_url": stack.openai_url,
            "api_key": stack.key.secret,
            "max_retries": 0,
        }
        sdk = (
            sc.AsyncOpenAI(governor=sc.Governor(export=False), **kwargs)
            if wrapped
            else openai.AsyncOpenAI(**kwargs)
        )
        assert isinstance(sdk, openai.AsyncOpenAI)
        done = await sdk.chat.completions.create(model="gpt", max_tokens=3, messages=HELLO)
        assert done.usage is not None and done.usage.completion_tokens == 3
        stream = await sdk.chat.completions.create(
            model="gpt", max_tokens=4, stream=True, messages=HELLO
        )
        assert isinstance(stream, openai.AsyncStream)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert len(text.split()) == 4
        assert sorted([m.id async for m in sdk.models.list()]) == ["claude", "gpt"]
        with pytest.raises(openai.InternalServerError):
            await sdk.chat.completions.create(
                model="gpt",
                max_tokens=2,
                messages=HELLO,
                extra_headers={"x-sim-fault": "status,code=503"},
            )
        await sdk.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "wrapped"])
def test_anthropic_messages_stream_and_errors(stack: Stack, wrapped: bool) -> None:
    kwargs: dict[str, Any] = {
        "base_url": stack.anthropic_url,
        "api_key": stack.key.secret,
        "max_retries": 0,
    }
    sdk = (
        sc.Anthropic(governor=sc.Governor(export=False), **kwargs)
        if wrapped
        else anthropic.Anthropic(**kwargs)
    )
    assert isinstance(sdk, anthropic.Anthropic)
    msg = sdk.messages.create(model="claude", max_tokens=3, messages=HELLO)
    assert isinstance(msg, anthropic.types.Message) and msg.usage.output_tokens == 3
    with sdk.messages.stream(model="claude", max_tokens=4, messages=HELLO) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert len(text.split()) == 4 and final.usage.output_tokens == 4
    with pytest.raises(anthropic.NotFoundError):
        sdk.messages.create(model="nope", max_tokens=3, messages=HELLO)
    for fault, error in {
        "status,code=529": anthropic.OverloadedError,
        "status,code=500": anthropic.InternalServerError,
        "status,code=429,retry_after=0.05": anthropic.RateLimitError,
    }.items():
        with pytest.raises(error):
            sdk.messages.create(
                model="claude",
                max_tokens=3,
                messages=HELLO,
                extra_headers={"x-sim-fault": fault},
            )
    time.sleep(0.1)  # the upstream's 429 cooled its member down at the gateway for 50 ms
    with pytest.raises(anthropic.AuthenticationError):
        bad = {**kwargs, "api_key": "sk-sg-" + "x" * 38}
        (
            sc.Anthropic(governor=sc.Governor(export=False), **bad)
            if wrapped
            else anthropic.Anthropic(**bad)
        ).messages.create(
            model="claude",
            max_tokens=3,
            messages=HELLO,
        )
    with (
        pytest.raises(anthropic.APIError),
        sdk.messages.stream(
            model="claude",
            max_tokens=10,
            messages=HELLO,
            extra_headers={"x-sim-fault": "cut,after=2"},
        ) as s,
    ):
        "".join(s.text_stream)


def test_async_anthropic_wrapper(stack: Stack) -> None:
    async def scenario() -> None:
        sdk = sc.AsyncAnthropic(
            base_url=stack.anthropic_url,
            api_key=stack.key.secret,
            governor=sc.Governor(export=False),
        )
        assert isinstance(sdk, anthropic.AsyncAnthropic)
        msg = await sdk.messages.create(model="claude", max_tokens=2, messages=HELLO)
        assert msg.usage.output_tokens == 2
        async with sdk.messages.stream(model="claude", max_tokens=3, messages=HELLO) as s:
            text = "".join([t async for t in s.text_stream])
        assert len(text.split()) == 3
        await sdk.close()

    asyncio.run(scenario())


def test_copies_keep_the_governor_and_take_their_own_policy(stack: Stack) -> None:
    governor = sc.Governor(export=False)
    sdk = sc.OpenAI(
        base_url=stack.openai_url, api_key=stack.key.secret, governor=governor, policy=QUICK
    )
    copy = sdk.with_options(max_retries=0, timeout=5)
    assert (
        copy.governor is governor and copy.policy.max_attempts == 1 and sdk.policy.max_attempts == 3
    )
    assert copy.max_retries == 0 and sdk.max_retries == 0  # the SDK's own retries stay off
    with pytest.raises(openai.InternalServerError):
        copy.chat.completions.create(
            model="gpt",
            max_tokens=2,
            messages=HELLO,
            extra_headers={"x-sim-fault": "status,code=503"},
        )
    assert len(stack.records(expect=1)) == 1
    assert governor.stats()["attempts"]["max"] == 1


def test_a_given_http_client_is_governed_in_place_and_a_legacy_one_refused(stack: Stack) -> None:
    import httpx
    import httpx2

    governor = sc.Governor(export=False)
    own = httpx2.Client(timeout=30)
    sdk = sc.OpenAI(
        base_url=stack.openai_url, api_key=stack.key.secret, http_client=own, governor=governor
    )
    sdk.chat.completions.create(model="gpt", max_tokens=1, messages=HELLO)
    assert governor.stats()["calls"]["ok"] == 1
    again = sc.OpenAI(base_url=stack.openai_url, api_key=stack.key.secret, http_client=own)
    assert again.governor is governor  # a governed client keeps its governor
    with pytest.raises(ValueError):
        sc.OpenAI(api_key="x", http_client=own, governor=sc.Governor(export=False))
    with pytest.raises(TypeError):
        sc.OpenAI(api_key="x", http_client=httpx.Client())
