"""The admin port's HTTP/1.1 (`control/process/admin_protocol.py`) under a real uvicorn: a request
head it cannot parse, or one over the limit however it arrives, gets the API's JSON error with an
exact length and `Connection: close`, and never the bytes the client sent."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from fastapi import FastAPI

from control.api.errors import install_error_handlers
from control.process.admin_protocol import MAX_HEAD_BYTES, AdminProtocol

SECRET = b"sk-admin-secret-value"


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/echo")
    async def echo() -> dict[str, bool]:
        return {"ok": True}

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    config = uvicorn.Config(app, log_config=None, lifespan="off", http=AdminProtocol)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(10)


def exchange(port: int, *pieces: bytes) -> bytes:
    """Send `pieces` (a pause between them, so the server reads each on its own), then read
    until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        for i, piece in enumerate(pieces):
            if i:
                time.sleep(0.05)
            conn.sendall(piece)
        out = b""
        while chunk := conn.recv(65536):
            out += chunk
    return out


def parse(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def assert_refused(answer: bytes, status: int, code: str) -> None:
    got, headers, body = parse(answer)
    assert got == status, answer
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    error = json.loads(body)["error"]
    assert error["code"] == code and error["message"] and error["fields"] == []
    assert SECRET not in answer


HEAD_END = b"\r\n\r\n"
AUTH = b"Authorization: Bearer " + SECRET


@pytest.mark.parametrize(
    "head",
    [
        b"HELLO" + HEAD_END,
        b"GET /echo\xff HTTP/1.1\r\nHost: a\r\n" + AUTH + HEAD_END,
        b"GET /echo HTTP/1.1\r\nHost: a\r\nBad Header: " + SECRET + HEAD_END,
        b"GET /echo HTTP/1.1\r\nHost: a\r\nContent-Length: -1" + HEAD_END,
        b"GET /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2" + HEAD_END,
    ],
    ids=["not-http", "non-ascii-target", "space-in-name", "negative-length", "two-lengths"],
)
def test_a_head_that_cannot_be_parsed_is_a_400_in_the_api_format(port: int, head: bytes) -> None:
    assert_refused(exchange(port, head), 400, "bad_request")


def test_an_unknown_transfer_coding_is_a_501(port: int) -> None:
    head = b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip" + HEAD_END
    assert_refused(exchange(port, head), 501, "not_implemented")


def big_head(size: int, extra: bytes = b"") -> bytes:
    """A head of exactly `size` bytes, `extra` header lines among its headers."""
    start = b"GET /echo HTTP/1.1\r\nHost: a\r\n" + extra + AUTH + b"\r\nX-Pad: "
    return start + b"a" * (size - len(start) - len(HEAD_END)) + HEAD_END


@pytest.mark.parametrize("pieces", [1, 3], ids=["one-read", "several-reads"])
def test_a_head_over_the_limit_is_a_431_however_it_arrives(port: int, pieces: int) -> None:
    head = big_head(MAX_HEAD_BYTES + 1)
    step = -(-len(head) // pieces)
    parts = [head[i : i + step] for i in range(0, len(head), step)]
    assert_refused(exchange(port, *parts), 431, "request_headers_too_large")


def test_a_head_at_the_limit_is_served(port: int) -> None:
    head = big_head(MAX_HEAD_BYTES, extra=b"Connection: close\r\n")
    assert len(head) == MAX_HEAD_BYTES
    status, _, body = parse(exchange(port, head))
    assert status == 200 and json.loads(body) == {"ok": True}


def test_a_bad_head_behind_a_good_request_is_answered_after_it(port: int) -> None:
    answer = exchange(port, b"GET /echo HTTP/1.1\r\nHost: a" + HEAD_END + b"HELLO" + HEAD_END)
    first, _, rest = answer.partition(b'{"ok":true}')
    assert first.startswith(b"HTTP/1.1 200 ")
    assert_refused(rest, 400, "bad_request")
