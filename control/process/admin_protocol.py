"""The admin port's HTTP/1.1: uvicorn's h11 protocol, with what it refuses before the app runs
answered in the API's error format.

uvicorn answers a request head it cannot parse (h11's `RemoteProtocolError`) with a 400 whose
body is the text `Invalid HTTP request received.`, whatever the fault, and it accepts a head of
any size as long as it arrives in one read (h11 bounds only a head it is still waiting for). Here:
- the answer is the API's JSON error body (`control/api/errors.py`), with an exact
  `Content-Length` and `Connection: close`, and the status h11 hints at: 431 for a head over
  the limit, 501 for a transfer coding it does not implement, 400 for the rest;
- a head over `MAX_HEAD_BYTES` is refused with 431 however it arrived, as on the data port (whose
  limit is 8 KiB: the admin API's heads carry no more than a token and a JSON body's headers);
- the message is fixed per status: the bytes a client sent are never echoed or logged (a head may
  carry a token).
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from control.api.errors import error_json

log = logging.getLogger("sluicegate.control")

# The largest request head the admin port reads: request line and headers, as h11 counts them
# while it waits for the rest of a head (its `max_incomplete_event_size`).
MAX_HEAD_BYTES = 16 * 1024

_ANSWERS = {
    400: ("bad_request", "the request is not valid HTTP/1.1"),
    431: (
        "request_headers_too_large",
        f"the request line and headers are larger than {MAX_HEAD_BYTES} bytes",
    ),
    501: ("not_implemented", "the request uses a transfer coding this server does not implement"),
}


def head_bytes(request: h11.Request) -> int:
    """The size of a parsed head as sent: the request line, `name: value` lines, each ended by
    CRLF, and the empty line (h11 has dropped the optional whitespace around values, so a head
    sent with some was larger)."""
    line = len(request.method) + 1 + len(request.target) + len(b" HTTP/1.1\r\n")
    fields = sum(len(name) + 2 + len(value) + 2 for name, value in request.headers.raw_items())
    return line + fields + 2


class _Connection(h11.Connection):
    """h11's server side, remembering the fault it refused a head for (uvicorn's handler is
    told only that there was one), and refusing a whole head over the limit."""

    refused: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as e:
            self.refused = e
            raise
        if isinstance(event, h11.Request) and head_bytes(event) > MAX_HEAD_BYTES:
            self.refused = h11.RemoteProtocolError("request head too large", 431)
            raise self.refused
        return event


class AdminProtocol(H11Protocol):
    """uvicorn's `http` protocol class for the admin port."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parser = _Connection(h11.SERVER, MAX_HEAD_BYTES)
        self.conn = self._parser

    def send_400_response(self, msg: str) -> None:
        refused = self._parser.refused
        status = refused.error_status_hint if refused is not None else 400
        if status not in _ANSWERS:
            status = 400
        code, message = _ANSWERS[status]
        log.warning("admin API: refused a request head (%d %s)", status, code)
        body = error_json(code, message)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        try:
            reason = HTTPStatus(status).phrase
            head = h11.Response(status_code=status, headers=headers, reason=reason)
            self.transport.write(self.conn.send(head))
            self.transport.write(self.conn.send(h11.Data(data=body)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
        except h11.LocalProtocolError:
            # A head refused while an answer to an earlier request of the connection is still
            # being written: nothing more can be said on it.
            pass
        self.transport.close()
