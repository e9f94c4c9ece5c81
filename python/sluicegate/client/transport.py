"""The governed transports: httpx2 transports that wrap the SDK's own and apply the rules to
every call the SDK makes (the SDK's own retries are off). Per call: a slot from the gate (or a
fast refusal), then attempts, each with the time left sent as `x-sluicegate-timeout-ms`,
retried within the policy, the deadline and the budget; then the answer: a JSON body read
whole (a failure while reading it is retried too, since the caller has seen nothing), or a
stream handed over as it arrives."""

from __future__ import annotations

import asyncio
import time

import httpx2

from sluicegate.client.call import Call, Refuse, is_event_stream
from sluicegate.client.errors import concurrency_message
from sluicegate.client.gate import GateFull
from sluicegate.client.governor import Governor
from sluicegate.client.policy import Policy, current_policy
from sluicegate.client.streams import AsyncTappedStream, TappedStream


class _Governed:
    def __init__(self, governor: Governor, policy: Policy, anthropic: bool, refuse: Refuse) -> None:
        self.governor = governor
        self.policy = policy
        self.anthropic = anthropic
        self.refuse = refuse

    def _call(self, request: httpx2.Request) -> Call:
        return Call(self.governor, current_policy.get() or self.policy, request, self.anthropic)

    def _refused(self, call: Call) -> Exception:
        call.finish("refused")
        gate = self.governor.gate
        error = self.refuse(concurrency_message(gate.max_in_flight, gate.max_waiting), call.request)
        return error

    def _no_slot(self, call: Call) -> httpx2.TimeoutException:
        call.finish("timeout")
        return httpx2.PoolTimeout(
            "the call's deadline passed while it waited for a slot in this process's "
            f"concurrency gate ({self.governor.gate.max_in_flight} in flight)",
            request=call.request,
        )

    @staticmethod
    def _deliver_read(call: Call, response: httpx2.Response) -> httpx2.Response:
        if call.deadline_hit:
            raise call.timeout_error("the gateway did not answer")
        call.finish("ok" if response.status_code < 400 else "status", response)
        return response


class GovernedTransport(_Governed, httpx2.BaseTransport):
    def __init__(
        self,
        inner: httpx2.BaseTransport,
        governor: Governor,
        policy: Policy,
        anthropic: bool,
        refuse: Refuse,
    ) -> None:
        super().__init__(governor, policy, anthropic, refuse)
        self.inner = inner

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        call = self._call(request)
        try:
            if not self.governor.gate.acquire(call.remaining()):
                raise self._no_slot(call)
        except GateFull:
            raise self._refused(call) from None
        call.admitted()
        try:
            request.read()  # a replayable body
            while True:
                call.prepare()
                try:
                    response = self.inner.handle_request(request)
                    delay = call.after_response(response)
                    if delay is None:
                        stream = response.stream
                        assert isinstance(stream, httpx2.SyncByteStream)
                        if is_event_stream(response) and not call.deadline_hit:
                            response.stream = TappedStream(stream, call, response)
                            return response
                        try:
                            body = b"".join(stream)
                        finally:
                            stream.close()
                        response.stream = httpx2.ByteStream(body)
                        return self._deliver_read(call, response)
                    response.close()
                except httpx2.TransportError as error:
                    delay = call.after_error(error)
                    if delay is None:
                        raise
                time.sleep(delay)
        except BaseException as error:
            call.fail(error)
            raise

    def close(self) -> None:
        self.inner.close()


class AsyncGovernedTransport(_Governed, httpx2.AsyncBaseTransport):
    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        governor: Governor,
        policy: Policy,
        anthropic: bool,
        refuse: Refuse,
    ) -> None:
        super().__init__(governor, policy, anthropic, refuse)
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        call = self._call(request)
        try:
            if not await self.governor.gate.acquire_async(call.remaining()):
                raise self._no_slot(call)
        except GateFull:
            raise self._refused(call) from None
        call.admitted()
        try:
            await request.aread()
            while True:
                call.prepare()
                try:
                    response = await self.inner.handle_async_request(request)
                    delay = call.after_response(response)
                    if delay is None:
                        stream = response.stream
                        assert isinstance(stream, httpx2.AsyncByteStream)
                        if is_event_stream(response) and not call.deadline_hit:
                            response.stream = AsyncTappedStream(stream, call, response)
                            return response
                        try:
                            body = b"".join([part async for part in stream])
                        finally:
                            await stream.aclose()
                        response.stream = httpx2.ByteStream(body)
                        return self._deliver_read(call, response)
                    await response.aclose()
                except httpx2.TransportError as error:
                    delay = call.after_error(error)
                    if delay is None:
                        raise
                await asyncio.sleep(delay)
        except BaseException as error:
            call.fail(error)
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()
