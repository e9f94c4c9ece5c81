"""When a failed attempt may be tried again, and after how long.

What may be retried is what the official SDKs retry (408, 409, 429 and 5xx, and connection
failures), with the server's word first: `x-should-retry: false` never, `true` always (both
still within the deadline and the budget). How long: the server's `retry-after-ms`, else
`retry-after` (seconds or an HTTP date), stretched by up to a fifth so clients told the same
thing do not come back at the same instant, and never shorter than the client's own backoff:
full-jitter exponential, capped."""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping

from sluicegate.client.policy import Policy

RETRYABLE_STATUSES = frozenset({408, 409, 429})


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks to wait, or None if it does not say (or says nonsense)."""
    ms = _number(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def should_retry_status(status: int, headers: Mapping[str, str]) -> bool:
    verdict = (headers.get("x-should-retry") or "").strip().lower()
    if verdict == "false":
        return False
    if verdict == "true":
        return True
    return status in RETRYABLE_STATUSES or status >= 500


def backoff(retry: int, policy: Policy, rng: random.Random) -> float:
    """Full jitter: rand(0, min(cap, base * 2**(retry - 1))) before retry `retry` (from 1)."""
    ceiling = min(policy.backoff_cap, policy.backoff_base * 2 ** max(0, retry - 1))
    return rng.uniform(0.0, ceiling)


def delay_before(
    retry: int, policy: Policy, hint: float | None, rng: random.Random
) -> float | None:
    """Seconds to wait before retry number `retry`; None when the server asks for longer than
    the policy waits (the call then ends with the server's answer)."""
    own = backoff(retry, policy, rng)
    if hint is None:
        return own
    if hint > policy.max_retry_after:
        return None
    return max(own, hint * (1.0 + 0.2 * rng.random()))
