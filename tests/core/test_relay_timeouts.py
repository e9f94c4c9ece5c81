"""Each upstream timeout maps to its own clear error, and to a `timeout` usage event."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.support.gateway import ConfigBuilder, member
from tests.support.sse import events

CHAT = "/v1/chat/completions"
TIMEOUTS = {"connect_ms": 300, "first_byte_ms": 400, "idle_ms": 300, "total_ms": 600}


@pytest.fixture
def relay(relay_factory):
    return relay_factory("--ttft-ms", "5", "--itl-ms", "2", timeouts=TIMEOUTS)


def test_first_byte_timeout_is_504(relay) -> None:
    start = time.monotonic()
    r = httpx.post(
        relay.url + CHAT,
        headers={**relay.key.headers, "x-sim-fault": "hang"},
        json={"model": "gpt-test", "stream": True},
    )
    assert 0.35 < time.monotonic() - start < 2.0
    assert r.status_code == 504
    assert r.json()["error"]["type"] == "upstream_timeout"
    (event,) = relay.gateway.drain(expect=1)
    assert event["outcome"] == "timeout" and event["status"] == 504


def test_total_deadline_of_a_whole_answer_is_504(relay) -> None:
    r = httpx.post(
        relay.url + CHAT,
        headers={**relay.key.headers, "x-sim-ttft-ms": "3000"},
        json={"model": "gpt-test"},
    )
    assert r.status_code == 504 and r.json()["error"]["code"] == "upstream_timeout"


def test_first_token_and_idle_timeouts_end_the_stream_with_an_error_event(relay) -> None:
    for headers in [{"x-sim-ttft-ms": "3000"}, {"x-sim-fault": "hang_after,after=2"}]:
        with httpx.stream(
            "POST",
            relay.url + CHAT,
            headers={**relay.key.headers, **headers},
            json={"model": "gpt-test", "stream": True, "max_tokens": 10},
        ) as r:
            assert r.status_code == 200
            evs = events(r.iter_lines())
        last = evs[-1]["data"]
        assert last["error"]["type"] == "upstream_timeout"
        assert all(e["data"] != "[DONE]" for e in evs)
    outcomes = [e["outcome"] for e in relay.gateway.drain(expect=2)]
    assert outcomes == ["timeout", "timeout"]


def test_a_stream_longer_than_the_idle_timeout_whose_gaps_are_shorter_completes(relay) -> None:
    # 12 tokens 100 ms apart: 1.2 s in all, four idle timeouts (300 ms), no gap near one. The
    # relay's one timer rings at the idle deadline it was set for and is set again from the
    # last chunk; it must not end a stream that never went quiet.
    start = time.monotonic()
    with httpx.stream(
        "POST",
        relay.url + CHAT,
        headers={**relay.key.headers, "x-sim-itl-ms": "100", "x-sim-output-tokens": "12"},
        json={"model": "gpt-test", "stream": True, "max_tokens": 12},
        timeout=10,
    ) as r:
        assert r.status_code == 200
        evs = events(r.iter_lines())
    assert time.monotonic() - start > 1.0
    assert evs[-1]["data"] == "[DONE]"
    assert not any(isinstance(e["data"], dict) and "error" in e["data"] for e in evs)
    (event,) = relay.gateway.drain(expect=1)
    assert event["outcome"] == "complete" and event["completion_tokens"] == 12


def test_connect_refused_is_502(gateway_factory) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t")
    cfg.pool("p", [member("m", f"127.0.0.1:{port}")], timeouts=TIMEOUTS).route(
        "gpt-test", ("p", "x")
    )
    gw = gateway_factory(cfg)
    r = httpx.post(gw.url + CHAT, headers=key.headers, json={"model": "gpt-test"})
    assert r.status_code == 502
    assert r.json()["error"]["code"] == "upstream_connect_error"
    (event,) = gw.drain(expect=1)
    assert event["outcome"] == "upstream_error" and event["prompt_tokens"] == 0
