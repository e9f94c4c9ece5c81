"""The usage drainer on its own: events/s and CPU per event writing synthetic usage events (as the
core hands them out: JSON arrays of `--batch` events) to SQLite and PostgreSQL.

    .venv/bin/python bench/drainer.py                        # both databases, 100k events
    .venv/bin/python bench/drainer.py --db sqlite --events 50000

CPU is this process's (`time.process_time`, every thread): the drainer's Python and, for SQLite,
the database engine's own work, which runs in-process; PostgreSQL's work is in the server's
processes, so its CPU is not counted there: it is reported beside it, from /proc, as every
process named `postgres` on this host spent during the run (the backend storing the batches,
and the WAL writer, checkpointer and autovacuum that its writes cause); with a server on another
host, that column is empty.
SQLite has two rows: `sqlite`, the core's writer (it reads the batch's text and binds the rows
itself, `control.usage.writer.CoreSqliteWriter`), and `sqlite-python`, Python's path (one parse
per batch, `control.usage.drainer.parse`, measured alone too, then tuples and `executemany`),
taken where the core cannot reach Python's SQLite library. PostgreSQL takes the text unparsed.
Run it on an idle machine: it reports the best of `--repeat` runs.

`--parts` (PostgreSQL) prices the parts of the server's statement instead: the CPU per event of
the backend that runs it, for the batch unpacked only (`json_to_recordset`), unpacked and
inserted, the whole statement (with its rollups), and the whole statement without the three
time-range indexes, each on whole batches and on slices of `POSTGRESQL_SLICE_BYTES` (what a
batch beside live traffic at c=1 goes in), one statement a batch or slice, in autocommit as the
drainer runs it.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa

from bench.threads import TICKS
from control import migrations
from control.db import create_db_engine, session_factory
from control.usage import writer
from control.usage.drainer import UsageDrainer, parse
from control.usage.events import FIELDS, batch_text

PG_URL = os.environ.get(
    "SLUICEGATE_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
MODELS = ("llama-3-8b", "llama-3-70b", "qwen-2.5-32b")


def synthetic_events(count: int, keys: int, seed: int) -> list[dict[str, Any]]:
    """Events shaped like the core's: time-ordered request ids, a few thousand keys over ten
    tenants, three models, a mix of outcomes, about 1000 requests per second of start times."""
    rng = random.Random(seed)
    start = time.time() - count / 1000
    out = []
    for i in range(count):
        k = rng.randrange(keys)
        started = start + i / 1000
        stream = rng.random() < 0.8
        outcome = rng.choices(
            ["complete", "client_cancelled", "upstream_error", "timeout"], [96, 2, 1, 1]
        )[0]
        completion = rng.randint(20, 400)
        out.append(
            {
                "seq": i + 1,
                "request_id": f"req_{int(started * 1000):012x}{rng.getrandbits(64):016x}",
                "key_id": f"key_01J{k:023d}",
                "key_prefix": f"sk-sg-{k:06d}",
                "tenant_id": f"tenant-{k % 10}",
                "endpoint": "chat_completions",
                "model": MODELS[k % 3],
                "upstream_model": f"meta/{MODELS[k % 3]}-instruct",
                "pool": "main",
                "upstream": f"vllm-{i % 4}",
                "priority": "interactive",
                "stream": stream,
                "status": 200 if outcome != "upstream_error" else 502,
                "outcome": outcome,
                "error_code": None if outcome == "complete" else outcome,
                "prompt_tokens": rng.randint(50, 2000),
                "completion_tokens": completion,
                "cached_tokens": 0,
                "cache_write_tokens": 0,
                "reasoning_tokens": 0,
                "usage_source": "upstream" if outcome == "complete" else "estimated",
                "cost_micros": rng.randint(10, 5000),
                "price_version": 7,
                "queue_wait_ms": rng.random() * 3,
                "connect_ms": None if i % 10 else rng.random() * 2,
                "ttft_ms": rng.lognormvariate(5, 0.3) if stream else None,
                "tpot_ms": rng.lognormvariate(3, 0.2) if stream else None,
                "duration_ms": rng.lognormvariate(8, 0.4),
                "started_at": started,
                "attempts": 1,
                "fallback": False,
                "client_retry_count": None,
                "tags": None,
                "end_user": None,
            }
        )
    return out


def batches(events: list[dict[str, Any]], size: int) -> list[bytes]:
    """What `Core.drain_usage` returns: JSON arrays as the core writes them, UTF-8."""
    return [batch_text(events[i : i + size]) for i in range(0, len(events), size)]


@contextmanager
def sqlite_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="sluicegate-drainer-") as tmp:
        yield f"sqlite:///{tmp}/bench.db"


@contextmanager
def postgresql_url(url: str) -> Iterator[str]:
    schema = f"sgbench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        parsed = sa.engine.make_url(url)
        yield parsed.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False
        )
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def server_cpu() -> dict[int, float]:
    """CPU seconds (user + system) so far of each process named `postgres` on this host."""
    out: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile, or not ours to read
        out[int(entry.name)] = (int(fields[11]) + int(fields[12])) / TICKS
    return out


def server_cpu_spent(before: dict[int, float], after: dict[int, float]) -> float | None:
    """CPU seconds the server's processes spent between two readings (a process started
    meanwhile counts from zero); None when no server process is visible here."""
    if not after:
        return None
    return sum(now - before.get(pid, 0.0) for pid, now in after.items())


def run_once(
    url: str, texts: list[bytes], events: int, in_python: bool = False
) -> tuple[float, float, float | None]:
    """Drain every batch into a fresh database: (events/s, CPU microseconds per event in this
    process, and on PostgreSQL's processes on this host, if any). `in_python`: SQLite's batches
    parsed and bound by Python, as where the core cannot reach Python's SQLite library (the
    comparison for the core's writer)."""
    engine = create_db_engine(url)
    migrations.upgrade(engine)
    queue = list(texts)
    acked: list[int] = []

    def source(max_events: int, timeout_ms: int) -> bytes:
        return queue.pop(0) if queue else b"[]"

    drainer = UsageDrainer(source, session_factory(engine), ack=acked.append)
    if in_python:
        drainer.close()
        drainer._writer = None
    server = server_cpu() if engine.dialect.name == "postgresql" else {}
    cpu, wall = time.process_time(), time.perf_counter()
    while drainer.step(0, gentle=True):
        pass
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    # Read before the drainer's connection closes: its backend's CPU is in its own /proc entry.
    server_spent = server_cpu_spent(server, server_cpu()) if server else None
    drainer.close()
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT count(*) FROM usage_records")).scalar_one()
    engine.dispose()
    if stored != events or acked[-1] != events:
        raise SystemExit(f"expected {events} rows and acks up to it, got {stored} / {acked[-1:]}")
    server_us = None if server_spent is None else server_spent / events * 1e6
    return events / wall, cpu / events * 1e6, server_us


_UNPACK = f"json_to_recordset(%s::json) AS e({writer._RECORD})"
_INSERT = (
    f"INSERT INTO usage_records ({', '.join(FIELDS)}, recorded_at) "
    f"SELECT {writer._SELECTED}, now() FROM e ON CONFLICT (request_id) DO NOTHING"
)
# The statement's parts, each the one before and more.
PARTS = {
    "unpack": f"SELECT count(*), max(seq) FROM {_UNPACK}",
    "+ insert": f"WITH e AS (SELECT * FROM {_UNPACK}), ins AS ({_INSERT} RETURNING 1) "
    "SELECT count(*) FROM ins",
    "+ rollups (the statement)": writer.POSTGRESQL_WRITE,
    "the statement, no time indexes": writer.POSTGRESQL_WRITE,
}
TIME_INDEXES = (
    "ix_usage_records_tenant_id_started_at_id",
    "ix_usage_records_key_id_started_at_id",
    "ix_usage_records_started_at_id",
)


def part_once(pg_url: str, part: str, statements: list[str], events: int) -> float:
    """The backend's CPU microseconds per event storing `statements` (the batch texts) with the
    statement of `part`, into a fresh schema."""
    with postgresql_url(pg_url) as url:
        engine = create_db_engine(url)
        try:
            migrations.upgrade(engine)
            spent = _store(engine, part, statements)
        finally:
            engine.dispose()
    if spent is None:
        raise SystemExit("the PostgreSQL server's processes are not visible on this host")
    return spent / events * 1e6


def _store(engine: sa.Engine, part: str, statements: list[str]) -> float | None:
    """The CPU seconds of the backend that ran the statements (the server's other processes
    are left out: a checkpoint that earlier runs' writes caused may land in this one)."""
    with engine.connect() as conn:
        if part == "the statement, no time indexes":
            for index in TIME_INDEXES:
                conn.execute(sa.text(f"DROP INDEX {index}"))
            conn.commit()
        backend = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        conn.commit()
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        conn.connection.dbapi_connection.autocommit = True  # type: ignore[union-attr]
        before = server_cpu().get(backend)
        for text in statements:
            cursor.execute(PARTS[part], (text,))
            cursor.fetchall()
        after = server_cpu().get(backend)
    return None if before is None or after is None else after - before


def parts(args: argparse.Namespace, texts: list[bytes]) -> None:
    sliced = [s for t in texts for s in writer.slices(t, writer.POSTGRESQL_SLICE_BYTES)]
    shapes = {
        f"whole batches of {args.batch}": [t.decode() for t in texts],
        f"slices of {writer.POSTGRESQL_SLICE_BYTES // 1024} KiB ({args.events // len(sliced)} "
        "events)": [s.decode() for s in sliced],
    }
    print(f"the backend's CPU us/event (best of {args.repeat}), {args.keys} keys")
    for shape, statements in shapes.items():
        for part in PARTS:
            best = min(
                part_once(args.pg_url, part, statements, args.events) for _ in range(args.repeat)
            )
            print(f"  {shape:<32} {part:<32} {best:6.1f}")


def parse_only(texts: list[bytes], events: int) -> float:
    cpu = time.process_time()
    for text in texts:
        parse(text)
    return (time.process_time() - cpu) / events * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument(
        "--batch", type=int, default=5000, help="events per drain (usage.drain_batch)"
    )
    parser.add_argument("--keys", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pg-url", default=PG_URL)
    parser.add_argument(
        "--parts", action="store_true", help="PostgreSQL: the backend's CPU per part of the write"
    )
    args = parser.parse_args()

    # Only the texts stay: 100k event dicts kept alive would make every collection of Python's
    # GC during the runs walk them, a cost the gateway's process does not have.
    texts = batches(synthetic_events(args.events, args.keys, seed=7), args.batch)
    size = sum(len(t) for t in texts) / args.events
    print(f"{args.events} events in batches of {args.batch}, {size:.0f} bytes of JSON each")
    if args.parts:
        parts(args, texts)
        return 0
    floor = min(parse_only(texts, args.events) for _ in range(args.repeat))
    print(f"{'parse alone':<14} {'':>12} {floor:>8.1f} us CPU/event")
    sqlite = ["sqlite", "sqlite-python"]
    targets = (
        [*sqlite, "postgresql"]
        if args.db == "both"
        else sqlite
        if args.db == "sqlite"
        else [args.db]
    )
    for db in targets:
        results = []
        for _ in range(args.repeat):
            context = postgresql_url(args.pg_url) if db == "postgresql" else sqlite_url()
            with context as url:
                results.append(run_once(url, texts, args.events, db == "sqlite-python"))
        rate = max(r[0] for r in results)
        cpu = min(r[1] for r in results)
        line = f"{db:<14} {rate:>9,.0f}/s {cpu:>8.1f} us CPU/event (best of {args.repeat})"
        on_server = [r[2] for r in results if r[2] is not None]
        if on_server:
            line += f", the server's processes {min(on_server):.1f} us/event"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
