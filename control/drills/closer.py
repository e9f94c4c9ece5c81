"""The drill closer: the core lets a drill's target back in by itself when its time is up; this
thread records that end (a `drill.end` audit row, by the system) soon after, so that every drill
ends in the audit log whether or not someone ended it. It sleeps until the next drill's end, and
is woken when a drill starts."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import func, select

from control.api.caller import SYSTEM
from control.context import ControlContext
from control.drills import repository
from control.drills.models import Drill
from control.drills.service import record_end
from control.process.wakeups import run_until_stopped
from control.timeutil import utcnow

IDLE_WAIT_S = 60.0
# Recorded this long after the end, so that the core has let the target back in by then.
AFTER_END = timedelta(milliseconds=200)


class DrillCloser:
    def __init__(self, ctx: ControlContext) -> None:
        self._ctx = ctx

    def close_due(self) -> float:
        """Record the ends that are due; returns how long to sleep until the next one."""
        now = utcnow()
        with self._ctx.sessions() as session:
            due = list(
                session.scalars(
                    select(Drill.id).where(
                        Drill.ended_at.is_(None), Drill.ends_at <= now - AFTER_END
                    )
                )
            )
            following = session.scalar(
                select(func.min(Drill.ends_at)).where(repository.is_active(now - AFTER_END))
            )
        for drill_id in due:
            with self._ctx.mutator.mutate(SYSTEM, affects_core=False) as m:
                drill = repository.get(m.session, drill_id)
                if drill is not None and drill.ended_at is None:
                    record_end(self._ctx, m, drill, SYSTEM)
        if following is None:
            return IDLE_WAIT_S
        wait = (following + AFTER_END - utcnow()).total_seconds()
        return min(max(wait, 0.0), IDLE_WAIT_S)

    def run(self, stop: threading.Event) -> None:
        run_until_stopped(
            stop,
            self._ctx.drills_changed,
            self.close_due,
            "drills: recording the ends that are due",
        )
