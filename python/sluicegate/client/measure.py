"""What the client measures about each call, and the summaries it keeps.

Per call: time to first token (streams), time per output token (streams of two tokens or more,
the gateway's formula: (total - TTFT) / (output tokens - 1)), total time, and attempts. The clock
starts when the call enters the transport (the SDK has built the request), so gate wait and
backoff count: this is the latency the application sees."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from sluicegate.client.histogram import CountHistogram, Histogram

log = logging.getLogger("sluicegate.client")

# Export buckets, in ms, after the OpenTelemetry GenAI conventions (which are in seconds).
TTFT_BOUNDS_MS = (1, 5, 10, 20, 40, 60, 80, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000)
TPOT_BOUNDS_MS = (10, 25, 50, 75, 100, 150, 200, 300, 400, 500, 750, 1000, 2500)
TOTAL_BOUNDS_MS = tuple(10.0 * 2**i for i in range(14))  # 10 ms ... 81.92 s
ATTEMPT_BOUNDS = (1, 2, 3, 4, 5, 10)

# How a call ended, as counted in `stats()["calls"]`.
OUTCOMES = ("ok", "status", "stream_error", "timeout", "connection", "cancelled", "refused")


@dataclass(frozen=True)
class CallRecord:
    """One call as the client saw it. Times in milliseconds, like the gateway's usage rows."""

    method: str
    path: str
    stream: bool
    outcome: str
    status: int | None
    attempts: int
    request_id: str | None
    started_at: float  # unix seconds
    gate_wait_ms: float
    total_ms: float
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    output_tokens: int | None = None


class Recorder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ttft_ms = Histogram(tuple(float(b) for b in TTFT_BOUNDS_MS))
        self.tpot_ms = Histogram(tuple(float(b) for b in TPOT_BOUNDS_MS))
        self.total_ms = Histogram(TOTAL_BOUNDS_MS)
        self.attempts = CountHistogram(tuple(float(b) for b in ATTEMPT_BOUNDS))
        self.outcomes: Counter[str] = Counter({o: 0 for o in OUTCOMES})
        self.retries = 0
        self._listeners: list[Callable[[CallRecord], None]] = []

    def subscribe(self, listener: Callable[[CallRecord], None]) -> Callable[[], None]:
        """Call `listener` with every finished call; returns the function that unsubscribes."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def fresh(self) -> Recorder:
        """An empty recorder with the same listeners (a forked child starts counting anew; the
        parent's lock may be held by a thread the child does not have, so it is not taken)."""
        new = Recorder()
        new._listeners = list(self._listeners)
        return new

    def retried(self) -> None:
        with self._lock:
            self.retries += 1

    def record(self, call: CallRecord) -> None:
        with self._lock:
            self.outcomes[call.outcome] += 1
            if call.attempts > 0:
                self.attempts.observe(call.attempts)
                self.total_ms.observe(call.total_ms)
            if call.ttft_ms is not None:
                self.ttft_ms.observe(call.ttft_ms)
            if call.tpot_ms is not None:
                self.tpot_ms.observe(call.tpot_ms)
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(call)
            except Exception:  # a listener's bug must not fail the call it observes
                log.exception("a sluicegate client listener failed")

    def exports(self) -> dict[str, tuple[list[tuple[float, int]], float, int]]:
        """Each histogram's cumulative fixed buckets, sum and count, read together."""
        with self._lock:
            return {
                name: (h.cumulative_export(), float(h.sum), h.count)
                for name, h in (
                    ("ttft_ms", self.ttft_ms),
                    ("tpot_ms", self.tpot_ms),
                    ("total_ms", self.total_ms),
                    ("attempts", self.attempts),
                )
            }

    def counts(self) -> tuple[dict[str, int], int]:
        with self._lock:
            return dict(self.outcomes), self.retries

    def summary(self) -> dict[str, object]:
        with self._lock:
            return {
                "calls": dict(self.outcomes),
                "retries": self.retries,
                "ttft_ms": self.ttft_ms.summary(),
                "tpot_ms": self.tpot_ms.summary(),
                "total_ms": self.total_ms.summary(),
                "attempts": self.attempts.summary(),
            }
