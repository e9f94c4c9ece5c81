"""Prices that match the invoice: the prompt tokens an upstream read from its cache or wrote to
it, and the completion tokens it spent on reasoning, stored on the usage row and billed at their
own rates (the input or output rate where the price sets none), through the real data plane
and the simulator, in both vocabularies, whole and streamed. The ledger's cost is checked
against a hand computation, and the quota counts the same cost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from tests.control.helpers import UPSTREAM_CREDENTIAL, Harness, error_fields, usage_rows
from tests.support.procs import Proc

# 40 characters: 10 prompt tokens by the shared rule; max_tokens 10: the simulator sends 10.
PROMPT = [{"role": "user", "content": "x" * 40}]
# Micro-units per million tokens, i.e. per token: input 2, cache read 0.5, cache write 2.5,
# output 3, reasoning 7.
RATES = {
    "input_micros_per_mtok": 2_000_000,
    "cached_input_micros_per_mtok": 500_000,
    "cache_write_micros_per_mtok": 2_500_000,
    "output_micros_per_mtok": 3_000_000,
    "reasoning_micros_per_mtok": 7_000_000,
}


def _gateway(harness_factory: Callable[..., Harness], sim: Proc) -> tuple[Harness, str]:
    harness = harness_factory(start_core=True)
    admin = harness.admin
    for kind in ("openai", "anthropic"):
        admin.create_provider(
            id=f"sim-{kind}",
            kind=kind,
            base_url=f"http://{sim.address}/v1",
            credential=UPSTREAM_CREDENTIAL,
            forward_headers=["x-sim-usage"],
        )
        admin.create_pool(id=f"{kind}-pool", members=[{"provider_id": f"sim-{kind}"}])
    admin.create_route(alias="gpt", chain=[{"pool": "openai-pool", "model": "sim-gpt"}])
    admin.create_route(alias="claude", chain=[{"pool": "anthropic-pool", "model": "sim-claude"}])
    for model in ("gpt", "claude"):
        created = admin.post("/v1/admin/prices", {"model": model, **RATES})
        assert created.status_code == 201, created.text
        assert created.json()["reasoning_micros_per_mtok"] == 7_000_000
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(
        tenant_id="acme", name="k", quota={"period": "monthly", "cost_micros": 10_000_000}
    )
    return harness, key


def _send(
    harness: Harness, secret: str, path: str, body: dict[str, Any], parts: str
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {secret}", "x-sim-usage": parts}
    with httpx.Client(timeout=30) as client:
        response = client.post(harness.data_url + path, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response


def test_cached_cache_write_and_reasoning_tokens_are_billed_at_their_own_rates(
    harness_factory: Callable[..., Harness], sim_factory: Callable[..., Proc]
) -> None:
    sim = sim_factory("--api-key", UPSTREAM_CREDENTIAL, "--ttft-ms", "1", "--itl-ms", "1")
    harness, key = _gateway(harness_factory, sim)
    chat = {"model": "gpt", "max_tokens": 10, "messages": PROMPT}
    messages = {"model": "claude", "max_tokens": 10, "messages": PROMPT}
    streamed = {"stream": True, "stream_options": {"include_usage": True}}
    sent = {
        # (tokens of the row: prompt, completion, cached, cache write, reasoning), cost by hand.
        "chat": (
            _send(harness, key["key"], "/v1/chat/completions", chat, "cached=6,reasoning=4"),
            (10, 10, 6, 0, 4),
            4 * 2 + 6 * 0.5 + 6 * 3 + 4 * 7,
        ),
        "chat streamed": (
            _send(
                harness,
                key["key"],
                "/v1/chat/completions",
                chat | streamed,
                "cached=6,reasoning=4",
            ),
            (10, 10, 6, 0, 4),
            4 * 2 + 6 * 0.5 + 6 * 3 + 4 * 7,
        ),
        # Anthropic's input_tokens (2 here) leaves out both cache parts; the row's prompt is all.
        "messages": (
            _send(harness, key["key"], "/v1/messages", messages, "cached=3,cache_write=5"),
            (10, 10, 3, 5, 0),
            2 * 2 + 3 * 0.5 + 5 * 2.5 + 10 * 3,
        ),
        "messages streamed": (
            _send(
                harness,
                key["key"],
                "/v1/messages",
                messages | {"stream": True},
                "cached=3,cache_write=5",
            ),
            (10, 10, 3, 5, 0),
            2 * 2 + 3 * 0.5 + 5 * 2.5 + 10 * 3,
        ),
        # A part an upstream claims beyond its whole is billed as the whole at most.
        "inflated": (
            _send(harness, key["key"], "/v1/chat/completions", chat, "cached=900,reasoning=900"),
            (10, 10, 10, 0, 10),
            10 * 0.5 + 10 * 7,
        ),
    }
    rows = usage_rows(harness, len(sent))
    total = 0
    for name, (response, tokens, cost) in sent.items():
        row = rows[response.headers["x-request-id"]]
        stored = (
            row.prompt_tokens,
            row.completion_tokens,
            row.cached_tokens,
            row.cache_write_tokens,
            row.reasoning_tokens,
        )
        assert stored == tokens, name
        assert row.cost_micros == cost, name
        total += int(cost)
    # The quota counts what the ledger billed, and the usage view shows the parts.
    quota = harness.admin.get(f"/v1/admin/keys/{key['id']}/quota").json()
    assert quota["used_cost_micros"] == total
    listed = harness.admin.get("/v1/admin/usage", key_id=key["id"]).json()["items"]
    assert sorted(r["reasoning_tokens"] for r in listed) == [0, 0, 4, 4, 10]


def test_a_price_without_part_rates_bills_the_parts_at_the_input_and_output_rates(
    harness_factory: Callable[..., Harness], sim_factory: Callable[..., Proc]
) -> None:
    sim = sim_factory("--api-key", UPSTREAM_CREDENTIAL, "--ttft-ms", "1", "--itl-ms", "1")
    harness = harness_factory(start_core=True)
    admin = harness.admin
    admin.create_provider(
        id="sim",
        base_url=f"http://{sim.address}/v1",
        credential=UPSTREAM_CREDENTIAL,
        forward_headers=["x-sim-usage"],
    )
    admin.create_pool(id="sims", members=[{"provider_id": "sim"}])
    admin.create_route(alias="gpt", chain=[{"pool": "sims", "model": "sim-gpt"}])
    flat = {"model": "gpt", "input_micros_per_mtok": 2_000_000, "output_micros_per_mtok": 3_000_000}
    created = admin.post("/v1/admin/prices", flat).json()
    assert created["cached_input_micros_per_mtok"] is None
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme", name="k")
    chat = {"model": "gpt", "max_tokens": 10, "messages": PROMPT}
    response = _send(harness, key["key"], "/v1/chat/completions", chat, "cached=6,reasoning=4")
    row = usage_rows(harness, 1)[response.headers["x-request-id"]]
    assert (row.cached_tokens, row.reasoning_tokens) == (6, 4)
    assert row.cost_micros == 10 * 2 + 10 * 3


def test_part_rates_are_checked_like_the_others(harness: Harness) -> None:
    bad = {
        "model": "gpt",
        "input_micros_per_mtok": 1,
        "output_micros_per_mtok": 1,
        "reasoning_micros_per_mtok": -1,
    }
    refused = harness.admin.post("/v1/admin/prices", bad)
    assert refused.status_code == 422
    assert set(error_fields(refused)) == {"reasoning_micros_per_mtok"}
