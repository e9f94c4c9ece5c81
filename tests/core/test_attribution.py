"""Cost attribution below the key, on the data plane: `x-sluicegate-tags` and the end user the
body names (OpenAI `user`, Anthropic `metadata.user_id`) reach the request's usage event; both
are bounded, what exceeds a bound is refused with a 400 in the client's API format naming it,
and the tags header never goes upstream."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.core.conftest import Relay

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
HELLO = [{"role": "user", "content": "hi"}]


def _event(relay: Relay, request_id: str) -> dict[str, object]:
    for _ in range(3):
        for e in relay.gateway.drain(1):
            if e["request_id"] == request_id:
                return e
    raise AssertionError(f"no usage event for {request_id}")


def test_tags_and_end_users_reach_the_usage_event_in_each_vocabulary(relay: Relay) -> None:
    headers = {**relay.key.headers, "x-sluicegate-tags": "team=search, feature=ac"}
    body = {"model": "gpt-test", "max_tokens": 2, "messages": HELLO, "user": "u-42"}
    chat = httpx.post(relay.url + CHAT, json=body, headers=headers)
    assert chat.status_code == 200, chat.text
    event = _event(relay, chat.headers["x-request-id"])
    assert json.loads(str(event["tags"])) == {"feature": "ac", "team": "search"}
    assert event["end_user"] == "u-42"

    body = {"model": "claude-test", "max_tokens": 2, "messages": HELLO}
    body["metadata"] = {"user_id": "claude-user"}
    messages = httpx.post(relay.url + MESSAGES, json=body, headers=relay.key.headers)
    assert messages.status_code == 200, messages.text
    event = _event(relay, messages.headers["x-request-id"])
    assert (event["tags"], event["end_user"]) == (None, "claude-user")


def test_the_tags_header_never_goes_upstream(relay: Relay) -> None:
    headers = {**relay.key.headers, "x-sluicegate-tags": "team=search", "x-sim-echo": "1"}
    body = {"model": "gpt-test", "max_tokens": 2, "messages": HELLO}
    answer = httpx.post(relay.url + CHAT, json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    received = answer.json()["sim_request_headers"]
    assert "x-sim-echo" in received, "the echo names what reached the simulator"
    assert "x-sluicegate-tags" not in received


@pytest.mark.parametrize(
    ("tags", "why"),
    [
        (",".join(f"t{i}=v" for i in range(11)), "at most 10 tags"),
        ("team=" + "v" * 65, "1 to 64"),
        ("t" * 33 + "=v", "1 to 32"),
        ("team=search,team=ads", "appears twice"),
        ("team", "NAME=VALUE"),
        ("Team=search", "a-z"),
    ],
)
def test_tags_beyond_their_bounds_are_refused_by_name(relay: Relay, tags: str, why: str) -> None:
    headers = {**relay.key.headers, "x-sluicegate-tags": tags}
    body = {"model": "gpt-test", "max_tokens": 2, "messages": HELLO}
    refused = httpx.post(relay.url + CHAT, json=body, headers=headers)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "x-sluicegate-tags" and why in error["message"]
    # Anthropic clients get Anthropic's error format.
    body = {"model": "claude-test", "max_tokens": 2, "messages": HELLO}
    refused = httpx.post(relay.url + MESSAGES, json=body, headers=headers)
    assert refused.status_code == 400
    assert refused.json()["type"] == "error"
    assert "x-sluicegate-tags" in refused.json()["error"]["message"] or why in refused.text


def test_an_end_user_beyond_its_bound_is_refused(relay: Relay) -> None:
    body = {"model": "gpt-test", "max_tokens": 2, "messages": HELLO, "user": "u" * 257}
    refused = httpx.post(relay.url + CHAT, json=body, headers=relay.key.headers)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "user"
    body = {"model": "gpt-test", "max_tokens": 2, "messages": HELLO, "user": 42}
    refused = httpx.post(relay.url + CHAT, json=body, headers=relay.key.headers)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "user"
    body = {"model": "claude-test", "max_tokens": 2, "messages": HELLO}
    body["metadata"] = {"user_id": "a\nb"}
    refused = httpx.post(relay.url + MESSAGES, json=body, headers=relay.key.headers)
    assert refused.status_code == 400 and "metadata.user_id" in refused.text
