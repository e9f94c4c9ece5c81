"""The relay with the official SDKs: streaming, non-streaming, errors, headers, models."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from tests.core.conftest import UPSTREAM_SECRET, Relay
from tests.support.sse import events


def client(relay: Relay, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=relay.url + "/v1", api_key=key or relay.key.secret, max_retries=0)


def test_openai_sdk_non_stream_and_stream(relay: Relay) -> None:
    sdk = client(relay)
    done = sdk.chat.completions.with_raw_response.create(
        model="gpt-test", max_tokens=5, messages=[{"role": "user", "content": "hello there"}]
    )
    assert done.headers["x-request-id"] == done.headers["request-id"]
    assert done.headers["x-sluicegate-upstream"] == "p1/m1"
    completion = done.parse()
    assert completion.model == "sim-llama"
    assert completion.usage is not None and completion.usage.completion_tokens == 5
    stream = sdk.chat.completions.create(
        model="gpt-test", max_tokens=4, stream=True, messages=[{"role": "user", "content": "hi"}]
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 4
    # The client did not ask for usage: the chunk the gateway asked for is hidden.
    assert all(c.usage is None for c in chunks)
    asked = sdk.chat.completions.create(
        model="gpt-test",
        max_tokens=3,
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "hi"}],
    )
    last = list(asked)[-1]
    assert last.usage is not None and last.usage.completion_tokens == 3


def test_completions_embeddings_and_models(relay: Relay) -> None:
    sdk = client(relay)
    comp = sdk.completions.create(model="gpt-test", prompt="abcd", max_tokens=2)
    assert comp.usage is not None and comp.usage.completion_tokens == 2
    emb = sdk.embeddings.create(model="gpt-test", input=["a", "b"])
    assert len(emb.data) == 2
    assert sorted(m.id for m in sdk.models.list()) == ["claude-test", "gpt-test"]


def test_anthropic_sdk_through_messages(relay: Relay) -> None:
    sdk = anthropic.Anthropic(base_url=relay.url, api_key=relay.key.secret, max_retries=0)
    msg = sdk.messages.create(
        model="claude-test", max_tokens=3, messages=[{"role": "user", "content": "hey"}]
    )
    assert msg.usage.output_tokens == 3
    with sdk.messages.stream(
        model="claude-test", max_tokens=4, messages=[{"role": "user", "content": "hey"}]
    ) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert len(text.split()) == 4
    assert final.usage.output_tokens == 4


def test_sdk_exception_classes(relay: Relay) -> None:
    with pytest.raises(openai.AuthenticationError):
        client(relay, key="sk-sg-" + "x" * 38).models.list()
    limited = relay.config.key("k-limited", "t1", models=["claude-test"])
    relay.gateway.apply(relay.config)
    with pytest.raises(openai.PermissionDeniedError):
        client(relay, key=limited.secret).chat.completions.create(model="gpt-test", messages=[])
    with pytest.raises(openai.NotFoundError):
        client(relay).chat.completions.create(model="no-such-model", messages=[])
    with pytest.raises(openai.RateLimitError):
        client(relay).chat.completions.create(
            model="gpt-test",
            messages=[],
            extra_headers={"x-sim-fault": "status,code=429,retry_after=1"},
        )
    with pytest.raises(openai.BadRequestError):
        client(relay).chat.completions.create(
            model="gpt-test", messages=[], extra_body={"api_base": "http://evil"}
        )


def test_mid_stream_cut_raises_in_the_sdk(relay: Relay) -> None:
    sdk = client(relay)
    stream = sdk.chat.completions.create(
        model="gpt-test",
        max_tokens=10,
        stream=True,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-sim-fault": "cut,after=3"},
    )
    with pytest.raises(openai.APIError):
        list(stream)


def test_upstream_sees_its_credential_and_the_rewritten_model_only(relay: Relay) -> None:
    r = httpx.post(
        relay.url + "/v1/chat/completions",
        headers={
            **relay.key.headers,
            "x-api-key": relay.key.secret,
            "connection": "keep-alive, x-hop",
            "x-hop": "secret-hop",
            "keep-alive": "timeout=5",
            "x-sluicegate-internal": "1",
            "x-sim-echo": "1",
            "x-stainless-retry-count": "2",
        },
        json={
            "model": "gpt-test",
            "max_tokens": 1,
            "messages": [{"role": "user", "content": "x"}],
            "user": "u1",
        },
    )
    assert r.status_code == 200
    seen = r.json()["sim_request_headers"]
    assert seen["authorization"] == f"Bearer {UPSTREAM_SECRET}"
    assert relay.key.secret not in str(seen)
    assert "x-api-key" not in seen and "x-hop" not in seen and "keep-alive" not in seen
    assert "x-sluicegate-internal" not in seen
    assert seen["x-stainless-retry-count"] == "2"
    assert seen["x-request-id"] == r.headers["x-request-id"]
    forwarded = r.json()["sim_request_body"]
    assert '"model":"sim-llama"' in forwarded and '"user":"u1"' in forwarded


def test_anthropic_route_uses_x_api_key_upstream(relay: Relay) -> None:
    r = httpx.post(
        relay.url + "/v1/messages",
        headers={"x-api-key": relay.key.secret, "x-sim-echo": "1"},
        json={
            "model": "claude-test",
            "max_tokens": 1,
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert r.status_code == 200
    seen = r.json()["sim_request_headers"]
    assert seen["x-api-key"] == UPSTREAM_SECRET
    assert "authorization" not in seen
    assert seen["anthropic-version"] == "2023-06-01"


def test_the_other_api_reaches_the_pool_translated(relay: Relay) -> None:
    hello = [{"role": "user", "content": "hi"}]
    r = httpx.post(
        relay.url + "/v1/messages",
        headers=relay.key.headers,
        json={"model": "gpt-test", "max_tokens": 1, "messages": hello},
    )
    assert r.status_code == 200, r.text
    assert r.json()["type"] == "message" and r.json()["role"] == "assistant"
    # What cannot be translated is refused in the client's own format.
    r = httpx.post(
        relay.url + "/v1/messages",
        headers=relay.key.headers,
        json={"model": "gpt-test", "max_tokens": 1},
    )
    assert r.status_code == 400
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"
    assert "messages" in r.json()["error"]["message"]


def test_cors_preflight_reflects_requested_headers(relay: Relay) -> None:
    asked = "authorization, x-stainless-os, x-stainless-retry-count"
    r = httpx.options(
        relay.url + "/v1/chat/completions",
        headers={
            "origin": "https://app.example",
            "access-control-request-method": "POST",
            "access-control-request-headers": asked,
        },
    )
    assert r.status_code == 204
    assert r.headers["access-control-allow-headers"] == asked
    assert r.headers["access-control-allow-origin"] == "*"


def test_sse_frames_are_relayed_one_for_one(relay: Relay) -> None:
    with httpx.stream(
        "POST",
        relay.url + "/v1/chat/completions",
        headers=relay.key.headers,
        json={
            "model": "gpt-test",
            "stream": True,
            "max_tokens": 6,
            "stream_options": {"include_usage": True},
        },
    ) as r:
        evs = events(r.iter_lines())
    # role chunk + 6 tokens + finish chunk + usage chunk + [DONE]
    assert len(evs) == 10
    assert evs[-1]["data"] == "[DONE]"
