"""The state a process's clients share: the concurrency gate, the retry budget and the
measurements. Every wrapper uses the process's default governor unless it is given another, so
a hundred client objects in one process still make one bounded, budgeted tenant."""

from __future__ import annotations

import itertools
import os
import threading
import time
import weakref
from collections.abc import Callable

from sluicegate.client import export as exporters
from sluicegate.client.budget import RetryBudget
from sluicegate.client.gate import Gate
from sluicegate.client.measure import CallRecord, Recorder

_names = itertools.count(1)
_live: weakref.WeakSet[Governor] = weakref.WeakSet()
_default: Governor | None = None
_default_lock = threading.Lock()


class Governor:
    """max_in_flight, max_waiting: the concurrency gate (calls past both are refused at once).
    budget_ratio, budget_min_per_second, budget_window: retries in the last window may not
    exceed ratio x calls + min_per_second x window. The defaults keep a process's retries
    within 5% of its calls (plus 5 per 10 s): the gateway already retries and fails over before
    the first byte, and retry layers multiply.
    export: publish the measurements to prometheus-client's default registry and to the
    OpenTelemetry meter provider, when those packages are installed."""

    def __init__(
        self,
        *,
        max_in_flight: int = 64,
        max_waiting: int = 256,
        budget_ratio: float = 0.05,
        budget_min_per_second: float = 0.5,
        budget_window: float = 10.0,
        name: str | None = None,
        export: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name or f"governor-{next(_names)}"
        self.clock = clock
        self._settings = (max_in_flight, max_waiting, budget_ratio, budget_min_per_second)
        self.gate = Gate(max_in_flight, max_waiting)
        self.budget = RetryBudget(budget_ratio, budget_min_per_second, budget_window, clock)
        self.recorder = Recorder()
        _live.add(self)
        if export:
            exporters.attach(self)

    def subscribe(self, listener: Callable[[CallRecord], None]) -> Callable[[], None]:
        """Have `listener` called with each finished call's `CallRecord`; returns the
        unsubscribe function."""
        return self.recorder.subscribe(listener)

    def stats(self) -> dict[str, object]:
        """Percentiles (never means) of TTFT, TPOT, total time and attempts per call, calls by
        outcome, retries, the gate's and the budget's state."""
        summary = self.recorder.summary()
        summary["governor"] = self.name
        summary["in_flight"] = self.gate.in_flight
        summary["waiting"] = self.gate.waiting
        summary["limits"] = {
            "max_in_flight": self.gate.max_in_flight,
            "max_waiting": self.gate.max_waiting,
        }
        summary["budget"] = self.budget.snapshot()
        return summary

    def _after_fork(self) -> None:
        # A forked child has none of its parent's calls in flight, and locks held by the
        # parent's threads at fork time would never be released: start from fresh state.
        max_in_flight, max_waiting, ratio, floor = self._settings
        self.gate = Gate(max_in_flight, max_waiting)
        self.budget = RetryBudget(ratio, floor, self.budget.window, self.clock)
        self.recorder = self.recorder.fresh()


def default_governor() -> Governor:
    """The process's governor, created with the defaults on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Governor(name="default")
        return _default


def stats() -> dict[str, object]:
    """The default governor's `stats()`."""
    return default_governor().stats()


def _reset_after_fork() -> None:
    global _default_lock
    _default_lock = threading.Lock()
    for governor in list(_live):
        governor._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
