"""`openai.OpenAI` and `openai.AsyncOpenAI` with the client-side rules: the same classes (these
are subclasses), the same methods, return types and exceptions, one process-wide gate, a
deadline per call propagated to the gateway, budgeted retries with backoff, and measurements."""

from __future__ import annotations

from typing import Any

import httpx2
import openai

from sluicegate.client import errors
from sluicegate.client.governor import Governor
from sluicegate.client.policy import Policy
from sluicegate.client.sdk import AsyncGoverned, SyncGoverned, setup


class ConcurrencyLimitExceeded(errors.ConcurrencyLimitExceeded, openai.APIConnectionError):
    """The gate refused the call: both `sluicegate.client.ConcurrencyLimitExceeded` and the
    SDK's `APIConnectionError` (nothing was sent)."""

    def __init__(self, message: str, request: httpx2.Request) -> None:
        openai.APIConnectionError.__init__(self, message=message, request=request)


def _refuse(message: str, request: httpx2.Request) -> Exception:
    return ConcurrencyLimitExceeded(message, request)


class OpenAI(SyncGoverned, openai.OpenAI):
    """`openai.OpenAI(...)`, plus `policy`, `governor` and `priority` ("interactive" or
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
            new_http_client=openai.DefaultHttpxClient,
            not_given=openai.NotGiven,
            anthropic=False,
            refuse=_refuse,
        )
        super().__init__(**kwargs)


class AsyncOpenAI(AsyncGoverned, openai.AsyncOpenAI):
    """`openai.AsyncOpenAI(...)` with the same additions as `OpenAI`."""

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
            new_http_client=openai.DefaultAsyncHttpxClient,
            not_given=openai.NotGiven,
            anthropic=False,
            refuse=_refuse,
        )
        super().__init__(**kwargs)
