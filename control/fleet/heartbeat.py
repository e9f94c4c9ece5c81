"""Each replica says every `fleet.heartbeat_ms` that it is alive, which config version its data
plane runs (and the last one it refused), whether its limits are shared, on local shares or its
own, whether it leads, and its windowed status (for the fleet's status and doctor). It counts the
live replicas and tells its core, whose local shares divide by that count while Redis is away. A
replica that stops removes its row; one that dies is ignored once its heartbeat is older than
`fleet.dead_after_ms`."""

from __future__ import annotations

import json
import logging
import threading
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, select

from control.context import ControlContext
from control.diagnosis.service import doctor_windows
from control.fleet.follower import Follower
from control.fleet.leader import Leadership
from control.fleet.models import Replica
from control.process.settings import Settings
from control.status.schemas import WindowSpec
from control.status.source import DEFAULT_WINDOWS, read_status_text
from control.timeutil import utcnow

log = logging.getLogger("sluicegate.fleet")


def fleet_windows(settings: Settings) -> list[WindowSpec]:
    """What each replica publishes: the status page's windows and the doctor's (by the
    settings)."""
    return [*DEFAULT_WINDOWS, *doctor_windows(settings.doctor)]


def limits_mode(ctx: ControlContext) -> str:
    status = ctx.bridge.fleet_status()
    return "local" if status is None else str(status.get("mode", "local"))


class Heartbeat:
    def __init__(self, ctx: ControlContext, follower: Follower, leadership: Leadership) -> None:
        self._ctx = ctx
        self._follower = follower
        self._leadership = leadership
        self._started = utcnow()

    def beat(self) -> int:
        """Write this replica's row; returns the live replicas."""
        ctx = self._ctx
        now = utcnow()
        refused = self._follower.refused
        status = self._published_status()
        from sluicegate import __version__

        row = Replica(
            id=ctx.replica.id,
            name=ctx.replica.label(),
            data_address=ctx.replica.data_address or (ctx.bridge.address or ""),
            admin_address=ctx.replica.admin_address,
            package_version=__version__,
            started_at=self._started,
            heartbeat_at=now,
            applied_version=ctx.bridge.core_version,
            refused_version=None if refused is None else refused[0],
            refused_message=None if refused is None else refused[1][:500],
            limits_mode=limits_mode(ctx),
            leader=self._leadership.leading.is_set(),
            ready=not ctx.shutting_down.is_set(),
            status=status,
        )
        since = now - timedelta(milliseconds=ctx.settings.fleet.dead_after_ms)
        with ctx.sessions() as session:
            session.merge(row)
            session.commit()
            live = session.scalar(
                select(func.count()).select_from(Replica).where(Replica.heartbeat_at >= since)
            )
        return max(int(live or 1), 1)

    def _published_status(self) -> dict[str, Any] | None:
        """The windowed status for the peers to merge, or None with SQLite: there this process
        is the whole fleet, nobody reads it, and reading and parsing it is most of a beat's
        CPU (about 4 ms a second on the proxy's CPU)."""
        ctx = self._ctx
        if ctx.fleet_schema is None:
            return None
        try:
            status: dict[str, Any] = json.loads(
                read_status_text(ctx.bridge, fleet_windows(ctx.settings))
            )
            return status
        except Exception:
            log.debug("status unavailable for the heartbeat", exc_info=True)
            return None

    def run(self, stop: threading.Event) -> None:
        period = self._ctx.settings.fleet.heartbeat_ms / 1000
        while True:
            try:
                self._ctx.bridge.set_fleet_size(self.beat())
            except Exception as e:
                log.warning("fleet heartbeat failed: %s", e)
            if stop.wait(period):
                break
        self.leave()

    def leave(self) -> None:
        try:
            with self._ctx.sessions() as session:
                session.execute(delete(Replica).where(Replica.id == self._ctx.replica.id))
                session.commit()
        except Exception as e:
            log.warning("could not remove this replica from the fleet: %s", e)
