"""The usage drainer: takes events from the core in batches, writes each batch to SQL in one
transaction (raw rows idempotent by request id, rollups for the rows actually inserted), commits,
and only then acknowledges the batch's highest sequence number, so that the core's journal may
forget it.

A batch that cannot be written because the database is away is kept, retried with backoff and not
acknowledged: the journal grows meanwhile (the core bounds it, refusing billable requests past
`core.usage_backlog_limit`), and nothing new is taken until the batch is in. A batch the database
refuses for its values (a malformed event, a bug in the core) is split until the events at fault
are alone; those are kept in `usage_rejects` with the reason, the rest is written, and the batch is
acknowledged: nothing the core reported disappears, nothing blocks the journal forever.

Cost per event in this process: on SQLite the core's read of the batch and SQLite's own work,
with the GIL released (`writer.CoreSqliteWriter`); on PostgreSQL nothing (the server reads the
batch's JSON itself and returns its highest sequence number). The batch is parsed here (orjson)
only when the database refuses it, or for SQLite where the core cannot reach its library.
`bench/drainer.py` measures it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Engine
from sqlalchemy.exc import DataError, IntegrityError, ProgrammingError
from sqlalchemy.orm import Session, sessionmaker

from control.bridge.core_bridge import CoreBridge
from control.process.settings import UsageSettings
from control.timeutil import utcnow
from control.usage.events import missing_fields
from control.usage.models import UsageReject
from control.usage.writer import CoreSqliteWriter, TextWriter, write_events

log = logging.getLogger("sluicegate.usage")

# `Core.drain_usage(max, timeout_ms)`: a JSON array of events, UTF-8.
Source = Callable[[int, int], bytes]
Ack = Callable[[int], None]
Backlog = Callable[[], int]


def refused_values(error: BaseException) -> bool:
    """The database (or the rollup arithmetic) refused values of the batch: retrying the same
    batch cannot help. Anything else (unreachable, locked, timed out) is worth a retry. The
    core's SQLite writer raises ValueError for what it refuses; Python's `sqlite3` raises
    OverflowError for an integer beyond 64 bits."""
    refused = IntegrityError | DataError | TypeError | ValueError | KeyError | OverflowError
    if isinstance(error, refused):
        return True
    # SQLite refuses a value it cannot bind (an object where a number belongs) this way.
    return isinstance(error, ProgrammingError) and "binding parameter" in str(error.orig)


@dataclass
class Batch:
    events: list[dict[str, Any]]
    # The highest sequence number handed out in this batch: acknowledged once it is stored.
    last_seq: int | None
    rejects: list[tuple[Any, str]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.events) + len(self.rejects)


def parse(raw: bytes) -> Batch:
    """One parse of the batch. Fields are not checked one by one here: an event missing one
    fails the batch's write, and the batch is then split until that event is alone (see
    `_store_apart`)."""
    try:
        items = orjson.loads(raw)
    except ValueError as e:
        text = raw.decode(errors="replace")
        return Batch([], None, [(text, f"the batch is not JSON: {e}")])
    if not isinstance(items, list):
        return Batch([], None, [(items, "the batch is not a JSON array")])
    events: list[dict[str, Any]] = []
    rejects: list[tuple[Any, str]] = []
    last_seq: int | None = None
    for item in items:
        if type(item) is not dict:
            rejects.append((item, "not a JSON object"))
            continue
        events.append(item)
        seq = item.get("seq")
        if type(seq) is int and (last_seq is None or seq > last_seq):
            last_seq = seq
    return Batch(events, last_seq, rejects)


def _batch_writer(
    sessions: sessionmaker[Session], postgresql_slices: int | None
) -> TextWriter | CoreSqliteWriter | None:
    """What stores a batch's text as the core handed it out (PostgreSQL's server, or the core
    itself for SQLite); `None`: the batch is parsed here and written through the session."""
    with sessions() as session:
        bind = session.get_bind()
    if not isinstance(bind, Engine):
        return None
    return TextWriter.of(bind, postgresql_slices) or CoreSqliteWriter.of(bind)


def _reject_row(item: Any, reason: str) -> UsageReject:
    seq = item.get("seq") if isinstance(item, dict) else None
    request_id = item.get("request_id") if isinstance(item, dict) else None
    payload = json.dumps(item, default=str)
    return UsageReject(
        seq=seq if type(seq) is int else None,
        request_id=request_id[:200] if isinstance(request_id, str) else None,
        reason=reason[:500],
        payload=payload,
        recorded_at=utcnow(),
    )


def _refusal(error: BaseException) -> str:
    orig = getattr(error, "orig", None) or error
    first = (str(orig).splitlines() or [""])[0]
    return f"refused by the database: {type(orig).__name__}: {first}"[:500]


class UsageDrainer:
    def __init__(
        self,
        source: Source,
        sessions: sessionmaker[Session],
        *,
        ack: Ack | None = None,
        backlog: Backlog | None = None,
        batch: int = 5000,
        timeout_ms: int = 200,
        linger_ms: int = 0,
        max_backoff: float = 5.0,
        postgresql_slices: int | None = None,
    ) -> None:
        self._source = source
        self._sessions = sessions
        self._ack = ack
        self._backlog = backlog
        self._batch = batch
        self._timeout_ms = timeout_ms
        self._linger = linger_ms / 1000
        self._max_backoff = max_backoff
        # What takes a batch's text as it is (PostgreSQL's server, the core for SQLite), on a
        # connection held from one batch to the next.
        self._writer = _batch_writer(sessions, postgresql_slices)
        # Taken from the core, not stored yet: the text as handed out, and its parse once needed.
        self._pending: bytes | None = None
        self._parsed: Batch | None = None
        # Stored, but its acknowledgement failed: covered by the next one, or tried again when the
        # core has nothing new.
        self._ack_due: int | None = None
        # Rows inserted, events kept as rejects, and the last sequence number acknowledged.
        self.written = 0
        self.rejected = 0
        self.acknowledged: int | None = None

    @property
    def pending(self) -> int:
        """Events taken from the core and not yet stored (a batch waiting for the database)."""
        return 0 if self._pending is None else self._parse_pending().size

    def _parse_pending(self) -> Batch:
        if self._parsed is None:
            self._parsed = parse(self._pending or b"[]")
        return self._parsed

    def step(self, timeout_ms: int, *, gentle: bool = False) -> int:
        """Write the pending batch, or take a new one from the core and write it; returns the
        events handled. Raises when the database is unreachable (the batch is kept). `gentle`:
        steady draining beside live traffic (see `_store`)."""
        if self._pending is None:
            raw = self._source(self._batch, timeout_ms)
            if raw == b"[]":
                if self._ack_due is not None:
                    # Nothing new to cover it: the journal would keep those events forever.
                    self._acknowledge(self._ack_due)
                return 0
            self._pending, self._parsed = raw, None
        size, last_seq = self._store(self._pending, gentle)
        self._pending = self._parsed = None
        if last_seq is not None:
            self._acknowledge(last_seq)
        return size

    def _behind(self) -> bool:
        """A full batch or more waits in the core: catching up, with no pause between batches."""
        return self._backlog is not None and self._backlog() >= self._batch

    def _acknowledge(self, seq: int) -> None:
        if self._ack is None:
            return
        try:
            self._ack(seq)
        except Exception as e:
            # Stored but still journaled: a replay meanwhile would only find the rows stored.
            self._ack_due = seq
            log.error("usage: acknowledging seq %d failed: %s", seq, e)
            return
        self._ack_due = None
        self.acknowledged = seq

    def _store(self, text: bytes, gentle: bool) -> tuple[int, int | None]:
        """Store the batch `text`; returns the events it held (stored or kept as rejects) and its
        highest sequence number. `gentle`: unless a full batch waits, the work comes in short
        stretches, so that a request path's worker that woke meanwhile runs at once rather than
        after a scheduler tick: SQLite's insert yields the CPU between slices of its rows
        (`writer._write_sqlite`; the yield costs a system call when nothing waits, about 0.3 us
        per event, where a sleep cost 8 us on this VM: bench/README.md), and PostgreSQL's
        batch goes in slices, a statement each (`writer.TextWriter`). Otherwise, and on SQLite
        always, in one transaction."""
        pause = os.sched_yield if gentle and not self._behind() else None
        batch: Batch | None = None
        try:
            if self._writer is not None:
                stored = self._writer.write(text, pause is not None)
                new, events, last_seq = stored.inserted, stored.events, stored.last_seq
            else:
                with self._sessions() as session, session.begin():
                    batch = self._parse_pending()
                    new = write_events(session, batch.events, pause)
                    session.add_all(_reject_row(item, reason) for item, reason in batch.rejects)
                events, last_seq = len(batch.events), batch.last_seq
        except Exception as e:
            if not refused_values(e):
                raise
            log.error(
                "usage: a batch could not be written as is (%s: %s); isolating the events at fault",
                type(e).__name__,
                str(e).splitlines()[0] if str(e) else "",
            )
            batch = self._parse_pending()
            new = self._store_apart(batch.events)
            if batch.rejects:
                self._keep_rejects(batch.rejects)
            events, last_seq = len(batch.events), batch.last_seq
        else:
            if new < events:
                log.info("usage: %d of %d events were stored already", events - new, events)
        self.written += new
        rejects = batch.rejects if batch is not None else []
        for item, reason in rejects:
            self._report(item, reason)
        return events + len(rejects), last_seq

    def _store_apart(self, events: Sequence[dict[str, Any]]) -> int:
        """Write halves apart until the events the database refuses are alone; keep those."""
        try:
            with self._sessions() as session, session.begin():
                return write_events(session, events)
        except Exception as e:
            if not refused_values(e):
                raise
            if len(events) == 1:
                missing = missing_fields(events[0])
                reason = f"missing fields: {', '.join(missing)}" if missing else _refusal(e)
                self._keep_rejects([(events[0], reason)])
                self._report(events[0], reason)
                return 0
            half = len(events) // 2
            return self._store_apart(events[:half]) + self._store_apart(events[half:])

    def _keep_rejects(self, rejects: Sequence[tuple[Any, str]]) -> None:
        with self._sessions() as session, session.begin():
            session.add_all(_reject_row(item, reason) for item, reason in rejects)

    def _report(self, item: Any, reason: str) -> None:
        self.rejected += 1
        request_id = item.get("request_id", "?") if isinstance(item, dict) else "?"
        log.error("usage event %s refused (%s); kept in usage_rejects", request_id, reason)

    def run(self, stop: threading.Event) -> None:
        """Drain for as long as the process runs (until `stop`)."""
        with self._connection_released():
            self._loop(stop=stop, deadline=None, until_empty=False)

    def drain(self, *, deadline: float | None = None, stop: threading.Event | None = None) -> bool:
        """Write and acknowledge until the core holds no unacknowledged event (at start, to
        replay the journal; at shutdown, after the core stopped). Retries while the database is
        away, until `deadline` (monotonic) or `stop`; returns whether everything was stored."""
        with self._connection_released():
            return self._loop(stop=stop, deadline=deadline, until_empty=True)

    def close(self) -> None:
        """Release the connection held from one batch to the next (`step` keeps it)."""
        if self._writer is not None:
            self._writer.close()

    @contextmanager
    def _connection_released(self) -> Iterator[None]:
        """The connection is held while draining, not between the replay at start and the
        drainer's thread, nor after."""
        try:
            yield
        finally:
            self.close()

    def _loop(
        self, *, stop: threading.Event | None, deadline: float | None, until_empty: bool
    ) -> bool:
        """The one loop of both: take and store batches, with backoff while the database is away.
        `until_empty`: end when the core holds nothing (True) or at the deadline or stop (False);
        otherwise end at stop, lingering between batches so each carries many events."""

        def over(after: float = 0.0) -> bool:
            late = deadline is not None and time.monotonic() + after > deadline
            return late or (stop is not None and stop.is_set())

        def wait(seconds: float) -> None:
            if stop is not None:
                stop.wait(seconds)
            else:
                time.sleep(seconds)

        delay = 0.1
        while until_empty or not over():
            try:
                # Replaying at start or emptying at stop is catching up: no yielding then.
                taken = self.step(50 if until_empty else self._timeout_ms, gentle=not until_empty)
                delay = 0.1
            except Exception as e:
                if until_empty and over(delay):
                    log.error(
                        "usage: %d events could not be written (%s); they stay in the journal",
                        self.pending,
                        type(e).__name__,
                    )
                    return False
                log.error(
                    "usage: writing %d events failed (%s); retrying in %.1fs",
                    self.pending,
                    type(e).__name__,
                    delay,
                )
                wait(delay)
                delay = min(delay * 2, self._max_backoff)
                continue
            if until_empty:
                if taken == 0 and (self._backlog is None or self._backlog() == 0):
                    return True
                if over():
                    log.error("usage: events are still waiting in the journal; they stay there")
                    return False
            elif taken and self._linger and not self._behind():
                # Let the next batch fill up, so that the commit (an fsync) and the per-batch
                # statements are paid per many events, not per few. The cost is a later row in
                # SQL, never a slower request. (Lingering only after a part batch took a full
                # one and then, at once, the few left over: every other batch paid the fixed
                # cost for a handful of events.)
                wait(self._linger)
        return True


def usage_drainer(
    bridge: CoreBridge, sessions: sessionmaker[Session], settings: UsageSettings
) -> UsageDrainer:
    """The drainer of this core, as configured."""
    return UsageDrainer(
        bridge.drain_usage,
        sessions,
        ack=bridge.ack_usage,
        backlog=bridge.usage_backlog,
        batch=settings.drain_batch,
        timeout_ms=settings.drain_timeout_ms,
        linger_ms=settings.drain_linger_ms,
        postgresql_slices=settings.postgresql_slices,
    )
