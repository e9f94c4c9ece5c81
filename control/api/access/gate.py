"""The ASGI gate in front of the admin app (pure ASGI: it must act before anything reads the
body). FastAPI reads a route's body before its dependencies run, so without it any client could
make this process, which the data plane shares, buffer a body of any size before its 401.

For every `/v1/admin` request the token is identified from the head alone (`identify.py`): a
missing, unknown, expired or rate-limited token, or one of a disabled tenant, is answered at once
and the body is never read (the server then closes the connection). The identity is handed to
`control.api.security.authenticate` in the request's scope, which works out the role.

Then, for every request: a Content-Length over `admin.max_body_bytes` is refused with 413 before
reading; a chunked body is read here, counted, and refused with 413 as soon as it passes the cap
(never more than the cap is held), or handed on whole. Errors are in the API's own format.

An answer given while a body is still coming closes the connection, after a lingering drain: the
answer is written at once, then what the client keeps sending is read and dropped for up to
`LINGER_SECONDS` and `LINGER_BYTES` before the close. A client that writes its whole body before
it reads (most do) then finds the answer instead of a reset, and nothing is held meanwhile.
"""

from __future__ import annotations

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control.api.access.identify import bearer_token, identify
from control.api.errors import ControlError, PayloadTooLarge, error_response
from control.context import ControlContext

GUARDED = "/v1/admin"
# A scope key of our own: the scope is the request's alone (a server may share `state` dicts).
IDENTITY = "sluicegate.admin_identity"
LINGER_SECONDS = 2.0
LINGER_BYTES = 8 << 20


def guarded(path: str) -> bool:
    return path == GUARDED or path.startswith(GUARDED + "/")


class AdminGate:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ctx: ControlContext = scope["app"].state.ctx
        headers = Headers(scope=scope)
        cap = ctx.settings.admin.max_body_bytes
        length = headers.get("content-length")
        body_pending = "transfer-encoding" in headers or (length is not None and length != "0")
        try:
            if guarded(scope["path"]):
                secret = bearer_token(headers.get("authorization"))
                identity = await run_in_threadpool(identify, ctx, secret)
                scope[IDENTITY] = identity
            _check_length(length, cap)
            if "transfer-encoding" in headers:
                receive = await _read_counted(receive, cap)
        except ControlError as refused:
            await _refuse(refused, scope, receive, send, body_pending)
            return
        await self.app(scope, receive, send)


async def _refuse(
    refused: ControlError, scope: Scope, receive: Receive, send: Send, body_pending: bool
) -> None:
    response = error_response(refused)
    if not body_pending:
        await response(scope, receive, send)
        return
    response.headers["connection"] = "close"
    await send(
        {
            "type": "http.response.start",
            "status": response.status_code,
            "headers": response.raw_headers,
        }
    )
    # The whole answer goes out now; the response ends (and the server closes) after the drain.
    await send({"type": "http.response.body", "body": response.body, "more_body": True})
    await _drain(receive)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _drain(receive: Receive) -> None:
    """Read and drop the rest of the body, within the lingering bounds."""
    dropped = 0
    with anyio.move_on_after(LINGER_SECONDS):
        while dropped <= LINGER_BYTES:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                return
            dropped += len(message.get("body", b""))


def _too_large(cap: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"the request body is larger than {cap} bytes (admin.max_body_bytes)")


def _check_length(value: str | None, cap: int) -> None:
    if value is None:
        return
    # The server has checked the header's syntax; anything else is refused as unbounded.
    if not value.isdigit() or int(value) > cap:
        raise _too_large(cap)


async def _read_counted(receive: Receive, cap: int) -> Receive:
    """Read a body of unknown length up to the cap; the app then receives it from memory."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break  # the client went away; the app sees that too
        size += len(message.get("body", b""))
        if size > cap:
            raise _too_large(cap)
        if not message.get("more_body", False):
            break

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return replay
