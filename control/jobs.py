"""The admin app's background work besides the drill closer: the usage drainer (a thread the
core bridge owns), the retention of raw usage rows, and the price activator. Started by the app's
lifespan; stopped on the way out, the drainer last, writing what the core still holds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from control.context import ControlContext
from control.prices.activator import PriceActivator
from control.usage.drainer import usage_drainer
from control.usage.retention import RetentionJob


class BackgroundJobs:
    def __init__(self, ctx: ControlContext) -> None:
        self._ctx = ctx
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _thread(self, name: str, target: Callable[[threading.Event], None]) -> None:
        thread = threading.Thread(target=target, args=(self._stop,), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def start(self) -> None:
        ctx = self._ctx
        ctx.bridge.start_drainer(usage_drainer(ctx.bridge, ctx.sessions, ctx.settings.usage))
        retention = RetentionJob(ctx.sessions, ctx.settings.usage.raw_retention_days)
        self._thread("sluicegate-retention", retention.run)
        self._thread("sluicegate-prices", PriceActivator(ctx).run)

    def stop(self) -> bool:
        """Stop the threads; the drainer writes and acknowledges what is left, for at most
        `server.shutdown_grace_seconds`. Returns whether the core holds nothing unwritten."""
        self._stop.set()
        self._ctx.prices_changed.set()
        for thread in self._threads:
            thread.join()
        grace = self._ctx.settings.server.shutdown_grace_seconds
        return self._ctx.bridge.stop_drainer(deadline=time.monotonic() + max(grace, 1.0))
