"""The rules one client applies to each of its calls: deadline, attempts, backoff, priority.

A `Policy` is plain, immutable data; the state that several clients share (the concurrency gate,
the retry budget, the measurements) lives in a `Governor`."""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass, replace

# The gateway refuses an `x-sluicegate-timeout-ms` above one hour, so no deadline is longer.
MAX_DEADLINE_S = 3600.0
# Priority classes the gateway knows; the header can only lower a key's own class.
PRIORITIES = ("interactive", "batch")
PRIORITY_HEADER = "x-sluicegate-priority"
DEADLINE_HEADER = "x-sluicegate-timeout-ms"


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")


@dataclass(frozen=True)
class Policy:
    """How a client calls the gateway.

    deadline: seconds a call may take when it names no `timeout` of its own, gate wait, attempts
        and backoff included; never above an hour (the gateway's largest).
    max_attempts: attempts per call, the first included (1 = never retry).
    backoff_base, backoff_cap: full-jitter exponential backoff, `rand(0, min(cap, base * 2**n))`
        before retry n+1.
    max_retry_after: a server asking to wait longer than this is not retried (the SDKs' limit).
    deadline_margin: the network's share, kept back from the deadline sent to the gateway so the
        gateway gives up (and says why) before the client does; at most a tenth of what is left.
    """

    deadline: float = 60.0
    max_attempts: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    max_retry_after: float = 60.0
    deadline_margin: float = 0.1

    def __post_init__(self) -> None:
        _positive("deadline", self.deadline)
        if self.deadline > MAX_DEADLINE_S:
            raise ValueError(
                f"deadline must be at most {MAX_DEADLINE_S:.0f} s (the gateway's most)"
            )
        if not isinstance(self.max_attempts, int) or not 1 <= self.max_attempts <= 10:
            raise ValueError(
                f"max_attempts must be a whole number from 1 to 10, got {self.max_attempts!r}"
            )
        _positive("backoff_base", self.backoff_base)
        _positive("backoff_cap", self.backoff_cap)
        if self.backoff_base > self.backoff_cap:
            raise ValueError("backoff_base must not exceed backoff_cap")
        _positive("max_retry_after", self.max_retry_after)
        _positive("deadline_margin", self.deadline_margin)

    def with_retries(self, max_retries: int) -> Policy:
        """The SDKs' `max_retries` in this policy's terms (attempts = retries + 1)."""
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be a whole number >= 0, got {max_retries!r}")
        return replace(self, max_attempts=max_retries + 1)

    def call_deadline(self, timeout: float | None) -> float:
        """Seconds a call may take: its own timeout if it has one, else the policy's; at most an
        hour."""
        if timeout is None or not math.isfinite(timeout) or timeout <= 0:
            return self.deadline
        return min(timeout, MAX_DEADLINE_S)

    def margin(self, remaining: float) -> float:
        return min(self.deadline_margin, remaining / 10)


def check_priority(priority: str | None) -> str | None:
    if priority is not None and priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
    return priority


# The policy of the client whose call is running: several clients (an SDK client and its
# `with_options` copies) share one governed transport, each with its own policy.
current_policy: ContextVar[Policy | None] = ContextVar("sluicegate_client_policy", default=None)
