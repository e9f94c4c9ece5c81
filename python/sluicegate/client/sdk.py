"""What the four SDK wrappers share: the SDK's HTTP client governed in place (its transports
wrapped, its connection pool and settings kept), the SDK's own retries off, the policy's
deadline as the default timeout, and each client's policy carried into its calls and copies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

import httpx2

from sluicegate.client.call import Refuse
from sluicegate.client.governor import Governor, default_governor
from sluicegate.client.policy import PRIORITY_HEADER, Policy, check_priority, current_policy
from sluicegate.client.transport import AsyncGovernedTransport, GovernedTransport


def _govern(
    http_client: httpx2.Client | httpx2.AsyncClient,
    governor: Governor | None,
    policy: Policy,
    anthropic: bool,
    refuse: Refuse,
) -> Governor:
    """Wrap the client's transports (its default one and its mounts, e.g. proxies); a client
    governed already keeps its governor."""
    if not isinstance(http_client, httpx2.Client | httpx2.AsyncClient):
        raise TypeError(
            "sluicegate.client governs httpx2 clients (the SDKs' own); "
            f"got {type(http_client).__module__}.{type(http_client).__name__}"
        )
    mounts: dict[Any, Any] | None = getattr(http_client, "_mounts", None)
    if not hasattr(http_client, "_transport") or mounts is None:
        raise TypeError("sluicegate.client cannot govern this http_client: no _transport/_mounts")
    kind = (
        AsyncGovernedTransport if isinstance(http_client, httpx2.AsyncClient) else GovernedTransport
    )
    current = http_client._transport
    if isinstance(current, GovernedTransport | AsyncGovernedTransport):
        if governor is not None and governor is not current.governor:
            raise ValueError("this http_client is governed by another Governor already")
        return current.governor
    chosen = governor or default_governor()

    def wrap(inner: Any) -> Any:
        return kind(inner, chosen, policy, anthropic, refuse)

    http_client._transport = wrap(current)
    for pattern, transport in list(mounts.items()):
        if transport is not None:
            mounts[pattern] = wrap(transport)
    return chosen


def setup(
    kwargs: dict[str, Any],
    *,
    policy: Policy | None,
    governor: Governor | None,
    priority: str | None,
    max_retries: object,
    new_http_client: Callable[[], httpx2.Client | httpx2.AsyncClient],
    not_given: type,
    anthropic: bool,
    refuse: Refuse,
) -> tuple[Policy, Governor]:
    """Rewrite the SDK constructor's keyword arguments; returns the client's policy and governor."""
    chosen = policy or Policy()
    if isinstance(max_retries, int):
        chosen = chosen.with_retries(max_retries)
    check_priority(priority)
    http_client = kwargs.get("http_client") or new_http_client()
    kwargs["http_client"] = http_client
    governing = _govern(http_client, governor, chosen, anthropic, refuse)
    kwargs["max_retries"] = 0  # the policy retries; two retry layers in one client multiply
    if "timeout" not in kwargs or isinstance(kwargs["timeout"], not_given):
        kwargs["timeout"] = chosen.deadline
    if priority is not None:
        kwargs["default_headers"] = {
            **(kwargs.get("default_headers") or {}),
            PRIORITY_HEADER: priority,
        }
    return chosen, governing


class _Governed:
    _sluicegate_policy: Policy
    _sluicegate_governor: Governor

    @property
    def policy(self) -> Policy:
        return self._sluicegate_policy

    @property
    def governor(self) -> Governor:
        return self._sluicegate_governor

    def stats(self) -> dict[str, object]:
        """Percentiles of this process's calls through the governor (see `Governor.stats`)."""
        return self._sluicegate_governor.stats()

    def copy(
        self,
        *,
        policy: Policy | None = None,
        priority: str | None = None,
        max_retries: object = None,
        **kwargs: Any,
    ) -> Self:
        """The SDK's `copy`/`with_options`, plus `policy` and `priority`; `max_retries` sets the
        policy's attempts (the SDK's own retries stay off)."""
        chosen = policy or self._sluicegate_policy
        if isinstance(max_retries, int):
            chosen = chosen.with_retries(max_retries)
        if check_priority(priority) is not None:
            kwargs["default_headers"] = {
                **(kwargs.get("default_headers") or {}),
                PRIORITY_HEADER: priority,
            }
        copied: Self = super().copy(**kwargs)  # type: ignore[misc]
        copied._sluicegate_policy = chosen
        return copied

    with_options = copy


class SyncGoverned(_Governed):
    def request(self, *args: Any, **kwargs: Any) -> Any:
        token = current_policy.set(self._sluicegate_policy)
        try:
            return super().request(*args, **kwargs)  # type: ignore[misc]
        finally:
            current_policy.reset(token)


class AsyncGoverned(_Governed):
    async def request(self, *args: Any, **kwargs: Any) -> Any:
        token = current_policy.set(self._sluicegate_policy)
        try:
            return await super().request(*args, **kwargs)  # type: ignore[misc]
        finally:
            current_policy.reset(token)
