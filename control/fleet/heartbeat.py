"""Each replica says every `fleet.heartbeat_ms` that it is alive, which config version its data
plane runs (and the last one it refused), whether its limits are shared, on local shares or its
own, whether it leads, and its windowed status (for the fleet's status and doctor). It counts the
live replicas and tells its core, whose local shares divide by that count while Redis is away. A
replica that stops removes its row; one that dies is ignored once its heartbeat is older than
`fleet.dead_after_ms`."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import JSON, String, bindparam, cast, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

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
        from sluicegate import __version__

        row: dict[str, Any] = {
            "id": ctx.replica.id,
            "name": ctx.replica.label(),
            "data_address": ctx.replica.data_address or (ctx.bridge.address or ""),
            "admin_address": ctx.replica.admin_address,
            "package_version": __version__,
            "started_at": self._started,
            "heartbeat_at": now,
            "applied_version": ctx.bridge.core_version,
            "refused_version": None if refused is None else refused[0],
            "refused_message": None if refused is None else refused[1][:500],
            "limits_mode": limits_mode(ctx),
            "leader": self._leadership.leading.is_set(),
            "ready": not ctx.shutting_down.is_set(),
        }
        since = now - timedelta(milliseconds=ctx.settings.fleet.dead_after_ms)
        status = self._published_status()
        # Each statement of the beat is atomic on its own: no BEGIN and COMMIT round trips.
        with ctx.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            return write_beat(conn, row, status, since)

    def _published_status(self) -> str | None:
        """The windowed status for the peers to merge, as the core wrote it, or None with
        SQLite: there this process is the whole fleet, nobody reads it, and reading it is most
        of a beat's CPU (about 4 ms a second on the proxy's CPU, with its parse)."""
        ctx = self._ctx
        if ctx.fleet_schema is None:
            return None
        try:
            return read_status_text(ctx.bridge, fleet_windows(ctx.settings))
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


def write_beat(conn: Connection, row: dict[str, Any], status: str | None, since: datetime) -> int:
    """Upsert the replica's row and count the live replicas (itself included).

    The status goes in as the core's text: parsing it here only for the driver to encode it
    again was the beat's largest cost. On PostgreSQL the upsert and the count are one
    statement, one round trip: the count runs on the snapshot before the upsert, so it counts
    the others and adds this replica. The statements are built once (`_beat_statements`)."""
    *writes, count = _beat_statements(conn.dialect.name)
    params = {**row, "status": status, "since": since}
    for statement in writes:
        conn.execute(statement, params)
    return int(conn.scalar(count, params) or 0) + 1


@cache
def _beat_statements(dialect: str) -> tuple[Any, ...]:
    """The beat's statements, the last one counting the other live replicas: every column a
    parameter of its own name (`status` as JSON text), and `since`. On PostgreSQL the upsert
    rides in the count's `WITH`; on SQLite it runs first."""
    table = Replica.__table__
    values: dict[str, Any] = {c.name: bindparam(c.name, type_=c.type) for c in table.columns}
    status = bindparam("status", type_=String)
    # PostgreSQL takes the text as `json`; SQLite stores JSON as the text itself.
    values["status"] = cast(status, JSON) if dialect == "postgresql" else status
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    upsert = insert(Replica).values(values)
    updated = {c.name: upsert.excluded[c.name] for c in table.columns if c.name != "id"}
    upsert = upsert.on_conflict_do_update(index_elements=[table.c.id], set_=updated)
    others = (Replica.heartbeat_at >= bindparam("since")) & (Replica.id != bindparam("id"))
    count = select(func.count()).select_from(Replica).where(others)
    if dialect == "postgresql":
        return (count.add_cte(upsert.cte("beat")),)
    return upsert, count
