"""Response bodies handed to the SDK. A streamed answer is passed through chunk by chunk while the
tap reads it; the call ends (its gate slot freed, its record written) when the SDK closes the
body: at its end, when the application stops early, or when the body is garbage-collected
unclosed. Once handed over, a body is never retried: the caller may already have seen bytes."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Iterator

import httpx2

from sluicegate.client.call import Call
from sluicegate.client.sse_tap import SseTap


class _Tapped:
    def __init__(self, call: Call, response: httpx2.Response) -> None:
        self.call = call
        self.response = response
        self.tap = SseTap(call.anthropic)
        self.ended: float | None = None
        self.outcome: str | None = None
        # An abandoned stream still gives its slot back.
        self._finalizer = weakref.finalize(self, call.finish, "cancelled")

    def seen(self, chunk: bytes) -> None:
        now = self.call.clock()
        self.tap.feed(chunk, now)
        self.ended = now
        if now > self.call.deadline:
            self.outcome = "timeout"
            raise self.call.timeout_error("the stream did not end")

    def exhausted(self) -> None:
        self.ended = self.call.clock()
        if self.outcome is None:
            self.outcome = "ok" if self.tap.terminated and not self.tap.error else "stream_error"

    def failed(self, error: BaseException) -> None:
        if self.outcome is None:
            self.outcome = (
                "timeout" if isinstance(error, httpx2.TimeoutException) else "stream_error"
            )

    def closed(self) -> None:
        self._finalizer.detach()
        outcome = self.outcome
        if outcome is None:  # closed before the body's end: after a proper last event, or not
            if self.tap.error:
                outcome = "stream_error"
            else:
                outcome = "ok" if self.tap.terminated else "cancelled"
        self.call.finish(outcome, self.response, self.tap, self.ended)


class TappedStream(_Tapped, httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, call: Call, response: httpx2.Response) -> None:
        super().__init__(call, response)
        self._inner = inner

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                self.seen(chunk)
                yield chunk
        except Exception as error:
            self.failed(error)
            raise
        self.exhausted()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self.closed()


class AsyncTappedStream(_Tapped, httpx2.AsyncByteStream):
    def __init__(
        self, inner: httpx2.AsyncByteStream, call: Call, response: httpx2.Response
    ) -> None:
        super().__init__(call, response)
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                self.seen(chunk)
                yield chunk
        except Exception as error:
            self.failed(error)
            raise
        self.exhausted()

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self.closed()
