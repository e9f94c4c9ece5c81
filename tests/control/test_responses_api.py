"""`POST /v1/responses` through the real data plane and the simulator, with the official openai
SDK as the client: whole and streamed answers, their usage rows (input, cached, output and
reasoning tokens from the response's `usage`, priced as the ledger prices them), the output cap
written into the body, a stream cut midway ended with an error the SDK raises, and the calls
that need state an upstream keeps (`previous_response_id`, `conversation`, `background`,
`/v1/responses/{id}`) refused with a 400 that says why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from tests.control.helpers import UPSTREAM_CREDENTIAL, Harness, usage_rows
from tests.support.procs import Proc

# 40 characters: 10 input tokens by the shared rule.
PROMPT = "x" * 40
# Micro-units per token: input 2, cache read 0.5, output 3, reasoning 7.
RATES = {
    "input_micros_per_mtok": 2_000_000,
    "cached_input_micros_per_mtok": 500_000,
    "output_micros_per_mtok": 3_000_000,
    "reasoning_micros_per_mtok": 7_000_000,
}
# 10 prompt tokens (6 of them cached), 10 output tokens (4 of them reasoning), by hand.
COST = 4 * 2 + 6 * 0.5 + 6 * 3 + 4 * 7
PARTS = {"x-sim-usage": "cached=6,reasoning=4"}
# The simulator's text: its vocabulary in order, a token each.
TEN_TOKENS = " the gate opens and water flows through a narrow sluice"


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
            forward_headers=["x-sim-usage", "x-sim-fault"],
        )
        admin.create_pool(id=f"{kind}-pool", members=[{"provider_id": f"sim-{kind}"}])
    admin.create_route(alias="gpt", chain=[{"pool": "openai-pool", "model": "sim-gpt"}])
    admin.create_route(
        alias="gpt-short",
        chain=[{"pool": "openai-pool", "model": "sim-gpt"}],
        max_output_tokens=3,
    )
    admin.create_route(alias="claude", chain=[{"pool": "anthropic-pool", "model": "sim-claude"}])
    created = admin.post("/v1/admin/prices", {"model": "gpt", **RATES})
    assert created.status_code == 201, created.text
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(
        tenant_id="acme", name="k", quota={"period": "monthly", "cost_micros": 10_000_000}
    )
    return harness, key


def sdk(harness: Harness, key: dict[str, Any]) -> openai.OpenAI:
    return openai.OpenAI(base_url=harness.data_url + "/v1", api_key=key["key"], max_retries=0)


def test_whole_and_streamed_responses_reach_the_sdk_and_bill_their_usage_parts(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    client = sdk(harness, key)
    raw = client.responses.with_raw_response.create(
        model="gpt", input=PROMPT, max_output_tokens=10, extra_headers=PARTS
    )
    whole = raw.parse()
    # The simulator stops at the cap asked for: the answer is whole, cut at max_output_tokens.
    assert whole.object == "response" and whole.status == "incomplete"
    assert whole.output_text == TEN_TOKENS
    assert whole.model == "sim-gpt"
    assert whole.usage is not None
    assert (whole.usage.input_tokens, whole.usage.output_tokens) == (10, 10)
    assert whole.usage.input_tokens_details.cached_tokens == 6
    assert whole.usage.output_tokens_details.reasoning_tokens == 4

    stream = client.responses.create(
        model="gpt",
        instructions="x" * 20,
        input=[{"role": "user", "content": [{"type": "input_text", "text": "x" * 20}]}],
        max_output_tokens=10,
        stream=True,
        extra_headers=PARTS,
    )
    streamed_id = stream.response.headers["x-request-id"]
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.incomplete"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == TEN_TOKENS and len(deltas) == 10
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert final.usage is not None and final.usage.output_tokens == 10

    found = usage_rows(harness, 2)
    for request_id, stream_flag in ((raw.headers["x-request-id"], False), (streamed_id, True)):
        row = found[request_id]
        assert (row.endpoint, row.stream, row.outcome, row.status) == (
            "responses",
            stream_flag,
            "complete",
            200,
        )
        assert (row.model, row.upstream_model, row.usage_source) == ("gpt", "sim-gpt", "upstream")
        parts = (
            row.prompt_tokens,
            row.completion_tokens,
            row.cached_tokens,
            row.cache_write_tokens,
            row.reasoning_tokens,
        )
        assert parts == (10, 10, 6, 0, 4)
        assert row.cost_micros == COST
        if stream_flag:
            assert row.ttft_ms is not None and row.ttft_ms > 0
    quota = harness.admin.get(f"/v1/admin/keys/{key['id']}/quota").json()
    assert quota["used_cost_micros"] == 2 * COST


def test_the_output_cap_is_written_into_the_body_the_upstream_gets(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    client = sdk(harness, key)
    # The route caps answers at 3 tokens: a request for 100,000 is sent upstream with 3, and a
    # request with no cap gets the route's.
    for asked in (100_000, None):
        extra = {} if asked is None else {"max_output_tokens": asked}
        answer = client.responses.create(model="gpt-short", input=PROMPT, **extra)
        assert answer.status == "incomplete"
        assert answer.incomplete_details is not None
        assert answer.incomplete_details.reason == "max_output_tokens"
        assert answer.usage is not None and answer.usage.output_tokens == 3
    events = list(client.responses.create(model="gpt-short", input=PROMPT, stream=True))
    assert events[-1].type == "response.incomplete"
    assert len([e for e in events if e.type == "response.output_text.delta"]) == 3
    found = usage_rows(harness, 3)
    assert sorted((r.completion_tokens, r.outcome) for r in found.values()) == [(3, "complete")] * 3


def test_a_stream_cut_midway_ends_with_an_error_the_sdk_raises_and_a_row(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    client = sdk(harness, key)
    stream = client.responses.create(
        model="gpt",
        input=PROMPT,
        max_output_tokens=10,
        stream=True,
        extra_headers={"x-sim-fault": "cut,after=3"},
    )
    request_id = stream.response.headers["x-request-id"]
    seen: list[str] = []
    with pytest.raises(openai.APIError) as raised:
        for event in stream:
            seen.append(event.type)
    assert "response.completed" not in seen
    assert seen.count("response.output_text.delta") == 3
    assert raised.value.body is not None
    row = usage_rows(harness, 1)[request_id]
    assert (row.endpoint, row.outcome) == ("responses", "upstream_error")
    assert row.completion_tokens == 3


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("previous_response_id", "resp_0123"),
        ("conversation", "conv_0123"),
        ("background", True),
    ],
)
def test_requests_that_need_stored_state_are_refused_naming_the_field(
    gateway: tuple[Harness, dict[str, Any]], field: str, value: object
) -> None:
    harness, key = gateway
    with pytest.raises(openai.BadRequestError) as refused:
        sdk(harness, key).responses.create(model="gpt", input=PROMPT, extra_body={field: value})
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["param"] == field
    assert "'input'" in body["message"]
    assert usage_rows(harness, 0) == {}


def test_files_and_vector_stores_of_the_shared_account_are_refused(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    client = sdk(harness, key)
    file_input = [
        {"role": "user", "content": [{"type": "input_file", "file_id": "file-0123"}]},
    ]
    search = [{"type": "file_search", "vector_store_ids": ["vs_0123"]}]
    for extra, field in (({"input": file_input}, "input"), ({"tools": search}, "tools")):
        body = {"input": PROMPT, **extra}
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="gpt", **body)  # type: ignore[call-overload]
        error = refused.value.body
        assert isinstance(error, dict) and error["param"] == field
        assert "stored in the upstream account" in error["message"]


def test_stored_responses_are_not_relayed_and_the_refusal_says_why(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    client = sdk(harness, key)
    for call in (
        lambda: client.responses.retrieve("resp_0123"),
        lambda: client.responses.delete("resp_0123"),
        lambda: client.responses.cancel("resp_0123"),
        lambda: client.responses.input_items.list("resp_0123"),
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            call()
        assert "not relayed" in refused.value.message
    # A path that is no endpoint at all is still not found.
    missing = httpx.get(
        harness.data_url + "/v1/responsesx", headers={"Authorization": f"Bearer {key['key']}"}
    )
    assert missing.status_code == 404


def test_a_route_whose_pools_do_not_serve_responses_refuses_them(
    gateway: tuple[Harness, dict[str, Any]],
) -> None:
    harness, key = gateway
    with pytest.raises(openai.BadRequestError) as refused:
        sdk(harness, key).responses.create(model="claude", input=PROMPT)
    assert "not served on responses" in refused.value.message
