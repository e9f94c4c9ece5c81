"""The usage drainer: takes events from the core in batches and writes them to SQL, one
transaction per batch, idempotently by request id.

A batch that cannot be written is kept and retried (with backoff) before anything new is taken
from the core, so a database outage delays usage rows but does not lose them while the process
lives. Issue 7 adds the durable journal that also covers a crash.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from control.usage.repository import insert_events
from control.usage.schemas import UsageEvent

log = logging.getLogger("sluicegate.usage")

Source = Callable[[int, int], list[dict[str, Any]]]


class UsageDrainer:
    def __init__(
        self,
        source: Source,
        sessions: sessionmaker[Session],
        *,
        batch: int = 1000,
        timeout_ms: int = 200,
        max_backoff: float = 5.0,
    ) -> None:
        self._source = source
        self._sessions = sessions
        self._batch = batch
        self._timeout_ms = timeout_ms
        self._max_backoff = max_backoff
        self._pending: list[UsageEvent] = []
        self.written = 0

    def _parse(self, raw: list[dict[str, Any]]) -> list[UsageEvent]:
        events = []
        for item in raw:
            try:
                events.append(UsageEvent.model_validate(item))
            except ValidationError as e:
                # A malformed event is a bug in the core: say so loudly, keep the rest flowing.
                fields = ", ".join(str(err["loc"][0]) for err in e.errors() if err["loc"])
                log.error(
                    "usage event %s refused (fields: %s)", item.get("request_id", "?"), fields
                )
        return events

    def step(self, timeout_ms: int) -> int:
        """Write the pending batch, or take a new one from the core and write it."""
        if not self._pending:
            self._pending = self._parse(self._source(self._batch, timeout_ms))
        if not self._pending:
            return 0
        with self._sessions() as session, session.begin():
            new = insert_events(session, self._pending)
        taken = len(self._pending)
        self._pending = []
        self.written += new
        if new < taken:
            log.info("usage: %d of %d events were already stored", taken - new, taken)
        return taken

    def run(self, stop: threading.Event) -> None:
        delay = 0.1
        while not stop.is_set():
            try:
                self.step(self._timeout_ms)
                delay = 0.1
            except Exception as e:
                log.error(
                    "usage: writing %d events failed (%s); retrying in %.1fs",
                    len(self._pending),
                    type(e).__name__,
                    delay,
                )
                stop.wait(delay)
                delay = min(delay * 2, self._max_backoff)

    def flush(self, attempts: int = 5) -> int:
        """Drain until the core has nothing left (at shutdown); returns events handled."""
        total, failures = 0, 0
        while True:
            try:
                taken = self.step(0)
            except Exception as e:
                failures += 1
                if failures >= attempts:
                    log.error(
                        "usage: %d events could not be written at shutdown (%s)",
                        len(self._pending),
                        type(e).__name__,
                    )
                    return total
                time.sleep(0.2 * failures)
                continue
            if taken == 0:
                return total
            total += taken
