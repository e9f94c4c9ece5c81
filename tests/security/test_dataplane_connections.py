"""The anonymous network may open sockets and send bytes, nothing more: a socket that never sends
a request is closed within the header timeout, one address cannot take every connection permit,
and an answer sent before a body was read still reaches a client that writes its whole body first
(lingering close)."""

from __future__ import annotations

import socket
import time

import httpx

from tests.support.gateway import ConfigBuilder, Gateway, member


def _config(sim_address: str) -> tuple[ConfigBuilder, dict[str, str]]:
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t")
    cfg.pool("p", [member("m", sim_address)]).route("m", ("p", "sim"))
    return cfg, key.headers


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def _closed_by_peer(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_silent_sockets_cannot_lock_anyone_out(sim_factory, gateway_factory) -> None:
    """50 sockets that never send a byte against max_connections 50: they are closed at the header
    timeout, and a real client gets its answer."""
    sim = sim_factory("--ttft-ms", "1")
    cfg, headers = _config(sim.address)
    gw: Gateway = gateway_factory(
        cfg, max_connections=50, max_connections_per_client=0, header_read_timeout_ms=1000
    )
    silent = [_connect(gw.address) for _ in range(50)]
    try:
        started = time.monotonic()
        r = httpx.get(gw.url + "/v1/models", headers=headers, timeout=10)
        assert r.status_code == 200
        assert time.monotonic() - started < 5
        assert all(_closed_by_peer(s, within=3) for s in silent)
        timeouts = gw.metrics()["sluicegate_connections_first_request_timeouts_total"]
        assert timeouts["samples"][0]["value"] >= 50
    finally:
        for s in silent:
            s.close()


def test_one_byte_then_silence_is_closed_too(sim_factory, gateway_factory) -> None:
    sim = sim_factory("--ttft-ms", "1")
    cfg, _ = _config(sim.address)
    gw = gateway_factory(cfg, header_read_timeout_ms=500)
    # "P" could begin the HTTP/2 preface: the protocol detection waits for more.
    for first in (b"P", b"PRI * HTTP/2.0\r\n", b"GET / HTTP/1.1\r\n"):
        sock = _connect(gw.address)
        sock.sendall(first)
        assert _closed_by_peer(sock, within=3), first
        sock.close()


def test_one_address_cannot_hold_every_connection(sim_factory, gateway_factory) -> None:
    sim = sim_factory("--ttft-ms", "1")
    cfg, headers = _config(sim.address)
    gw = gateway_factory(cfg, max_connections_per_client=4, header_read_timeout_ms=5000)
    held = [_connect(gw.address) for _ in range(4)]
    try:
        extra = _connect(gw.address)
        assert _closed_by_peer(extra, within=3)
        refused = gw.metrics()["sluicegate_connections_refused_per_client_total"]
        assert refused["samples"][0]["value"] >= 1
    finally:
        for s in held:
            s.close()
    # Places are given back when connections close.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if httpx.get(gw.url + "/v1/models", headers=headers, timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    else:
        raise AssertionError("the address never got a place back")


def _write_all_then_read(address: str, head: bytes, body_len: int) -> bytes:
    """What a simple client does: write the whole request, then read the answer."""
    sock = _connect(address)
    sock.sendall(head)
    chunk = b"x" * 65536
    sent = 0
    while sent < body_len:
        sent += sock.send(chunk[: min(len(chunk), body_len - sent)])
    sock.shutdown(socket.SHUT_WR)
    answer = b""
    while True:
        data = sock.recv(65536)
        if not data:
            break
        answer += data
    sock.close()
    return answer


def test_an_early_answer_reaches_a_client_that_writes_its_whole_body_first(
    sim_factory, gateway_factory
) -> None:
    sim = sim_factory("--ttft-ms", "1")
    cfg, headers = _config(sim.address)
    gw = gateway_factory(cfg, max_body_bytes=1024 * 1024)
    size = 8 * 1024 * 1024
    for auth, status in [("Bearer sk-sg-not-a-key", b"401"), (headers["Authorization"], b"413")]:
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: {auth}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
        ).encode()
        answer = _write_all_then_read(gw.address, head, size)
        assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
