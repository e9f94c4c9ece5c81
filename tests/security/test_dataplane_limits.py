"""A key holder cannot outrun its quota or TPM by one field, and cannot make the gateway hold
memory: what the upstream may produce is what was reserved (the cap goes into the body sent
upstream), every 2xx answer is billed, and a key's limits and a body budget apply before a body
is read."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import time

import httpx

from tests.support.gateway import ConfigBuilder, member

CHAT = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "x" * 40}]


def _quota(tokens: int) -> dict[str, object]:
    return {"period": "daily", "tokens": tokens, "period_start": 0}


def _gateway(gateway_factory, sim_address: str, route: dict[str, object] | None = None, **key):
    cfg = ConfigBuilder().tenant("t")
    k = cfg.key("k", "t", **key)
    cfg.pool("p", [member("m", sim_address)]).route("m", ("p", "sim"), **(route or {}))
    return gateway_factory(cfg), k.headers


def test_a_large_max_tokens_cannot_outrun_the_quota(sim_factory, gateway_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "0")
    gw, headers = _gateway(gateway_factory, sim.address, quota=_quota(10_000))
    for body in (
        {"model": "m", "messages": MESSAGES, "max_tokens": 200_000},
        # The smallest field used to win: an upstream that honours the larger bills 60,000.
        {"model": "m", "messages": MESSAGES, "max_tokens": 1, "max_completion_tokens": 60_000},
    ):
        r = httpx.post(gw.url + CHAT, json=body, headers=headers, timeout=30)
        assert r.status_code == 429, r.text
        assert r.json()["error"]["code"] == "insufficient_quota"
    assert gw.drain(expect=1, timeout=1) == []


def test_the_route_cap_and_the_reservation_reach_the_upstream(sim_factory, gateway_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "0")
    gw, headers = _gateway(
        gateway_factory, sim.address, route={"max_output_tokens": 50}, quota=_quota(1_000_000)
    )
    echo = {**headers, "x-sim-echo": "1"}
    r = httpx.post(
        gw.url + CHAT,
        json={
            "model": "m",
            "messages": MESSAGES,
            "max_tokens": 100_000,
            "max_completion_tokens": 7,
        },
        headers=echo,
        timeout=30,
    )
    assert r.status_code == 200, r.text
    sent = json.loads(r.json()["sim_request_body"])
    assert sent["max_tokens"] == 50 and sent["max_completion_tokens"] == 7
    assert r.json()["usage"]["completion_tokens"] <= 50
    # No cap from the client while a quota applies: the route's is added.
    r = httpx.post(
        gw.url + CHAT, json={"model": "m", "messages": MESSAGES}, headers=echo, timeout=30
    )
    assert json.loads(r.json()["sim_request_body"])["max_tokens"] == 50
    events = gw.drain(expect=2)
    assert all(e["completion_tokens"] <= 50 for e in events)


def test_tool_schemas_and_best_of_count_in_the_reservation(sim_factory, gateway_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "0")
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t", limits={"tpm": 2_000})
    cfg.pool("p", [member("m", sim.address)]).route("m", ("p", "sim"))
    gw = gateway_factory(cfg)
    schema = {
        "type": "object",
        "properties": {f"field_{i}": {"type": "string"} for i in range(300)},
    }
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": schema}}]
    r = httpx.post(
        gw.url + CHAT,
        json={"model": "m", "messages": MESSAGES, "max_tokens": 10, "tools": tools},
        headers=key.headers,
        timeout=30,
    )
    assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limit_exceeded", r.text
    r = httpx.post(
        gw.url + "/v1/completions",
        json={"model": "m", "prompt": "hi", "max_tokens": 500, "n": 1, "best_of": 5},
        headers=key.headers,
        timeout=30,
    )
    assert r.status_code == 429, r.text


def test_an_answer_too_large_to_buffer_is_billed_from_its_usage(
    sim_factory, gateway_factory
) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "0")
    gw, headers = _gateway(gateway_factory, sim.address)
    r = httpx.post(
        gw.url + CHAT,
        json={"model": "m", "messages": MESSAGES},
        headers={**headers, "x-sim-output-tokens": "4000000"},
        timeout=120,
    )
    assert r.status_code == 200
    assert len(r.content) > 16 * 1024 * 1024
    (event,) = gw.drain(expect=1)
    assert event["completion_tokens"] == 4_000_000


def _half_send(address: str, headers: dict[str, str], declared: int) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    head = f"POST {CHAT} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head += f"Content-Length: {declared}\r\n\r\n"
    sock.sendall(head.encode() + b'{"model":"m","messages":[' + b" " * 1024 * 1024)
    return sock


def _status(sock: socket.socket, within: float) -> int | None:
    sock.settimeout(within)
    try:
        line = sock.recv(64)
    except (TimeoutError, ConnectionResetError):
        return None
    return int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else None


def test_a_key_at_its_limits_cannot_make_the_gateway_buffer_bodies(
    sim_factory, gateway_factory
) -> None:
    sim = sim_factory("--ttft-ms", "1")
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t", limits={"max_concurrency": 1, "rpm": 1})
    cfg.pool("p", [member("m", sim.address)]).route("m", ("p", "sim"))
    gw = gateway_factory(cfg, body_read_timeout_ms=1500)
    declared = 30 * 1024 * 1024
    first = _half_send(gw.address, key.headers, declared)
    time.sleep(0.3)
    others = [_half_send(gw.address, key.headers, declared) for _ in range(19)]
    try:
        # Refused at once, from the head alone: no body of theirs is read.
        assert [_status(s, within=2) for s in others] == [429] * 19
        # The one that got the slot has a deadline on its body.
        assert _status(first, within=5) == 408
    finally:
        for s in [first, *others]:
            s.close()


def test_the_body_budget_bounds_what_all_requests_hold(sim_factory, gateway_factory) -> None:
    sim = sim_factory("--ttft-ms", "1")
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t")
    cfg.pool("p", [member("m", sim.address)]).route("m", ("p", "sim"))
    mib = 1024 * 1024
    gw = gateway_factory(cfg, max_body_bytes=32 * mib, max_body_bytes_in_flight=64 * mib)
    held = [_half_send(gw.address, key.headers, 30 * mib) for _ in range(3)]
    try:
        # Two 30 MiB bodies fit in 64 MiB; whichever comes third is refused at once.
        assert sorted([_status(s, within=2) or 0 for s in held]) == [0, 0, 503]
        # Small requests still pass beside them.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            codes = list(
                pool.map(
                    lambda _: (
                        httpx.post(
                            gw.url + CHAT,
                            json={"model": "m", "messages": MESSAGES, "max_tokens": 2},
                            headers=key.headers,
                            timeout=10,
                        ).status_code
                    ),
                    range(8),
                )
            )
        assert codes == [200] * 8
    finally:
        for s in held:
            s.close()
