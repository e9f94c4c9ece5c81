"""One batch of usage events into SQL, inside the caller's transaction: raw rows inserted once per
request id (insert-or-ignore), and the rollups of exactly the rows inserted (a replayed event,
ignored by the insert, is not counted twice), added with one upsert per batch.

Each database takes the batch the cheapest way, because the drainer shares the gateway's CPU:
- PostgreSQL gets the batch's JSON text (UTF-8 bytes) as it came from the core, as one
  parameter: the server unpacks it (`json_to_recordset`), inserts, aggregates what it inserted
  into the rollups and returns the counts and the batch's highest sequence number, in one
  statement, one round trip (`TextWriter`). This process passes the bytes on as they are and
  never parses the batch (unless the server refuses it). Beside live traffic the batch goes in
  slices of about `POSTGRESQL_SLICE_BYTES`, a statement each, cut between events: see
  `TextWriter`.
- SQLite runs in this process, on the CPU the request path uses. The core stores the batch's
  text itself (`CoreSqliteWriter`): it reads the JSON into rows of values and binds them to
  `SQLITE_CORE_INSERT` through the SQLite library Python loaded, with `started_at` formatted
  as SQLite's `strftime` would; it sums the rows actually inserted per bucket and group as it
  goes, and adds the sums with `SQLITE_ROLLUP_UPSERT`. This process neither parses the batch
  nor builds a tuple per event (that and Python's binding of each value were about a quarter
  of the ledger's CPU per event; `strftime` per row and the rollup read back from the new rows,
  a quarter of what was left: bench/README.md). Where the core cannot reach that library (a
  Python with SQLite linked in statically, its symbols hidden), and for a batch the core
  refuses (split to isolate a refused event), Python does it in SQL: one `executemany` of
  plain tuples from the parsed events (`SQLITE_INSERT`), then `SQLITE_ROLLUP`, the rollups
  aggregated by SQLite from the rows just inserted (ids above the largest before the batch:
  the drainer is the only writer of usage rows). Both store the same rows and rollups (a test
  holds them to it). Either way, given a pause, the insert runs in slices of `SQLITE_SLICE`
  rows with the CPU given up between them: see `_write_sqlite`.
Aggregating in Python instead cost about as much as everything else together when a batch holds
many keys (each event then makes its own three rollup rows).
"""

from __future__ import annotations

import _sqlite3
import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from sluicegate._core import LedgerError, SqliteLedger
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from control.db import SQLITE_PRAGMAS
from control.usage.events import ADDED_LATER, BETWEEN_EVENTS, ERROR_OUTCOMES, FIELDS, complete
from control.usage.models import GRANULARITIES
from control.usage.rollups import COUNTERS

log = logging.getLogger("sluicegate.usage")

_STARTED_AT = FIELDS.index("started_at")
_fields = itemgetter(*FIELDS)


def _row(event: dict[str, Any]) -> tuple[Any, ...]:
    try:
        return _fields(event)  # type: ignore[no-any-return]
    except KeyError:
        # An event of an earlier release; one truly missing a field raises again.
        return _fields(complete(event))  # type: ignore[no-any-return]


_PG_TYPES = {
    "seq": "bigint",
    "stream": "boolean",
    "status": "integer",
    "prompt_tokens": "bigint",
    "completion_tokens": "bigint",
    "cached_tokens": "bigint",
    "cache_write_tokens": "bigint",
    "reasoning_tokens": "bigint",
    "cost_micros": "bigint",
    "price_version": "bigint",
    "queue_wait_ms": "double precision",
    "connect_ms": "double precision",
    "ttft_ms": "double precision",
    "tpot_ms": "double precision",
    "duration_ms": "double precision",
    "started_at": "double precision",
    "attempts": "integer",
    "fallback": "boolean",
    "client_retry_count": "integer",
    # The core sends the tags object as its JSON text; `_selected` casts it.
    "tags": "text",
}

# A rollup row is per granularity, bucket and these.
_ROLLUP_GROUP = ("tenant_id", "key_id", "model")
_ROLLUP_COLUMNS = ("granularity", "bucket", *_ROLLUP_GROUP, *COUNTERS)
_ERROR = ", ".join(f"'{o}'" for o in sorted(ERROR_OUTCOMES))
# The counters of `COUNTERS` over the rows of `u`, in that order.
_SUM_EXPRESSIONS = (
    "count(*)",
    "sum(u.prompt_tokens)",
    "sum(u.completion_tokens)",
    "sum(u.cached_tokens)",
    "sum(u.cost_micros)",
    f"sum(CASE WHEN u.status >= 400 OR u.outcome IN ({_ERROR}) THEN 1 ELSE 0 END)",
)
_SUMS = ", ".join(_SUM_EXPRESSIONS)
_ADD = ", ".join(f"{c} = usage_rollups.{c} + excluded.{c}" for c in COUNTERS)
_UPSERT = f"ON CONFLICT (granularity, key_id, bucket, model) DO UPDATE SET {_ADD}"


def _rollup_insert(source: str, unix: str, granularities: str) -> str:
    """Aggregate the rows of `source` (aliased `u`) per granularity and add them."""
    bucket = f"({unix} / g.seconds) * g.seconds"
    return (
        f"INSERT INTO usage_rollups ({', '.join(_ROLLUP_COLUMNS)}) "
        f"SELECT g.name, {bucket}, u.tenant_id, u.key_id, u.model, {_SUMS} "
        f"FROM {source} CROSS JOIN {granularities} "
        f"GROUP BY g.name, {bucket}, u.tenant_id, u.key_id, u.model {_UPSERT}"
    )


# --- SQLite ------------------------------------------------------------------------------------

_SQLITE_VALUES = ["?"] * len(FIELDS)
# The text form SQLAlchemy stores datetimes in on SQLite (microseconds; SQLite keeps millis).
_SQLITE_VALUES[_STARTED_AT] = "strftime('%Y-%m-%d %H:%M:%f', ?, 'unixepoch') || '000'"
# `recorded_at` is SQLite's clock (UTC) in the same form: a parameter for it made every row a
# tuple built in Python twice (the event's fields, then those plus one).
SQLITE_INSERT = (
    f"INSERT INTO usage_records ({', '.join(FIELDS)}, recorded_at) "
    f"VALUES ({', '.join(_SQLITE_VALUES)}, strftime('%Y-%m-%d %H:%M:%f', 'now') || '000') "
    "ON CONFLICT (request_id) DO NOTHING"
)
# The rows inserted (ids above the largest before the batch) summed per minute once, then those
# few sums per minute, hour and day: the date text is parsed once per row, not once per
# granularity. (`WHERE true` settles SQLite's parsing of an upsert after a SELECT with a join.)
SQLITE_ROLLUP = (
    "WITH m AS MATERIALIZED (SELECT "
    "(CAST(strftime('%s', u.started_at) AS INTEGER) / 60) * 60 AS minute, "
    "u.tenant_id, u.key_id, u.model, "
    + ", ".join(f"{e} AS {c}" for e, c in zip(_SUM_EXPRESSIONS, COUNTERS, strict=True))
    + " FROM usage_records AS u WHERE u.id > ? GROUP BY 1, 2, 3, 4) "
    f"INSERT INTO usage_rollups ({', '.join(_ROLLUP_COLUMNS)}) "
    "SELECT g.name, (m.minute / g.seconds) * g.seconds AS bucket, m.tenant_id, m.key_id, m.model, "
    + ", ".join(f"sum(m.{c})" for c in COUNTERS)
    + " FROM m CROSS JOIN (SELECT 'minute' AS name, 60 AS seconds UNION ALL SELECT 'hour', 3600 "
    "UNION ALL SELECT 'day', 86400) AS g WHERE true "
    f"GROUP BY g.name, bucket, m.tenant_id, m.key_id, m.model {_UPSERT}"
)


# The highest row id before a batch: its rows are those above it (the rollup's parameter).
SQLITE_HIGH_WATER = "SELECT coalesce(max(id), 0) FROM usage_records"

# The core's statements: the fields (`started_at` as the text `SQLITE_INSERT` would store), then
# `recorded_at` (the batch's clock, in the same form); and one bucket's sums per granularity
# and group, added.
SQLITE_CORE_INSERT = (
    f"INSERT INTO usage_records ({', '.join(FIELDS)}, recorded_at) "
    f"VALUES ({', '.join(['?'] * (len(FIELDS) + 1))}) ON CONFLICT (request_id) DO NOTHING"
)
SQLITE_ROLLUP_UPSERT = (
    f"INSERT INTO usage_rollups ({', '.join(_ROLLUP_COLUMNS)}) "
    f"VALUES ({', '.join(['?'] * len(_ROLLUP_COLUMNS))}) {_UPSERT}"
)
# What the core sums, in `COUNTERS`' order: one request a row, the fields named as the counters
# between `requests` and `errors`, one error where `events.is_error` says (as `_SUM_EXPRESSIONS`).
_ROLLUP_SUMS = COUNTERS[1:-1]

# Rows per insert statement when the caller pauses between them: about 0.2 ms of CPU.
SQLITE_SLICE = 16

# The core's ledger connection: every connection's settings, and a page cache of 16 MiB where
# SQLite's default is 2. A batch touches a leaf of the per-key index for each key it holds, and
# the leaves of four more trees; with 100 keys that is about 2 MiB of 16 KiB pages, so the
# default cache (125 such pages) missed within every batch, spilled pages into the WAL before
# the commit and read others back: 1.3 us of the ledger's 9.5 per event (bench/README.md,
# 2026-12-06, night). The cache fills only as the ledger's trees grow; 64 MiB was no cheaper
# with 100 keys or with 5000.
SQLITE_LEDGER_PRAGMAS = (*SQLITE_PRAGMAS, "PRAGMA cache_size=-16384")


@contextlib.contextmanager
def _driver_cursor(conn: Connection, statement: str) -> Iterator[Any]:
    """A cursor of the driver's own, for `statement`: through SQLAlchemy a statement cost more
    than a slice's rows (SQLite) and about as much as this process's share of a slice's
    statement (PostgreSQL: 186 against 103 us of CPU, bench/README.md). The driver's errors
    are raised as SQLAlchemy raises them, so that the drainer tells a refused value from an
    unreachable database, and a connection the driver lost is invalidated, not pooled again."""
    dbapi_error = conn.dialect.loaded_dbapi.Error
    dbapi_connection = conn.connection.dbapi_connection
    cursor = conn.connection.cursor()
    try:
        yield cursor
    except dbapi_error as e:
        if conn.dialect.is_disconnect(e, dbapi_connection, cursor):
            conn.invalidate(e)
        raise DBAPIError.instance(
            statement, None, e, dbapi_error, hide_parameters=True, dialect=conn.dialect
        ) from e
    finally:
        cursor.close()


def _insert(conn: Connection, rows: list[tuple[Any, ...]], pause: Callable[[], None] | None) -> int:
    """The rows in one statement, or with a `pause`, in slices with the pause between them."""
    step = SQLITE_SLICE if pause is not None else max(len(rows), 1)
    inserted = 0
    with _driver_cursor(conn, SQLITE_INSERT) as cursor:
        for start in range(0, len(rows), step):
            if start and pause is not None:
                pause()
            cursor.executemany(SQLITE_INSERT, rows[start : start + step])
            inserted += cursor.rowcount
    return inserted


def _write_sqlite(
    conn: Connection, events: Sequence[dict[str, Any]], pause: Callable[[], None] | None
) -> int:
    """SQLite's work runs on this process's CPU, beside the request path's workers. A worker
    woken while this thread runs a long statement can wait up to a scheduler tick (4 ms at
    250 Hz) whatever its own slice: that was much of `serve`'s c=1 tail (bench/README.md). So,
    when the caller gives a `pause` (a yield of the CPU), the rows go in slices with the pause
    between them, and a waiting worker runs within a slice's time."""
    before = conn.exec_driver_sql(SQLITE_HIGH_WATER).scalar_one()
    inserted = _insert(conn, list(map(_row, events)), pause)
    if inserted:
        conn.exec_driver_sql(SQLITE_ROLLUP, (before,))
    return inserted


# --- PostgreSQL --------------------------------------------------------------------------------

_RECORD = ", ".join(f"{name} {_PG_TYPES.get(name, 'text')}" for name in FIELDS)


def _selected(name: str) -> str:
    if name == "started_at":
        return "to_timestamp(e.started_at)"
    if name == "tags":  # the core sends the object as its JSON text
        return "CAST(e.tags AS json)"
    if ADDED_LATER.get(name) is not None:
        return f"coalesce(e.{name}, {ADDED_LATER[name]!r})"
    return f"e.{name}"


_SELECTED = ", ".join(_selected(name) for name in FIELDS)
POSTGRESQL_WRITE = (
    f"WITH e AS (SELECT * FROM json_to_recordset(%s::json) AS e({_RECORD})), "
    f"ins AS (INSERT INTO usage_records ({', '.join(FIELDS)}, recorded_at) "
    f"SELECT {_SELECTED}, now() FROM e ON CONFLICT (request_id) DO NOTHING "
    "RETURNING started_at, tenant_id, key_id, model, prompt_tokens, completion_tokens, "
    "cached_tokens, cost_micros, status, outcome), "
    "roll AS ("
    + _rollup_insert(
        "ins AS u",
        "CAST(floor(extract(epoch FROM u.started_at)) AS bigint)",
        "(VALUES ('minute', 60), ('hour', 3600), ('day', 86400)) AS g(name, seconds)",
    )
    + ") SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM e), (SELECT max(seq) FROM e)"
)


@dataclass(frozen=True)
class Stored:
    """What one statement stored: rows inserted, events in the batch, its highest `seq`."""

    inserted: int
    events: int
    last_seq: int | None

    @classmethod
    def total(cls, parts: Iterable[Stored]) -> Stored:
        """What the statements of one batch's slices stored together."""
        inserted = events = 0
        last_seq: int | None = None
        for part in parts:
            inserted += part.inserted
            events += part.events
            if part.last_seq is not None and (last_seq is None or part.last_seq > last_seq):
                last_seq = part.last_seq
        return cls(inserted, events, last_seq)


# A slice of a batch stored beside live traffic: about 20 events, a third of a millisecond of
# the server's work. With 48 KiB (a millisecond) a request at c=1 still waited a whole slice,
# often behind several in a row: `serve`'s c=1 added p99 was 2.4 ms, against 1.65 with 16 KiB
# (bench/README.md, 2026-12-08). A batch has at most `usage.postgresql_slices` of them (see
# `TextWriter._slices`).
POSTGRESQL_SLICE_BYTES = 16 * 1024
# `usage.postgresql_slices` unset: a server on this host shares the gateway's CPUs. 64 slices
# keep a batch of up to 2 MB in short stretches: a c=1 batch on a fast machine (1.1 MB at 13k
# requests a second) is sliced, not sent whole (with 8, it went whole: `serve`'s c=1 added p99
# 3.7 ms against 1.9 with 32, bench/README.md, 2026-12-05). At c=16 and c=64 the throughput was
# inside the rounds' spread (2026-12-08).
LOCAL_SERVER_SLICES = 64
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# Where a batch of the core's may be cut: the end of one event, `BETWEEN_EVENTS`, the next one.
_CUT = b"}" + BETWEEN_EVENTS + b"{"


def slices(text: bytes, size: int) -> list[bytes]:
    """The JSON array `text` as arrays of about `size` bytes or more each, cut only between two
    events the way the core separates them (a raw newline is never inside a JSON string, so the
    cut is never inside a value of an event the core wrote). A text that is not the core's (no
    such separator) stays whole; one cut where it should not be would make a slice invalid
    JSON, which the server refuses: the drainer then parses and splits the batch, as for any
    refused batch."""
    if len(text) <= size:
        return [text]
    out: list[bytes] = []
    start = 1  # after the array's `[`
    while (cut := text.find(_CUT, start + size)) >= 0:
        out.append(b"[" + text[start : cut + 1] + b"]")
        start = cut + 1 + len(BETWEEN_EVENTS)
    out.append(b"[" + text[start:])
    return out


def on_this_host(engine: Engine) -> bool:
    """Whether the database server runs on this host: a loopback address, or a Unix socket (no
    host, or a directory)."""
    host = engine.url.host or engine.url.query.get("host") or ""
    if isinstance(host, tuple):
        host = host[0] if host else ""
    return not host or host.startswith("/") or host in _LOCAL_HOSTS or host.startswith("127.")


def _as_is(text: bytes | str) -> bytes | str:
    return text


def _json_parameter(conn: Connection, text: bytes | str) -> Any:
    """The batch's JSON text as the statement's parameter, sent as it is: psycopg would send
    `bytes` as `bytea`, so they go wrapped as `json` (no decoding, no copy); another driver gets
    a `str`."""
    if conn.dialect.driver == "psycopg":
        from psycopg.types.json import Json  # the `postgres` extra: imported where it is used

        return Json(text, dumps=_as_is)
    return text.decode() if isinstance(text, bytes) else text


def _write_postgresql(conn: Connection, text: bytes | str) -> Stored:
    parameter = _json_parameter(conn, text)
    with _driver_cursor(conn, POSTGRESQL_WRITE) as cursor:
        cursor.execute(POSTGRESQL_WRITE, (parameter,))
        inserted, events, last_seq = cursor.fetchone()
    return Stored(int(inserted), int(events), None if last_seq is None else int(last_seq))


# --- both ----------------------------------------------------------------------------------------


class TextWriter:
    """PostgreSQL's path for a batch as the core handed it out: `POSTGRESQL_WRITE`, one
    statement (atomic on its own), in autocommit on a connection held from one batch to the next.
    A session per batch cost four round trips (the pool's pre-ping, BEGIN, the statement,
    COMMIT), each a wake-up of this thread and of the server, and about 1.2 ms of this process's
    CPU per batch whatever its size: that much of the CPU the request path's workers share,
    every batch (bench/README.md). Held, it is one round trip. A connection that fails is
    dropped and the next batch opens another (the caller retries the batch with backoff).

    Beside live traffic (`gentle`) the batch goes in `slices` of `POSTGRESQL_SLICE_BYTES` or
    more, at most `max_slices` of them, one statement each (a larger batch, whole). The server
    spends about 17 us per event on a batch; a 100 ms linger's batch at c=1 was one stretch of
    about 9 ms of a CPU, and where a database shares the gateway's CPUs, a request that arrived
    meanwhile waited for it: `serve`'s c=1 tail on PostgreSQL (bench/README.md). Each slice is
    atomic on its own and the inserts are idempotent by request id, with rollups of the rows
    actually inserted: a batch that fails halfway is retried whole, and the slices stored
    before count once."""

    def __init__(self, engine: Engine, max_slices: int | None = None) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._conn: Connection | None = None
        self.max_slices = max_slices or (LOCAL_SERVER_SLICES if on_this_host(engine) else 1)

    @classmethod
    def of(cls, engine: Engine, max_slices: int | None = None) -> TextWriter | None:
        """The writer where the database unpacks a batch itself; `None` where the caller
        parses it (SQLite). `max_slices`: `usage.postgresql_slices`."""
        return cls(engine, max_slices) if engine.dialect.name == "postgresql" else None

    def write(self, text: bytes, gentle: bool = False) -> Stored:
        """Store the batch `text`; `gentle`: in slices, a statement each. Raises as
        `write_events` does when the batch cannot be stored as it is (not an array of objects,
        an event missing a field): the caller then parses it and splits it."""
        parts = self._slices(text) if gentle else [text]
        try:
            if self._conn is None:
                self._conn = self._engine.connect()
            conn = self._conn
            stored = Stored.total(_write_postgresql(conn, part) for part in parts)
            # Ends SQLAlchemy's own transaction; in autocommit nothing goes to the server.
            conn.commit()
        except Exception:
            self.close()
            raise
        return stored

    def _slices(self, text: bytes) -> list[bytes]:
        """At most `max_slices` slices of `POSTGRESQL_SLICE_BYTES` or more; the batch whole when
        even so a slice would hold more than twice that (a busy gateway's batch: its stretches
        would not be short, and the statements would cost CPU for nothing)."""
        if len(text) > self.max_slices * 2 * POSTGRESQL_SLICE_BYTES:
            return [text]
        return slices(text, max(POSTGRESQL_SLICE_BYTES, -(-len(text) // self.max_slices)))

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


class CoreSqliteWriter:
    """SQLite's path for a batch as the core handed it out: the core reads the batch and stores
    it in one transaction (`sluicegate._core.SqliteLedger`, with this module's SQL and fields),
    on a connection of its own held from one batch to the next, through the SQLite library
    Python's `sqlite3` loaded (two copies of SQLite in one process would break its file locks).
    The GIL is released meanwhile. A database that fails (busy past the timeout, I/O) closes the
    connection; the next batch opens another."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._ledger: SqliteLedger | None = None
        # Times the CPU was given up between slices of a batch's rows, in all.
        self.pauses = 0

    @classmethod
    def of(cls, engine: Engine) -> CoreSqliteWriter | None:
        """The writer of `engine`'s SQLite file, or `None` (the caller parses batches itself)
        for another database, or when the core cannot reach Python's SQLite library."""
        url = engine.url
        if engine.dialect.name != "sqlite" or not url.database or url.query:
            return None
        writer = cls(os.path.abspath(url.database))
        try:
            writer._open()
        except LedgerError as e:
            log.info("usage: SQLite's batches are written through Python (%s)", e)
            return None
        return writer

    def _open(self) -> SqliteLedger:
        if self._ledger is None:
            self._ledger = SqliteLedger(
                _sqlite3.__file__,
                self._path,
                list(FIELDS),
                list(ADDED_LATER.items()),
                list(SQLITE_LEDGER_PRAGMAS),
                SQLITE_CORE_INSERT,
                SQLITE_ROLLUP_UPSERT,
                list(GRANULARITIES.items()),
                list(_ROLLUP_GROUP),
                list(_ROLLUP_SUMS),
                sorted(ERROR_OUTCOMES),
            )
        return self._ledger

    def write(self, text: bytes, gentle: bool = False) -> Stored:
        """Store the batch `text`; `gentle`: give up the CPU every `SQLITE_SLICE` rows. Raises
        ValueError when the batch cannot be stored as it is (nothing of it is): the caller then
        parses it and splits it; LedgerError when the database failed."""
        try:
            ledger = self._open()
            inserted, events, last_seq, pauses = ledger.write(text, SQLITE_SLICE if gentle else 0)
        except LedgerError:
            self.close()
            raise
        self.pauses += pauses
        return Stored(inserted, events, last_seq)

    def close(self) -> None:
        ledger, self._ledger = self._ledger, None
        if ledger is not None:
            ledger.close()


def write_events(
    session: Session,
    events: Sequence[dict[str, Any]],
    pause: Callable[[], None] | None = None,
) -> int:
    """Store events (a batch, or a part of one) inside the session's transaction; returns how
    many were new. A batch as the core handed it out goes through `TextWriter` (PostgreSQL) or
    `CoreSqliteWriter`; this is the path for parsed events (a batch split to isolate a refused
    one, or SQLite's batches where the core cannot reach its library). `pause`:
    called between slices of SQLite's insert (see `_write_sqlite`); PostgreSQL's work runs in
    its server. Raises when an event cannot be
    stored as it is (a malformed one): the caller splits the batch."""
    if not events:
        return 0
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        return _write_postgresql(conn, json.dumps(events)).inserted
    if conn.dialect.name != "sqlite":
        raise RuntimeError(f"usage rows need SQLite or PostgreSQL, not {conn.dialect.name}")
    return _write_sqlite(conn, events, pause)
