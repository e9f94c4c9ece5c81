"""Exactly one usage event per routed request, agreeing with the simulator's own record of what it
sent, through normal ends, cut streams, missing usage, upstream errors and client disconnects."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import httpx

from tests.core.conftest import Relay
from tests.support.jsonl import whole_lines

CHAT = "/v1/chat/completions"


def read_record(relay: Relay, expect: int, timeout: float = 5.0) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    rows: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        rows = {r["request_id"]: r for r in whole_lines(relay.record)}
        if len(rows) >= expect:
            break
        time.sleep(0.05)
    return rows


def stream(
    relay: Relay,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
    stop_after: int | None = None,
) -> str:
    """Stream a request; hang up after `stop_after` content lines. Returns the request id."""
    seen = 0
    with httpx.stream(
        "POST",
        relay.url + CHAT,
        json=body,
        headers={**relay.key.headers, **(headers or {})},
        timeout=10,
    ) as r:
        request_id = r.headers["x-request-id"]
        try:
            for line in r.iter_lines():
                if '"content":" ' in line:
                    seen += 1
                    if stop_after is not None and seen >= stop_after:
                        break
        except httpx.RemoteProtocolError:
            pass
    return request_id


def test_usage_events_match_the_simulators_record(relay: Relay) -> None:
    msg = [{"role": "user", "content": "x" * 41}]  # 11 prompt tokens by the shared rule
    base = {"model": "gpt-test", "messages": msg, "max_tokens": 8}
    ids: dict[str, str] = {}
    r = httpx.post(relay.url + CHAT, json=base, headers=relay.key.headers)
    ids["whole"] = r.headers["x-request-id"]
    ids["stream"] = stream(relay, {**base, "stream": True})
    ids["stream_usage"] = stream(
        relay, {**base, "stream": True, "stream_options": {"include_usage": True}}
    )
    ids["cut"] = stream(relay, {**base, "stream": True}, {"x-sim-fault": "cut,after=3"})
    ids["cut_done"] = stream(
        relay, {**base, "stream": True}, {"x-sim-fault": "cut,after=5,done=true"}
    )
    ids["no_usage"] = stream(relay, {**base, "stream": True}, {"x-sim-fault": "no_usage"})
    ids["malformed"] = stream(relay, {**base, "stream": True}, {"x-sim-fault": "malformed,after=2"})
    r = httpx.post(
        relay.url + CHAT, json=base, headers={**relay.key.headers, "x-sim-fault": "no_usage"}
    )
    whole_no_usage_text = r.json()["choices"][0]["message"]["content"]
    ids["whole_no_usage"] = r.headers["x-request-id"]
    r = httpx.post(
        relay.url + CHAT, json=base, headers={**relay.key.headers, "x-sim-fault": "status,code=500"}
    )
    assert r.status_code == 500
    ids["status_500"] = r.headers["x-request-id"]
    long = {**base, "stream": True, "max_tokens": 400}
    ids["disconnect"] = stream(relay, long, {"x-sim-itl-ms": "20"}, stop_after=3)
    anthropic = httpx.post(
        relay.url + "/v1/messages",
        headers=relay.key.headers,
        json={"model": "claude-test", "max_tokens": 4, "messages": msg, "stream": True},
    )
    ids["anthropic"] = anthropic.headers["x-request-id"]

    events = {e["request_id"]: e for e in relay.gateway.drain(expect=len(ids))}
    record = read_record(relay, expect=len(ids))
    assert set(events) == set(ids.values())
    assert len(relay.gateway.events) == len(ids), "exactly one event per request"
    for name, request_id in ids.items():
        event, truth = events[request_id], record[request_id]
        assert event["prompt_tokens"] == truth["prompt_tokens"], name
        if name == "disconnect":
            # The simulator counts tokens written before it noticed; the gateway those it relayed.
            assert (
                3
                <= event["completion_tokens"]
                <= truth["completion_tokens"]
                <= event["completion_tokens"] + 3
            )
        elif name == "whole_no_usage":
            # No usage and no token stream to count: the documented text estimate, flagged so.
            assert event["completion_tokens"] == -(-len(whole_no_usage_text) // 4)
        else:
            assert event["completion_tokens"] == truth["completion_tokens"], name

    assert events[ids["whole"]]["usage_source"] == "upstream"
    assert events[ids["stream"]]["usage_source"] == "upstream"
    for name in ["cut", "cut_done", "no_usage", "whole_no_usage", "disconnect"]:
        assert events[ids[name]]["usage_source"] == "estimated", name
    assert events[ids["cut"]]["outcome"] == "upstream_error"
    assert events[ids["disconnect"]]["outcome"] == "client_cancelled"
    assert events[ids["status_500"]]["status"] == 500
    assert events[ids["status_500"]]["completion_tokens"] == 0
    assert events[ids["stream"]]["ttft_ms"] > 0 and events[ids["stream"]]["tpot_ms"] > 0
    for event in events.values():
        assert event["key_id"] == "k1" and event["tenant_id"] == "t1"
        assert event["upstream"] in {"m1", "a1"}


def test_client_disconnect_cancels_the_upstream_within_a_second(relay: Relay) -> None:
    long = {
        "model": "gpt-test",
        "stream": True,
        "max_tokens": 2000,
        "messages": [{"role": "user", "content": "x"}],
    }
    request_id = stream(relay, long, {"x-sim-itl-ms": "10"}, stop_after=2)
    hung_up = time.time()
    with contextlib.suppress(httpx.ReadTimeout):
        httpx.post(
            relay.url + CHAT,
            json={**long, "stream": False},
            headers={**relay.key.headers, "x-sim-fault": "hang"},
            timeout=0.5,
        )
    hung_up_whole = time.time()
    record = read_record(relay, expect=2)
    row = record[request_id]
    assert row["outcome"] == "client_disconnected"
    assert row["ended_at"] - hung_up < 1.0
    (hang,) = [r for rid, r in record.items() if rid != request_id]
    assert hang["outcome"] == "hang"
    assert hang["ended_at"] - hung_up_whole < 1.0
    events = relay.gateway.drain(expect=2)
    assert sorted(e["outcome"] for e in events) == ["client_cancelled", "client_cancelled"]
