"""Replicas of a fleet starting together take turns at the first writes of their start.

Storing the secrets' checks, the configured admin token and the bootstrap objects each read a
row and insert it when it is missing. On a new database, replicas started at the same moment
all find it missing, and all but one fail on the primary key (`SLUICEGATE_*` in a shell loop
starts them within milliseconds). On PostgreSQL those steps run under a session-level advisory
lock named after the schema, so the second replica finds the first one's rows. SQLite is one
process's database: nothing to take turns with."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine

from control.api.errors import StartupError
from control.fleet.channel import direct_connection, is_postgresql, lock_key, namespace

WAIT_SECONDS = 120.0
POLL_SECONDS = 0.05


@contextmanager
def startup_turn(
    engine: Engine, stop: threading.Event | None = None, wait_seconds: float = WAIT_SECONDS
) -> Iterator[None]:
    """Hold the fleet's startup lock for the block. A replica that cannot have it within
    `wait_seconds` (another one hangs half-started), or is told to stop, does not start."""
    if not is_postgresql(engine):
        yield
        return
    key = lock_key(namespace(engine), "startup")
    conn = direct_connection(engine, autocommit=True)
    try:
        deadline = time.monotonic() + wait_seconds
        while not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            if stop is not None and stop.is_set():
                raise StartupError("stopped while waiting for another replica's start")
            if time.monotonic() >= deadline:
                raise StartupError(
                    f"another replica has been starting for over {wait_seconds:.0f} s "
                    "(it holds the fleet's startup lock); start this one when it is up or gone"
                )
            time.sleep(POLL_SECONDS)
        yield
    finally:
        # The lock belongs to this connection's session: closing it lets the next replica go.
        conn.close()
