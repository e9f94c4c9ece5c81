"""`anthropic.Anthropic` and `anthropic.AsyncAnthropic` with the client-side rules: the same
classes (these are subclasses), the same methods, return types and exceptions, one process-wide
gate, a deadline per call propagated to the gateway, budgeted retries with backoff, and
measurements."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2

from sluicegate.client import errors
from sluicegate.client.governor import Governor
from sluicegate.client.policy import Policy
from sluicegate.client.sdk import AsyncGoverned, SyncGoverned, setup


class ConcurrencyLimitExceeded(errors.ConcurrencyLimitExceeded, anthropic.APIConnectionError):
    """The gate refused the call: both `sluicegate.client.ConcurrencyLimitExceeded` and the
    SDK's `APIConnectionError` (nothing was sent)."""

    def __init__(self, message: str, request: httpx2.Request) -> None:
        anthropic.APIConnectionError.__init__(self, message=message, request=request)


def _refuse(message: str, request: httpx2.Request) -> Exception:
    return ConcurrencyLimitExceeded(message, request)


class Anthropic(SyncGoverned, anthropic.Anthropic):
    """`anthropic.Anthropic(...)`, plus `policy`, `governor` and `priority` ("interactive" or
    "batch", sent as `x-sluicegate-priority`). `timeout` is the deadline of each call (the
    policy's by default) and `max_retries` the policy's retries."""

    def __init__(
        self,
        *,
        policy: Policy | None = None,
        governor: Governor | None = None,
        priority: str | None = None,
        max_retries: Any = None,
        **kwargs: Any,
    ) -> None:
        self._sluicegate_policy, self._sluicegate_governor = setup(
            kwargs,
            policy=policy,
            governor=governor,
            priority=priority,
            max_retries=max_retries,
            new_http_client=anthropic.DefaultHttpxClient,
            not_given=anthropic.NotGiven,
            anthropic=True,
            refuse=_refuse,
        )
        super().__init__(**kwargs)


class AsyncAnthropic(AsyncGoverned, anthropic.AsyncAnthropic):
    """`anthropic.AsyncAnthropic(...)` with the same additions as `Anthropic`."""

    def __init__(
        self,
        *,
        policy: Policy | None = None,
        governor: Governor | None = None,
        priority: str | None = None,
        max_retries: Any = None,
        **kwargs: Any,
    ) -> None:
        self._sluicegate_policy, self._sluicegate_governor = setup(
            kwargs,
            policy=policy,
            governor=governor,
            priority=priority,
            max_retries=max_retries,
            new_http_client=anthropic.DefaultAsyncHttpxClient,
            not_given=anthropic.NotGiven,
            anthropic=True,
            refuse=_refuse,
        )
        super().__init__(**kwargs)
