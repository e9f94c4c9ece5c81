"""Token buckets per admin token, in process memory (one `serve` per database).

Each bucket is one number, the theoretical arrival time of GCRA: a call is admitted when that
time is at most `burst - 1` intervals ahead of now, and moves it one interval on. Unused tokens
accumulate up to the burst, never beyond. A refused call does not move it: retrying early only
waits longer for no one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from control.process.settings import AdminSettings


class TokenBuckets:
    def __init__(
        self, rate_per_minute: int, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """`rate_per_minute` 0: no limit. `burst` 0: one minute's worth."""
        self._interval = 60.0 / rate_per_minute if rate_per_minute else 0.0
        self._tolerance = ((burst or rate_per_minute) - 1) * self._interval
        self._clock = clock
        self._arrival: dict[str, float] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """0 if the call is admitted, else the seconds until it would be."""
        if not self._interval:
            return 0.0
        now = self._clock()
        with self._lock:
            arrival = max(self._arrival.get(key, now), now)
            ahead = arrival - now
            if ahead > self._tolerance:
                return ahead - self._tolerance
            self._arrival[key] = arrival + self._interval
            if len(self._arrival) > 10_000:
                self._forget_full(now)
            return 0.0

    def _forget_full(self, now: float) -> None:
        """Buckets that have refilled completely hold nothing worth keeping."""
        for key in [k for k, t in self._arrival.items() if t <= now]:
            del self._arrival[key]


class AdminRateLimits:
    """One set of buckets for tenant-scoped tokens, one for admin tokens."""

    def __init__(self, settings: AdminSettings, clock: Callable[[], float] = time.monotonic):
        self.tenant = TokenBuckets(settings.tenant_token_rpm, settings.tenant_token_burst, clock)
        self.admin = TokenBuckets(settings.admin_token_rpm, settings.admin_token_burst, clock)

    def take(self, role: str, token_id: str) -> float:
        return (self.admin if role == "admin" else self.tenant).take(token_id)
