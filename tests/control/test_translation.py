"""OpenAI <-> Anthropic translation through the real data plane and the simulator, with the
official SDKs as clients: an OpenAI-SDK application reaching an Anthropic pool and an
Anthropic-SDK agent reaching an OpenAI-compatible pool, whole and streamed, text and a tool
round trip; usage rows as the upstream counted them; fields with no counterpart refused with a
400 in the client's own format; upstream errors translated; and a chain "Anthropic pool, then
OpenAI pool" that falls back on a drill with no client error for either SDK."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.control.helpers import UPSTREAM_CREDENTIAL, Harness, usage_rows
from tests.support.procs import Proc

# 40 characters: 10 input tokens by the shared rule.
PROMPT = "x" * 40
TEN_TOKENS = " the gate opens and water flows through a narrow sluice"
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather in a city",
    "schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    },
}
OPENAI_TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": WEATHER_TOOL["name"],
            "description": WEATHER_TOOL["description"],
            "parameters": WEATHER_TOOL["schema"],
        },
    }
]
ANTHROPIC_TOOLS: Any = [
    {
        "name": WEATHER_TOOL["name"],
        "description": WEATHER_TOOL["description"],
        "input_schema": WEATHER_TOOL["schema"],
    }
]
# What the simulator fills a schema's required fields with.
SIM_ARGUMENTS = {"city": "sim", "days": 1}


@pytest.fixture
def gateway(
    harness_factory: Callable[..., Harness], sim_factory: Callable[..., Proc]
) -> tuple[Harness, dict[str, Any]]:
    sim = sim_factory("--api-key", UPSTREAM_CREDENTIAL, "--ttft-ms", "1", "--itl-ms", "1")
    harness = harness_factory(start_core=True)
    admin = harness.admin
    for kind in ("openai", "anthropic"):
        admin.create_provider(
            id=f"sim-{kind}",
            kind=kind,
            base_url=f"http://{sim.address}/v1",
            credential=UPSTREAM_CREDENTIAL,
            forward_headers=["x-sim-fault"],
        )
        admin.create_pool(id=f"{kind}-pool", members=[{"provider_id": f"sim-{kind}"}])
    # An OpenAI client on an Anthropic pool, an Anthropic client on an OpenAI pool.
    admin.create_route(alias="claude", chain=[{"pool": "anthropic-pool", "model": "sim-claude"}])
    admin.create_route(alias="gpt", chain=[{"pool": "openai-pool", "model": "sim-gpt"}])
    admin.create_route(
        alias="both",
        chain=[
            {"pool": "anthropic-pool", "model": "sim-claude"},
            {"pool": "openai-pool", "model": "sim-gpt"},
        ],
    )
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme", name="k")
    return harness, key


def openai_sdk(harness: Harness, key: dict[str, Any]) -> openai.OpenAI:
    return openai.OpenAI(base_url=harness.data_url + "/v1", api_key=key["key"], max_retries=0)


def anthropic_sdk(harness: Harness, key: dict[str, Any]) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=harness.data_url, api_key=key["key"], max_retries=0)


def test_the_openai_sdk_reaches_an_anthropic_pool(gateway: tuple[Harness, dict[str, Any]]) -> None:
    harness, key = gateway
    client = openai_sdk(harness, key)
    raw = client.chat.completions.with_raw_response.create(
        model="claude",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": PROMPT}],
        max_tokens=10,
    )
    whole = raw.parse()
    assert whole.object == "chat.completion"
    assert whole.model == "sim-claude"
    assert whole.choices[0].message.content == TEN_TOKENS
    assert whole.choices[0].finish_reason == "length"
    assert whole.usage is not None and whole.usage.completion_tokens == 10

    stream = client.chat.completions.create(
        model="claude",
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=10,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == TEN_TOKENS
    assert chunks[0].choices[0].delta.role == "assistant"
    finished = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert [f for f in finished if f] == ["length"]
    usage = [c.usage for c in chunks if c.usage]
    assert len(usage) == 1 and usage[0].completion_tokens == 10

    # Without include_usage the client gets no usage, as from OpenAI itself.
    quiet = client.chat.completions.create(
        model="claude", messages=[{"role": "user", "content": PROMPT}], max_tokens=3, stream=True
    )
    assert not [c for c in quiet if c.usage]

    recorded = usage_rows(harness, 3)
    row = recorded[raw.headers["x-request-id"]]
    assert (row.prompt_tokens, row.completion_tokens) == (whole.usage.prompt_tokens, 10)
    assert row.usage_source == "upstream"


def test_the_anthropic_sdk_reaches_an_openai_pool(gateway: tuple[Harness, dict[str, Any]]) -> None:
    harness, key = gateway
    client = anthropic_sdk(harness, key)
    raw = client.messages.with_raw_response.create(
        model="gpt",
        system="be brief",
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=10,
    )
    message = raw.parse()
    assert message.type == "message" and message.model == "sim-gpt"
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == TEN_TOKENS  # type: ignore[union-attr]
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 10

    with client.messages.stream(
        model="gpt", messages=[{"role": "user", "content": PROMPT}], max_tokens=10
    ) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == TEN_TOKENS
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 10

    recorded = usage_rows(harness, 2)
    row = recorded[raw.headers["x-request-id"]]
    assert (row.prompt_tokens, row.completion_tokens) == (message.usage.input_tokens, 10)


def test_an_openai_tool_round_trip_through_an_anthropic_pool(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    client = openai_sdk(harness, key)
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Oslo?"}]
    first = client.chat.completions.create(
        model="claude", messages=messages, tools=OPENAI_TOOLS, max_tokens=50
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == SIM_ARGUMENTS

    # The same, streamed: the argument fragments add up to the same object.
    stream = client.chat.completions.create(
        model="claude", messages=messages, tools=OPENAI_TOOLS, max_tokens=50, stream=True
    )
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in stream:
        for c in chunk.choices:
            finish = c.finish_reason or finish
            for tc in c.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += tc.id or ""
                entry["name"] += (tc.function.name or "") if tc.function else ""
                entry["arguments"] += (tc.function.arguments or "") if tc.function else ""
    assert finish == "tool_calls"
    assert calls[0]["name"] == "get_weather" and calls[0]["id"]
    assert json.loads(calls[0]["arguments"]) == SIM_ARGUMENTS

    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})
    answer = client.chat.completions.create(
        model="claude", messages=messages, tools=OPENAI_TOOLS, max_tokens=50
    )
    assert answer.choices[0].finish_reason == "stop"
    assert (answer.choices[0].message.content or "").startswith("tool result: sunny")


def test_an_anthropic_tool_round_trip_through_an_openai_pool(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    client = anthropic_sdk(harness, key)
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Oslo?"}]
    first = client.messages.create(
        model="gpt", messages=messages, tools=ANTHROPIC_TOOLS, max_tokens=50
    )
    assert first.stop_reason == "tool_use"
    uses = [b for b in first.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather"
    assert uses[0].input == SIM_ARGUMENTS

    with client.messages.stream(
        model="gpt", messages=messages, tools=ANTHROPIC_TOOLS, max_tokens=50
    ) as stream:
        streamed = stream.get_final_message()
    assert streamed.stop_reason == "tool_use"
    streamed_uses = [b for b in streamed.content if b.type == "tool_use"]
    assert streamed_uses[0].input == SIM_ARGUMENTS

    messages.append({"role": "assistant", "content": [u.model_dump() for u in uses]})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny"}],
        }
    )
    answer = client.messages.create(
        model="gpt", messages=messages, tools=ANTHROPIC_TOOLS, max_tokens=50
    )
    assert answer.stop_reason == "end_turn"
    assert answer.content[0].text.startswith("tool result: sunny")  # type: ignore[union-attr]


def test_what_cannot_be_translated_is_refused_in_the_clients_format(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    with pytest.raises(openai.BadRequestError) as refused:
        openai_sdk(harness, key).chat.completions.create(
            model="claude",
            messages=[{"role": "user", "content": PROMPT}],
            max_tokens=5,
            logit_bias={"50256": -100},
        )
    body: Any = refused.value.body
    assert refused.value.param == "logit_bias" or body.get("param") == "logit_bias"
    assert "logit_bias" in refused.value.message

    with pytest.raises(anthropic.BadRequestError) as refused_anthropic:
        anthropic_sdk(harness, key).messages.create(
            model="gpt",
            messages=[{"role": "user", "content": PROMPT}],
            max_tokens=5,
            extra_body={"top_k": 5},
        )
    error: Any = refused_anthropic.value.body
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "top_k" in error["error"]["message"]


def test_upstream_errors_reach_the_client_in_its_own_format(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    fault = {"x-sim-fault": "status,code=400"}
    answer = httpx.post(
        harness.data_url + "/v1/messages",
        headers={"x-api-key": key["key"], **fault},
        json={"model": "gpt", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
        timeout=10,
    )
    assert answer.status_code == 400
    body = answer.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"]

    answer = httpx.post(
        harness.data_url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {key['key']}", **fault},
        json={"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
        timeout=10,
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["message"]


def test_a_cross_provider_chain_falls_back_on_a_drill_for_both_sdks(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    admin = harness.admin
    oai = openai_sdk(harness, key)
    ant = anthropic_sdk(harness, key)

    def both_ask() -> tuple[str, str, str, str]:
        chat = oai.chat.completions.with_raw_response.create(
            model="both", messages=[{"role": "user", "content": PROMPT}], max_tokens=5
        )
        msg = ant.messages.with_raw_response.create(
            model="both", messages=[{"role": "user", "content": PROMPT}], max_tokens=5
        )
        chat.parse()
        msg.parse()
        return (
            chat.parse().model,
            msg.parse().model,
            chat.headers.get("x-sluicegate-fallback", ""),
            msg.headers.get("x-sluicegate-fallback", ""),
        )

    # Before: the Anthropic pool serves both clients (the OpenAI one translated).
    assert both_ask() == ("sim-claude", "sim-claude", "", "")
    # The route "claude" has no other pool: the drill leaves it dark, on purpose.
    drill = admin.post(
        "/v1/admin/drills",
        {"route": "both", "pool": "anthropic-pool", "seconds": 60, "allow_outage": True},
    )
    assert drill.status_code == 201, drill.text
    # Every answer while the drill reaches the core is a good one, from either pool.
    switched = until(both_ask, lambda a: a[0] == "sim-gpt")
    during = [both_ask() for _ in range(5)]
    # During: the OpenAI pool serves both (the Anthropic client translated), no error.
    assert set(during) == {("sim-gpt", "sim-gpt", "1", "1")}
    assert switched
    assert admin.delete(f"/v1/admin/drills/{drill.json()['id']}").status_code == 200
    assert until(both_ask, lambda a: a[0] == "sim-claude")
    assert both_ask() == ("sim-claude", "sim-claude", "", "")


def until(ask: Callable[[], Any], done: Callable[[Any], bool]) -> bool:
    """Ask (every answer must be a good one: the SDKs raise on errors) until `done` holds."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if done(ask()):
            return True
        time.sleep(0.02)
    return False
