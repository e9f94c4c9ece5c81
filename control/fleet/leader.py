"""One replica of the fleet runs the jobs that must run once (retention of raw usage rows, the
price activator, the drill closer): the one holding a session-level PostgreSQL advisory lock on
a connection of its own. If it dies, its session ends and the lock with it; another replica,
trying every `RETRY_S`, takes over well within 10 s. A leader that loses its connection stops
its jobs at once (its lock may already be someone else's). With SQLite the one process leads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from control.fleet.channel import direct_connection, lock_key
from control.process.thread_names import named

log = logging.getLogger("sluicegate.fleet")

RETRY_S = 2.0
# How often a leader checks that its lock's connection still lives.
CHECK_S = 1.0

Job = tuple[str, Callable[[threading.Event], None]]


class Leadership:
    def __init__(
        self,
        engine: Any,
        schema: str | None,
        jobs: list[Job],
        wake: list[threading.Event] | None = None,
    ) -> None:
        """`schema` None: no election (SQLite), this process leads. `wake`: events the jobs
        sleep on, set to wake them when they must stop."""
        self._engine = engine
        self._key = None if schema is None else lock_key(schema, "leader")
        self._jobs = jobs
        self._wake = wake or []
        self.leading = threading.Event()

    def run(self, stop: threading.Event) -> None:
        if self._key is None:
            self._lead(stop, alive=lambda: True)
            return
        while not stop.is_set():
            conn = self._try_lock()
            if conn is None:
                stop.wait(RETRY_S)
                continue
            log.info("this replica leads the fleet's jobs")
            try:
                self._lead(stop, alive=partial(_alive, conn))
            finally:
                _close(conn, self._key)
            if not stop.is_set():
                log.warning("this replica lost the fleet's leadership")

    def _try_lock(self) -> Any:
        try:
            conn = direct_connection(self._engine, autocommit=True)
        except Exception as e:
            log.debug("leader election: cannot connect (%s)", e)
            return None
        try:
            if conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()[0]:
                return conn
        except Exception as e:
            log.debug("leader election failed (%s)", e)
        conn.close()
        return None

    def _lead(self, stop: threading.Event, alive: Callable[[], bool]) -> None:
        """Run the jobs until `stop` or until `alive()` says the lock is gone."""
        jobs_stop = threading.Event()
        threads = [
            threading.Thread(target=named(target), args=(jobs_stop,), name=name, daemon=True)
            for name, target in self._jobs
        ]
        self.leading.set()
        for thread in threads:
            thread.start()
        try:
            while not stop.wait(CHECK_S):
                if not alive():
                    break
        finally:
            self.leading.clear()
            jobs_stop.set()
            for event in self._wake:
                event.set()
            for thread in threads:
                thread.join()


def _alive(conn: Any) -> bool:
    try:
        conn.execute("SELECT 1")
        return True
    except Exception:
        return False


def _close(conn: Any, key: int | None) -> None:
    try:
        if key is not None:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        conn.close()
    except Exception:
        pass
