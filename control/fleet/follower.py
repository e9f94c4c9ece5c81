"""Each replica follows what the fleet committed: the configuration (the version another replica
committed, rebuilt from this replica's own read of the database and applied to its core) and the
drills (started or ended through any replica, held by every core for what is left of them).

It wakes on a notification (`channel.py`) and at least every `fleet.heartbeat_ms` (a notification
sent while this replica was disconnected is lost, so the committed version is also checked
periodically). A version the core refuses (a rolling upgrade with version skew) keeps the last
good snapshot in force; the refusal is reported by the heartbeat until a later version applies."""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import threading
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from control.api.errors import CoreRejected
from control.bridge.mutation import key_hint
from control.bridge.state import ControlState
from control.context import ControlContext
from control.drills import repository as drills
from control.drills.models import Drill
from control.fleet.channel import direct_connection
from control.timeutil import utcnow

log = logging.getLogger("sluicegate.fleet")

RECONNECT_S = 1.0

# A drill as a core holds it: pool, member (None: the whole pool), end.
_HeldDrill = tuple[str, str | None, datetime]

# The committed config version beside each active drill (one row with no drill when none is).
_COMMITTED = (
    sa.select(ControlState.config_version, Drill.id, Drill.pool_id, Drill.member_id, Drill.ends_at)
    .select_from(ControlState)
    .outerjoin(Drill, drills.is_active(sa.bindparam("now", type_=Drill.__table__.c.ends_at.type)))
    .where(ControlState.id == 1)
    .order_by(Drill.id)
)


class Follower:
    def __init__(self, ctx: ControlContext, channel: str | None) -> None:
        self._ctx = ctx
        self._channel = channel
        # Drills this core holds because of the database: id -> (pool, member, ends_at).
        self._held: dict[str, _HeldDrill] = {}
        self.refused: tuple[int, str] | None = None
        # Written by `wake`: the wait on the LISTEN connection ends at once when the jobs stop,
        # not up to a heartbeat later (a stopping replica would otherwise sit out the wait).
        self._waker: tuple[socket.socket, socket.socket] | None = None

    def sync(self, notes: list[dict[str, Any]] | None = None) -> None:
        """Bring the core to what is committed: config version, then drills. `notes` are the
        notifications that woke it (a key change among them may be applied as such).

        What is committed is read first in one statement on an autocommit connection; the
        config is rebuilt (`Mutator.follow`, its own repeatable-read transaction) only when
        its version moved past the core's. Most checks find nothing new, and each costs the
        proxy's CPU once a second: a session per read cost four round trips."""
        now = utcnow()
        version, running = self._committed(now)
        if version > (self._ctx.bridge.core_version or 0):
            self._follow_config(notes)
        self._sync_drills(running, now)

    def _committed(self, now: datetime) -> tuple[int, dict[str, _HeldDrill]]:
        """The committed config version and the drills active at `now`."""
        with self._ctx.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            rows = conn.execute(_COMMITTED, {"now": now}).all()
        version = rows[0].config_version if rows else 0
        running = {r.id: (r.pool_id, r.member_id, r.ends_at) for r in rows if r.id is not None}
        return version, running

    def _follow_config(self, notes: list[dict[str, Any]] | None) -> None:
        hints = [h for h in (key_hint(n) for n in notes or []) if h is not None]
        try:
            applied = self._ctx.mutator.follow(hints[-1] if hints else None)
            if applied is not None:
                log.info("config version %d applied (committed by the fleet)", applied)
                self.refused = None
        except CoreRejected as e:
            rejection = self._ctx.bridge.last_rejection
            version = rejection.version if rejection is not None else 0
            if self.refused is None or self.refused[0] != version:
                log.error("this replica refuses the committed config: %s", e.message)
            self.refused = (version, e.message)

    def _sync_drills(self, running: dict[str, _HeldDrill], now: datetime) -> None:
        for drill_id, (pool, member, ends_at) in running.items():
            if self._held.get(drill_id) == (pool, member, ends_at):
                continue
            try:
                self._ctx.bridge.drill(pool, member, (ends_at - now).total_seconds())
                self._held[drill_id] = (pool, member, ends_at)
            except ValueError as e:
                log.warning("drill %s cannot be held here: %s", drill_id, e)
        for drill_id in [d for d in self._held if d not in running]:
            pool, member, ends_at = self._held.pop(drill_id)
            if ends_at > now:
                # Ended early through some replica: end it here too.
                with contextlib.suppress(ValueError):
                    self._ctx.bridge.drill(pool, member, 0)

    def run(self, stop: threading.Event) -> None:
        period = self._ctx.settings.fleet.heartbeat_ms / 1000
        waker = self._waker = socket.socketpair()
        try:
            self._follow(stop, period)
        finally:
            self._waker = None
            for end in waker:
                end.close()

    def wake(self) -> None:
        """End the current wait (the jobs are stopping: `run` then sees its stop event)."""
        waker = self._waker
        if waker is not None:
            with contextlib.suppress(OSError):
                waker[1].send(b"\0")

    def _follow(self, stop: threading.Event, period: float) -> None:
        while not stop.is_set():
            conn = self._listen()
            try:
                self.sync()
                while not stop.is_set():
                    notes: list[dict[str, Any]] = []
                    if conn is None:
                        stop.wait(period)
                    elif not self._wait(conn, period, notes):
                        break  # the connection failed: listen again
                    if not stop.is_set():
                        self.sync(notes)
            except Exception:
                log.exception("following the fleet failed; retrying")
                stop.wait(RECONNECT_S)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()

    def _listen(self) -> Any:
        if self._channel is None:
            return None
        try:
            conn = direct_connection(self._ctx.engine, autocommit=True)
            conn.execute(f'LISTEN "{self._channel}"')
            return conn
        except Exception as e:
            log.warning("cannot listen for the fleet's changes (%s); checking periodically", e)
            return None

    def _wait(self, conn: Any, timeout: float, notes: list[dict[str, Any]]) -> bool:
        """Wait up to `timeout` for notifications, collected in `notes`; False if the
        connection is gone."""
        try:
            waiting_on = [conn.fileno()]
            if self._waker is not None:
                waiting_on.append(self._waker[0].fileno())
            readable, _, _ = select.select(waiting_on, [], [], timeout)
            if conn.fileno() in readable:
                # Every pending notification: one sync covers them all.
                for note in conn.notifies(timeout=0):
                    try:
                        payload = json.loads(note.payload)
                    except ValueError:
                        continue
                    if isinstance(payload, dict):
                        notes.append(payload)
            return not conn.closed
        except Exception:
            return False
