"""The price activator: a price version added for later takes effect in the core when its time
comes. The snapshot carries the version in force when it is built, so this thread pushes one
(through the mutator, as the system, with a `price.effective` audit row per version) when a
version's `effective_from` passes. It sleeps until the next one and is woken by a new price."""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from sqlalchemy import func, select

from control.api.caller import SYSTEM
from control.context import ControlContext
from control.prices.models import Price
from control.process.wakeups import run_until_stopped
from control.timeutil import utcnow

log = logging.getLogger("sluicegate.control")

IDLE_WAIT_S = 300.0


class PriceActivator:
    def __init__(self, ctx: ControlContext, since: datetime | None = None) -> None:
        self._ctx = ctx
        # Versions that took effect up to here are in the snapshot in force.
        self._pushed_until = since or utcnow()

    def activate_due(self) -> float:
        """Push a snapshot if versions took effect since the last push; returns how long to
        sleep until the next one."""
        now = utcnow()
        with self._ctx.sessions() as session:
            due = session.execute(
                select(Price.id, Price.model).where(
                    Price.effective_from > self._pushed_until,
                    Price.effective_from <= now,
                    # One in force from its creation was pushed by it.
                    Price.effective_from > Price.created_at,
                )
            ).all()
            following = session.scalar(
                select(func.min(Price.effective_from)).where(Price.effective_from > now)
            )
        if due:
            with self._ctx.mutator.mutate(SYSTEM, subject=("price", due[0].model)) as m:
                for price_id, model in due:
                    m.record("price.effective", "price", str(price_id), {"model": model})
            log.info("price versions in force now: %s", ", ".join(str(d.id) for d in due))
        self._pushed_until = now
        if following is None:
            return IDLE_WAIT_S
        return min(max((following - utcnow()).total_seconds(), 0.0), IDLE_WAIT_S)

    def run(self, stop: threading.Event) -> None:
        run_until_stopped(
            stop,
            self._ctx.prices_changed,
            self.activate_due,
            "prices: pushing the versions now in force",
        )
