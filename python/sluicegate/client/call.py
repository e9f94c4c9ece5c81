"""One call through a governed transport: its deadline, its attempts, when to retry, and the
record of it. The sync and async transports drive it; everything they share is here."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable

import httpx2

from sluicegate.client.governor import Governor
from sluicegate.client.measure import CallRecord
from sluicegate.client.policy import DEADLINE_HEADER, MAX_DEADLINE_S, Policy
from sluicegate.client.retry import delay_before, retry_after, should_retry_status
from sluicegate.client.sse_tap import SseTap

_rng = random.Random()

# Failures that leave the request unanswered and may be sent again (the SDKs retry them too).
RETRYABLE_ERRORS = (
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
    httpx2.RemoteProtocolError,
    httpx2.ReadError,
    httpx2.WriteError,
)


def is_event_stream(response: httpx2.Response) -> bool:
    return response.headers.get("content-type", "").startswith("text/event-stream")


class Call:
    def __init__(
        self, governor: Governor, policy: Policy, request: httpx2.Request, anthropic: bool
    ) -> None:
        self.governor = governor
        self.policy = policy
        self.request = request
        self.anthropic = anthropic
        self.clock = governor.clock
        self.started = self.clock()
        self.started_unix = time.time()
        timeouts = request.extensions.get("timeout") or {}
        self.connect_timeout: float | None = timeouts.get("connect")
        self.deadline = self.started + policy.call_deadline(timeouts.get("read"))
        self.gate_wait = 0.0
        self.holding = False
        self.attempts = 0
        self.gateway_deadline = math.inf
        self.deadline_hit = False
        self.done = False

    def remaining(self) -> float:
        return self.deadline - self.clock()

    def admitted(self) -> None:
        self.holding = True
        self.gate_wait = self.clock() - self.started

    def timeout_error(self, what: str) -> httpx2.TimeoutException:
        seconds = self.deadline - self.started
        return httpx2.ReadTimeout(
            f"{what} within the call's deadline of {seconds:g} s", request=self.request
        )

    def prepare(self) -> None:
        """Set this attempt's deadline header and timeouts; the deadline may already be gone."""
        now = self.clock()
        remaining = self.deadline - now
        if remaining <= 0:
            raise self.timeout_error("no answer")
        if self.attempts == 0:
            self.governor.budget.record_call()
        self.attempts += 1
        # The gateway gets what is left minus the network's share, so it ends the request (and
        # cancels the upstream) and answers before the client would give up on it.
        budget_ms = min(remaining - self.policy.margin(remaining), MAX_DEADLINE_S) * 1000
        header_ms = max(1, math.floor(budget_ms))
        self.gateway_deadline = now + header_ms / 1000
        headers = self.request.headers
        headers[DEADLINE_HEADER] = str(header_ms)
        headers["x-stainless-retry-count"] = str(self.attempts - 1)
        connect = (
            remaining if self.connect_timeout is None else min(self.connect_timeout, remaining)
        )
        self.request.extensions["timeout"] = {
            "connect": connect,
            "read": remaining,
            "write": remaining,
            "pool": remaining,
        }

    def after_response(self, response: httpx2.Response) -> float | None:
        """Seconds to wait before trying again, or None if this response is the answer."""
        status = response.status_code
        if status < 400 or not should_retry_status(status, response.headers):
            return None
        if self.clock() >= self.gateway_deadline:
            # The gateway gave up at the deadline this call gave it: that is the call's timeout.
            self.deadline_hit = True
            return None
        return self._retry_delay(retry_after(response.headers))

    def after_error(self, error: Exception) -> float | None:
        if isinstance(error, RETRYABLE_ERRORS) and self.clock() < self.deadline:
            return self._retry_delay(None)
        return None

    def _retry_delay(self, hint: float | None) -> float | None:
        if self.attempts >= self.policy.max_attempts:
            return None
        delay = delay_before(self.attempts, self.policy, hint, _rng)
        if delay is None:
            return None
        left = self.deadline - self.clock() - delay
        if left <= self.policy.margin(left) * 2:
            return None  # no time left for the gateway to do anything with another attempt
        if not self.governor.budget.try_spend():
            return None
        self.governor.recorder.retried()
        return delay

    def finish(
        self,
        outcome: str,
        response: httpx2.Response | None = None,
        tap: SseTap | None = None,
        ended: float | None = None,
    ) -> None:
        """Release the slot and record the call; only the first call counts."""
        if self.done:
            return
        self.done = True
        if self.holding:
            self.holding = False
            self.governor.gate.release()
        end = self.clock() if ended is None else ended
        ttft = tpot = None
        tokens = None
        if tap is not None:
            tokens = tap.output_tokens
            if tap.first_token_at is not None:
                ttft = (tap.first_token_at - self.started) * 1000
                if tokens > 1:
                    tpot = (end - tap.first_token_at) * 1000 / (tokens - 1)
        headers = response.headers if response is not None else None
        self.governor.recorder.record(
            CallRecord(
                method=self.request.method,
                path=self.request.url.path,
                stream=tap is not None,
                outcome=outcome,
                status=response.status_code if response is not None else None,
                attempts=self.attempts,
                request_id=headers.get("x-request-id") or headers.get("request-id")
                if headers
                else None,
                started_at=self.started_unix,
                gate_wait_ms=self.gate_wait * 1000,
                total_ms=(end - self.started) * 1000,
                ttft_ms=ttft,
                tpot_ms=tpot,
                output_tokens=tokens,
            )
        )

    def fail(self, error: BaseException) -> None:
        if isinstance(error, httpx2.TimeoutException):
            self.finish("timeout")
        elif isinstance(error, Exception):
            self.finish("connection")
        else:  # cancelled, interrupted
            self.finish("cancelled")


Refuse = Callable[[str, httpx2.Request], Exception]
