"""A streamed admin API answer relayed to the browser as it is produced: the request is run
through the app's ASGI interface and its body messages are passed on through a small queue, so
an export of any size holds a few chunks at a time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.types import ASGIApp, Message

HOST = b"admin-api.console.invalid"
QUEUE_MESSAGES = 8


@dataclass
class Streamed:
    status: int
    headers: dict[str, str]
    body: AsyncIterator[bytes]


async def _collect(first: Message, queue: asyncio.Queue[Message]) -> bytes:
    parts = [first.get("body", b"")]
    message = first
    while message.get("more_body", False):
        message = await queue.get()
        parts.append(message.get("body", b""))
    return b"".join(parts)


async def relay(
    app: ASGIApp, path: str, params: Mapping[str, Any], headers: Mapping[str, str]
) -> Streamed:
    queue: asyncio.Queue[Message] = asyncio.Queue(maxsize=QUEUE_MESSAGES)
    gone = asyncio.Event()
    requested = False
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": urlencode(params).encode(),
        "headers": [(b"host", HOST)]
        + [(k.lower().encode(), v.encode("latin-1")) for k, v in headers.items()],
        "client": ("127.0.0.1", 0),
        "server": (HOST.decode(), 80),
        "extensions": {},
        "state": {},
    }

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        await queue.put(message)

    task = asyncio.ensure_future(app(scope, receive, send))
    getter = asyncio.ensure_future(queue.get())
    done, _ = await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
    if getter not in done:
        getter.cancel()
        task.result()  # raises what the app raised
        raise RuntimeError("the admin API answered nothing")
    start = getter.result()
    status = int(start["status"])
    head = {k.decode("latin-1"): v.decode("latin-1") for k, v in start.get("headers", [])}

    async def body() -> AsyncIterator[bytes]:
        try:
            while True:
                message = await queue.get()
                chunk = message.get("body", b"")
                if chunk:
                    yield chunk
                if not message.get("more_body", False):
                    break
            await task
        finally:
            gone.set()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    if status >= 400:
        # An error is a small JSON body: read it whole for the message.
        first = await queue.get()
        content = await _collect(first, queue)
        gone.set()
        with contextlib.suppress(Exception):
            await task
        return Streamed(status, head, _once(content))
    return Streamed(status, head, body())


async def _once(content: bytes) -> AsyncIterator[bytes]:
    yield content
