"""Every bad input gets its documented status and an OpenAI-format error, and never reaches
the upstream (the simulator's record stays empty)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.core.conftest import Relay

CHAT = "/v1/chat/completions"


def assert_openai_error(
    r: httpx.Response, status: int, code: str | None = None
) -> dict[str, object]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    if code:
        assert err["code"] == code
    assert r.headers["x-request-id"]
    return err


def assert_nothing_reached_upstream(relay: Relay) -> None:
    time.sleep(0.2)
    assert not relay.record.exists() or relay.record.read_text() == ""


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (b"", None),
        (b'{"model": 5}', "model"),
        (b'{"messages": []}', "model"),
        (b'{"model": "gpt-test", "stream": "yes"}', "stream"),
        (b'{"model": "gpt-test", "max_tokens": "10"}', "max_tokens"),
        (b'{"model": "gpt-test", "messages": "hello"}', "messages"),
        (b'{"model": "gpt-test", "model": "gpt-test"}', "model"),
        (b'{"model": "gpt-test", "base_url": "http://attacker"}', "base_url"),
        (b'{"model": "gpt-test", "api_base": "http://attacker"}', "api_base"),
        (b'{"model": "gpt-\xff\xfe"}', None),
        (b'{"model": "gpt-test", "messages": [{"content": "\\ud800"}]}', None),
    ],
)
def test_malformed_bodies_are_400(relay: Relay, body: bytes, param: str | None) -> None:
    r = httpx.post(
        relay.url + CHAT,
        headers={**relay.key.headers, "content-type": "application/json"},
        content=body,
    )
    err = assert_openai_error(r, 400)
    assert err["type"] == "invalid_request_error"
    if param:
        assert err["param"] == param
    assert_nothing_reached_upstream(relay)


def test_unknown_model_is_404_and_unknown_path_is_404(relay: Relay) -> None:
    assert_openai_error(
        httpx.post(relay.url + CHAT, headers=relay.key.headers, json={"model": "nope"}),
        404,
        "model_not_found",
    )
    assert_openai_error(
        httpx.post(relay.url + "/v1/other", headers=relay.key.headers, json={}), 404, "unknown_url"
    )
    assert_openai_error(
        httpx.get(relay.url + CHAT, headers=relay.key.headers), 405, "method_not_allowed"
    )
    assert_nothing_reached_upstream(relay)


def test_body_over_the_cap_with_and_without_content_length(relay_factory) -> None:
    relay = relay_factory("--ttft-ms", "1", max_body_bytes=1024)
    big = b'{"model": "gpt-test", "pad": "' + b"x" * 4000 + b'"}'
    assert_openai_error(
        httpx.post(relay.url + CHAT, headers=relay.key.headers, content=big),
        413,
        "request_too_large",
    )

    def chunks():
        for i in range(0, len(big), 500):
            yield big[i : i + 500]

    assert_openai_error(
        httpx.post(relay.url + CHAT, headers=relay.key.headers, content=chunks()),
        413,
        "request_too_large",
    )
    assert_nothing_reached_upstream(relay)


def test_request_heads_up_to_8_kib_pass_and_longer_ones_get_431(relay: Relay) -> None:
    """The HTTP/1 read buffer is capped at 8 KiB (it is most of a connection's memory), so a
    request head longer than that is refused before anything is parsed or sent upstream."""
    body = {"model": "gpt-test", "max_tokens": 2, "messages": [{"role": "user", "content": "x"}]}
    fits = {**relay.key.headers, "x-padding": "p" * 6000}
    assert httpx.post(relay.url + CHAT, headers=fits, json=body).status_code == 200
    # The simulator records an answer after it sent it: wait for that line before comparing.
    deadline = time.monotonic() + 5
    while not relay.record.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    record_before = relay.record.read_text()
    assert record_before, "the simulator recorded no answer"
    too_long = {**relay.key.headers, "x-padding": "p" * 9000}
    r = httpx.post(relay.url + CHAT, headers=too_long, json=body)
    assert_openai_error(r, 431, "request_headers_too_large")
    assert r.headers["connection"] == "close"
    time.sleep(0.2)
    assert relay.record.read_text() == record_before


def test_a_head_over_8_kib_gets_431_on_a_reused_connection_too(relay: Relay) -> None:
    """hyper's read buffer caps a head only roughly: on a connection whose buffer grew for an
    earlier request, one read can bring in a head of up to twice the cap whole, and it parses.
    The handler checks the parsed head's size against the same 8 KiB."""
    body = {"model": "gpt-test", "max_tokens": 2, "messages": [{"role": "user", "content": "x"}]}
    with httpx.Client(timeout=10) as client:
        for padding in (6000, 7000, 8500, 12000, 15000):
            headers = {**relay.key.headers, "x-padding": "p" * padding}
            r = client.post(relay.url + CHAT, headers=headers, json=body)
            if padding < 8000:
                assert r.status_code == 200, r.text
            else:
                assert_openai_error(r, 431, "request_headers_too_large")
    # The same, with each head sent whole in one write after a first request: the case hyper's
    # buffer lets through, so the handler's check is what refuses it.
    auth = f"Authorization: Bearer {relay.key.secret}\r\n".encode()
    first = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n"
    long = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + auth + b"X-P: " + b"p" * 12000 + b"\r\n\r\n"
    # Each refusal is counted before its answer is written, whether hyper or the handler made it.
    assert refused_as_too_large(relay) == 3
    host, port = relay.gateway.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(first)
        status, headers, answer = read_answer(s)
        assert status == 200, answer
        s.sendall(long)
        status, headers, answer = read_answer(s)
    assert status == 431
    assert json.loads(answer)["error"]["code"] == "request_headers_too_large"
    assert headers["x-request-id"].startswith("req_")
    assert refused_as_too_large(relay) == 4


def refused_as_too_large(relay: Relay) -> float:
    """Request heads refused as too large so far, by hyper or by the handler."""
    samples = relay.gateway.metrics()["sluicegate_rejections_total"]["samples"]
    return sum(s["value"] for s in samples if s["labels"] == ["headers_too_large"])


def read_answer(s: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One answer with a Content-Length from `s`, leaving the connection open."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, data
        data += chunk
    status, headers, body = parse_answer(data)
    while len(body) < int(headers["content-length"]):
        chunk = s.recv(65536)
        assert chunk, data
        body += chunk
    return status, headers, body


def parse_answer(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-cased names) and body of one raw HTTP/1.1 answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


POST_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
BAD = (400, "invalid_request")
TOO_LARGE = (431, "request_headers_too_large")


@pytest.mark.parametrize(
    ("head", "answer"),
    [
        pytest.param(POST_HEAD + b"Content-Length: -1\r\n", BAD, id="negative-length"),
        pytest.param(POST_HEAD + b"Content-Length: 2, 3\r\n", BAD, id="list-length"),
        pytest.param(POST_HEAD + b"Bad Header: 1\r\n", BAD, id="space-in-name"),
        pytest.param(POST_HEAD.replace(b"POST", b"P@ST"), BAD, id="bad-method"),
        pytest.param(POST_HEAD + b"X-A: b\r\n" * 101, TOO_LARGE, id="101-headers"),
        pytest.param(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n", TOO_LARGE, id="long-uri"),
    ],
)
def test_heads_that_do_not_parse_get_an_openai_error_and_a_close(
    relay_factory, tmp_path: Path, head: bytes, answer: tuple[int, str]
) -> None:
    """hyper refuses these before any handler runs; the answer still carries the API's error
    format and a request id, its length is exact, the connection closes after it (a request
    after it on the same connection is never read), and the access log has its line."""
    access_log = tmp_path / "access.jsonl"
    relay = relay_factory("--ttft-ms", "20", "--itl-ms", "2", access_log=str(access_log))
    status, code = answer
    follow = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
    raw = raw_exchange(relay.gateway.address, head + b"\r\n" + follow)
    assert raw.count(b"HTTP/1.1 ") == 1, raw[:300]
    got, headers, body = parse_answer(raw)
    assert got == status, raw[:300]
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert headers["x-request-id"].startswith("req_")
    assert int(headers["content-length"]) == len(body)
    err = json.loads(body)["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert (err["type"], err["code"]) == ("invalid_request_error", code)
    assert_nothing_reached_upstream(relay)
    counted = relay.gateway.metrics()["sluicegate_connections_malformed_head_total"]
    assert counted["samples"][0]["value"] >= 1
    line = wait_for_line(access_log, headers["x-request-id"])
    assert (line["status"], line["error_code"], line["outcome"]) == (status, code, "refused")
    assert line["endpoint"] == "unknown"


def wait_for_line(access_log: Path, request_id: str) -> dict[str, object]:
    """The access log's line of `request_id` (its writer thread may still be writing it, so a
    last line not yet ended is left for the next look)."""
    deadline = time.monotonic() + 5
    while True:
        text = access_log.read_text() if access_log.exists() else ""
        for row in map(json.loads, text.split("\n")[:-1]):
            if row["request_id"] == request_id:
                return row  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, f"no access log line for {request_id}: {text[-500:]}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({}, "missing_api_key"),
        ({"authorization": "Bearer"}, "missing_api_key"),
        ({"authorization": "Basic abc"}, "invalid_api_key"),
        ({"x-api-key": ""}, "missing_api_key"),
        ({"authorization": "Bearer sk-sg-short"}, "invalid_api_key"),
    ],
)
def test_missing_and_malformed_auth(relay: Relay, headers: dict[str, str], code: str) -> None:
    r = httpx.post(relay.url + CHAT, headers=headers, json={"model": "gpt-test"})
    assert_openai_error(r, 401, code)
    assert_nothing_reached_upstream(relay)


def test_duplicate_or_conflicting_auth_headers(relay: Relay) -> None:
    other = relay.config.key("k2", "t1")
    relay.gateway.apply(relay.config)
    dup = [
        ("authorization", f"Bearer {relay.key.secret}"),
        ("authorization", f"Bearer {other.secret}"),
    ]
    assert_openai_error(httpx.post(relay.url + CHAT, headers=dup, json={"model": "gpt-test"}), 401)
    both = {"authorization": f"Bearer {relay.key.secret}", "x-api-key": other.secret}
    assert_openai_error(httpx.post(relay.url + CHAT, headers=both, json={"model": "gpt-test"}), 401)
    assert_nothing_reached_upstream(relay)


def test_unknown_revoked_and_expired_keys_get_one_identical_401(relay: Relay) -> None:
    revoked = relay.config.key("k-revoked", "t1", status="revoked")
    expired = relay.config.key("k-expired", "t1", expires_at=time.time() - 1)
    relay.config.tenant("t-off", status="disabled")
    tenant_off = relay.config.key("k-tenant-off", "t-off")
    relay.gateway.apply(relay.config)
    from sluicegate import _core

    unknown = _core.generate_api_key()
    bodies = set()
    for secret in [unknown, revoked.secret, expired.secret, tenant_off.secret]:
        r = httpx.post(
            relay.url + CHAT,
            headers={"authorization": f"Bearer {secret}"},
            json={"model": "gpt-test"},
        )
        assert r.status_code == 401
        bodies.add(r.content)
    assert len(bodies) == 1
    assert_nothing_reached_upstream(relay)


def raw_exchange(address: str, payload: bytes, wait: float = 2.0) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=wait) as s:
        s.sendall(payload)
        chunks = []
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
                chunks.append(data)
        except TimeoutError:
            pass
        return b"".join(chunks)


def test_smuggling_shapes_never_desynchronise_the_connection(relay: Relay) -> None:
    """Content-Length with Transfer-Encoding: the body is read as chunked (RFC 9112 6.3), the
    Content-Length is ignored and the connection is closed after the answer, so bytes smuggled
    after the chunked body are never read as a second request. Conflicting Content-Lengths are
    refused with 400 before any handler runs."""
    auth = f"Authorization: Bearer {relay.key.secret}\r\n".encode()
    body = b'{"model":"nope"}'
    smuggled = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n"
    cl_te = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        + auth
        + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
        + hex(len(body))[2:].encode()
        + b"\r\n"
        + body
        + b"\r\n0\r\n\r\n"
        + smuggled
    )
    answer = raw_exchange(relay.gateway.address, cl_te)
    assert answer.count(b"HTTP/1.1 ") == 1, answer
    assert answer.startswith(b"HTTP/1.1 404")
    assert b"connection: close" in answer.lower()
    dup_cl = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        + auth
        + b"Content-Length: 20\r\nContent-Length: 21\r\n\r\n"
        + body
    )
    answer = raw_exchange(relay.gateway.address, dup_cl)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert json.loads(parse_answer(answer)[2])["error"]["code"] == "invalid_request"
    assert_nothing_reached_upstream(relay)


def test_slow_headers_are_cut_off(relay_factory) -> None:
    relay = relay_factory("--ttft-ms", "1", header_read_timeout_ms=300)
    host, port = relay.gateway.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        start = time.monotonic()
        data = s.recv(65536)  # the gateway answers 408 or closes; it never waits forever
        assert time.monotonic() - start < 2.0
        assert data == b"" or data.startswith(b"HTTP/1.1 408")
    assert_nothing_reached_upstream(relay)
