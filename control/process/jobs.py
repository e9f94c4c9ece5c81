"""The one owner of the control plane's background work. Every replica runs its usage drainer,
its heartbeat and its follower of what the fleet committed (PostgreSQL only: with SQLite this
process is the whole fleet); the jobs that must run once for the fleet (retention of raw usage
rows, the price activator, the drill closer) run on the elected leader only (`control.fleet.
leader`). Started by the admin app's lifespan, stopped on the way out in reverse order, the
drainer last: after the core stopped, it writes and acknowledges what the core still holds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from control.context import ControlContext
from control.drills.closer import DrillCloser
from control.fleet.channel import channel_name
from control.fleet.follower import Follower
from control.fleet.heartbeat import Heartbeat
from control.fleet.leader import Leadership
from control.prices.activator import PriceActivator
from control.process.thread_names import named
from control.usage.drainer import UsageDrainer, usage_drainer
from control.usage.retention import RetentionJob


class BackgroundJobs:
    def __init__(self, ctx: ControlContext) -> None:
        self._ctx = ctx
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._drainer: UsageDrainer | None = None
        retention = RetentionJob(ctx.sessions, ctx.settings.usage.raw_retention_days)
        self.leadership = Leadership(
            ctx.engine,
            ctx.fleet_schema,
            [
                ("sluicegate-retention", retention.run),
                ("sluicegate-prices", PriceActivator(ctx).run),
                ("sluicegate-drills", DrillCloser(ctx).run),
            ],
            wake=[ctx.prices_changed, ctx.drills_changed],
        )
        schema = ctx.fleet_schema
        self.follower = Follower(ctx, None if schema is None else channel_name(schema))

    def _thread(self, name: str, target: Callable[[threading.Event], None]) -> None:
        thread = threading.Thread(target=named(target), args=(self._stop,), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def start(self) -> None:
        ctx = self._ctx
        self._drainer = usage_drainer(ctx.bridge, ctx.sessions, ctx.settings.usage)
        self._thread("sluicegate-usage", self._drainer.run)
        self._thread("sluicegate-leader", self.leadership.run)
        self._thread("sluicegate-heartbeat", Heartbeat(ctx, self.follower, self.leadership).run)
        if ctx.fleet_schema is not None:
            self._thread("sluicegate-follower", self.follower.run)

    def stop(self) -> bool:
        """Stop every job; then the drainer writes and acknowledges what is left, for at most
        `server.shutdown_grace_seconds`. Returns whether the core holds nothing unwritten."""
        self._stop.set()
        # Wake the jobs asleep until their next due time.
        self._ctx.prices_changed.set()
        self._ctx.drills_changed.set()
        self.follower.wake()
        for thread in reversed(self._threads):
            thread.join()
        self._threads.clear()
        drainer, self._drainer = self._drainer, None
        if drainer is None:
            return True
        grace = self._ctx.settings.server.shutdown_grace_seconds
        return drainer.drain(deadline=time.monotonic() + max(grace, 1.0))
