"""The admin API authenticates before it reads a body and caps bodies before parsing them: an
anonymous client cannot make the process (which the data plane shares) buffer 200 MiB, and a
token holder gets 413 for a body over `admin.max_body_bytes`, counted when it is chunked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.control.helpers import ADMIN_TOKEN, Harness
from tests.e2e.helpers import start_serve
from tests.security.rawhttp import peak_rss_kib, post_promising
from tests.support.procs import Proc

MIB = 1 << 20


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Proc, str, str]]:
    proc, admin, token = start_serve(tmp_path)
    yield proc, admin, token
    proc.stop()


def _error(body: Any, code: str) -> None:
    assert set(body) == {"error"} and body["error"]["code"] == code, body


def test_an_anonymous_200_mib_post_is_answered_before_its_body(
    served: tuple[Proc, str, str],
) -> None:
    proc, admin, _ = served
    before = peak_rss_kib(proc.popen.pid)
    answer = post_promising(
        admin, "/v1/admin/tenants", 200 * MIB, {"Content-Type": "application/json"}
    )
    grown = peak_rss_kib(proc.popen.pid) - before
    assert answer.status == 401, answer.body
    _error(answer.json(), "unauthorized")
    # Answered with the head alone: at most the socket buffers' worth was written, and the
    # server closed the connection instead of reading the rest.
    assert answer.sent_before_answer < 16 * MIB
    assert answer.closed
    assert grown < 8 * 1024, f"peak RSS grew by {grown} KiB"


def test_a_body_over_the_cap_is_refused_by_its_content_length(
    served: tuple[Proc, str, str],
) -> None:
    proc, admin, token = served
    before = peak_rss_kib(proc.popen.pid)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    answer = post_promising(admin, "/v1/admin/tenants", 200 * MIB, headers)
    grown = peak_rss_kib(proc.popen.pid) - before
    assert answer.status == 413, answer.body
    _error(answer.json(), "payload_too_large")
    assert "1048576" in answer.json()["error"]["message"]
    assert answer.sent_before_answer < 16 * MIB and answer.closed
    assert grown < 8 * 1024, f"peak RSS grew by {grown} KiB"


def test_a_client_that_writes_its_body_first_reads_the_answer(
    served: tuple[Proc, str, str],
) -> None:
    """The early answer lingers: a client that sends its whole body before reading (as most
    do) gets the 401 or 413, not a reset connection."""
    _, admin, token = served
    body = b"[" + b" " * (3 * MIB) + b"]"
    for headers, status in (({}, 401), ({"Authorization": f"Bearer {token}"}, 413)):
        answer = httpx.post(
            f"http://{admin}/v1/admin/tenants", content=body, headers=headers, timeout=30
        )
        assert answer.status_code == status, answer.text
        assert answer.headers["connection"] == "close"


def test_a_chunked_body_is_counted_against_the_cap(harness_factory: Any) -> None:
    harness: Harness = harness_factory(SLUICEGATE_ADMIN_MAX_BODY_BYTES="4096")
    admin = harness.admin

    def chunks(total: int) -> Iterator[bytes]:
        yield b'{"name": "'
        for _ in range(total // 1024):
            yield b"a" * 1024
        yield b'"}'

    # No Content-Length: the body arrives in pieces and is counted as it comes.
    big = harness.client.post("/v1/admin/tenants", content=chunks(8192), headers=admin.headers)
    assert big.status_code == 413, big.text
    _error(big.json(), "payload_too_large")
    small = harness.client.post(
        "/v1/admin/tenants",
        content=iter([b'{"id": "small", ', b'"name": "Small"}']),
        headers=admin.headers | {"Content-Type": "application/json"},
    )
    assert small.status_code == 201, small.text
    # A body just under the cap by its Content-Length goes through to validation.
    name = "a" * 300
    fits = admin.post("/v1/admin/tenants", {"name": name})
    assert fits.status_code == 422  # the name is too long: parsed, then refused by the schema
    assert admin.post("/v1/admin/tenants", {"name": "x" * 5000}).status_code == 413


def test_unauthenticated_requests_are_refused_without_reading(harness: Harness) -> None:
    """Answered from the head alone: the answer is complete before the app first receives (what
    follows is the lingering drain, which drops what it reads), and the connection closes."""
    app = harness.client.app
    for token in (None, "sgt_unknown-token-0123456789", ADMIN_TOKEN + "x"):
        headers = [(b"content-length", b"999999999"), (b"content-type", b"application/json")]
        if token is not None:
            headers.append((b"authorization", f"Bearer {token}".encode()))
        status, body, answer = _call(app, "POST", "/v1/admin/keys", headers)
        assert status == 401
        _error(body, "unauthorized")
        assert answer["connection"] == "close"
    # With the token, a promised body over the cap is refused just as early.
    headers = [
        (b"content-length", b"999999999"),
        (b"authorization", f"Bearer {ADMIN_TOKEN}".encode()),
    ]
    status, body, _ = _call(app, "POST", "/v1/admin/keys", headers)
    assert status == 413
    _error(body, "payload_too_large")
    # Without a body to come, a refusal keeps the connection.
    status, body, answer = _call(app, "GET", "/v1/admin/keys", [])
    assert status == 401 and "connection" not in answer


def _call(
    app: ASGIApp, method: str, path: str, headers: list[tuple[bytes, bytes]]
) -> tuple[int, Any, dict[str, str]]:
    import anyio
    import orjson

    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "scheme": "http",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8081),
        "state": {},
    }
    events: list[str] = []
    sent: list[Message] = []

    async def receive() -> Message:
        events.append("receive")
        # The client sends one piece of its body, then goes away.
        if events.count("receive") == 1:
            return {"type": "http.request", "body": b"x" * 1024, "more_body": True}
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        complete = message["type"] == "http.response.body" and message.get("body")
        events.append("answered" if complete else message["type"])

    async def run(receive: Receive, send: Send) -> None:
        await app(scope, receive, send)

    anyio.run(run, receive, send)
    assert "answered" in events, events
    assert "receive" not in events[: events.index("answered")], events
    status = sent[0]["status"]
    answer = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return status, orjson.loads(body), answer


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics", "/docs", "/openapi.json"])
def test_open_endpoints_stay_open(harness: Harness, path: str) -> None:
    response = harness.client.get(path)
    assert response.status_code in (200, 503), (path, response.text)
    if path != "/readyz":
        assert response.status_code == 200
