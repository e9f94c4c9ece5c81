"""The retry budget (Linkerd's and Finagle's idea, on the client): within any `window` seconds,
retries may not exceed `ratio` x the calls made in the window before them plus
`min_per_second` x the window.

A healthy process almost never spends it; during an outage every call fails, and the budget
is what keeps its retries from multiplying the load on a fleet that is already down. Calls are
counted in one-second slots covering the last 9 to 10 seconds (the allowance errs low);
retries are kept as exact times, so a burst of retries cannot expire all at once and let a
second burst through within the same window."""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable


class RetryBudget:
    def __init__(
        self,
        ratio: float,
        min_per_second: float,
        window: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (math.isfinite(ratio) and 0 <= ratio <= 1):
            raise ValueError(f"budget_ratio must be between 0 and 1, got {ratio!r}")
        if not (math.isfinite(min_per_second) and min_per_second >= 0):
            raise ValueError(f"budget_min_per_second must be >= 0, got {min_per_second!r}")
        if not (math.isfinite(window) and 1 <= window <= 600):
            raise ValueError(f"budget_window must be between 1 and 600 seconds, got {window!r}")
        self.ratio = ratio
        self.min_per_second = min_per_second
        self.window = window
        self._clock = clock
        self._slots = max(1, math.floor(window))
        self._calls = [0] * self._slots
        self._current = math.floor(clock())
        self._retries: deque[float] = deque()
        self._lock = threading.Lock()
        self.exhausted = 0

    def _advance(self, now: float) -> int:
        """Zero the call slots that went by since the last look; the current one's index."""
        second = math.floor(now)
        for step in range(1, min(second - self._current, self._slots) + 1):
            self._calls[(self._current + step) % self._slots] = 0
        self._current = max(self._current, second)
        while self._retries and self._retries[0] <= now - self.window:
            self._retries.popleft()
        return self._current % self._slots

    def _allowed(self) -> float:
        return self.ratio * sum(self._calls) + self.min_per_second * self.window

    def record_call(self) -> None:
        with self._lock:
            self._calls[self._advance(self._clock())] += 1

    def try_spend(self) -> bool:
        """Take one retry if the budget has it; counts a refusal otherwise."""
        with self._lock:
            now = self._clock()
            self._advance(now)
            if len(self._retries) + 1 > self._allowed():
                self.exhausted += 1
                return False
            self._retries.append(now)
            return True

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            self._advance(self._clock())
            return {
                "window_s": self.window,
                "calls": sum(self._calls),
                "retries": len(self._retries),
                "allowed": math.floor(self._allowed()),
                "exhausted_total": self.exhausted,
            }
