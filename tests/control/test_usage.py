"""The usage drainer: batches written once per request id, rollups only for the rows inserted,
acknowledged only after the commit, a database outage waited out, malformed events kept aside;
raw rows listed newest first and tenant-scoped; retention of raw rows."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from control.usage import writer
from control.usage.drainer import UsageDrainer
from control.usage.events import BETWEEN_EVENTS, batch_text
from control.usage.models import UsageRecord, UsageReject, UsageRollup
from control.usage.retention import delete_old_rows
from control.usage.writer import SQLITE_SLICE, CoreSqliteWriter, slices
from tests.control.helpers import Harness
from tests.control.usage_events import T0, FakeCore, event


def _rows(harness: Harness) -> list[UsageRecord]:
    with harness.ctx.sessions() as session:
        return list(session.scalars(sa.select(UsageRecord).order_by(UsageRecord.id)))


def _rollups(harness: Harness) -> dict[tuple[str, int, str], tuple[int, ...]]:
    r = UsageRollup
    with harness.ctx.sessions() as session:
        rows = session.execute(
            sa.select(
                r.granularity,
                r.bucket,
                r.model,
                r.requests,
                r.prompt_tokens,
                r.completion_tokens,
                r.cost_micros,
                r.errors,
            )
        ).all()
    return {(g, b, m): tuple(rest) for g, b, m, *rest in rows}


def test_events_are_written_once_per_request_id(harness: Harness) -> None:
    core = FakeCore(
        [event("r1", seq=1), event("r2", seq=2)],
        # r2 again (a replay after a crash between the commit and the acknowledgement)
        [event("r2", seq=2), event("r3", seq=5, outcome="timeout", ttft_ms=None)],
    )
    drainer = core.drainer(harness)
    assert drainer.drain()
    rows = _rows(harness)
    assert [r.request_id for r in rows] == ["r1", "r2", "r3"]
    assert drainer.written == 3
    assert (rows[2].outcome, rows[2].ttft_ms, rows[0].completion_tokens) == ("timeout", None, 34)
    assert (rows[0].cost_micros, rows[0].price_version) == (7, 3)
    assert rows[0].started_at == datetime(2026, 3, 4, 5, 6, 7, 250000, tzinfo=UTC)
    assert core.acks == [2, 5]


def test_events_of_an_earlier_release_are_stored_with_the_parts_they_lack(
    harness: Harness,
) -> None:
    # A journal written before the upgrade replays events without the newer token parts.
    old = event("old", seq=1)
    for name in ("cache_write_tokens", "reasoning_tokens"):
        del old[name]
    new = event("new", seq=2, cache_write_tokens=3, reasoning_tokens=5)
    core = FakeCore([old, new])
    assert core.drainer(harness).drain()
    parts = {r.request_id: (r.cache_write_tokens, r.reasoning_tokens) for r in _rows(harness)}
    assert parts == {"old": (0, 0), "new": (3, 5)}
    assert core.acks == [2]


def test_nulls_and_booleans_are_stored_as_nulls_and_zero_or_one(harness: Harness) -> None:
    # On SQLite they are bound through adapters registered in `control.db` (the default search
    # for one cost time per value): what is stored must be what the default binding stored.
    core = FakeCore([event("r1", seq=1, stream=True, fallback=False, connect_ms=None)])
    assert core.drainer(harness).drain()
    with harness.ctx.sessions() as session:
        stored = session.execute(
            sa.text("SELECT stream, fallback, connect_ms, error_code, tags FROM usage_records")
        ).one()
        sqlite = session.get_bind().dialect.name == "sqlite"
    expected = (1, 0, None, None, None) if sqlite else (True, False, None, None, None)
    assert tuple(stored) == expected
    assert [type(v) for v in stored[:2]] == ([int, int] if sqlite else [bool, bool])
    row = _rows(harness)[0]
    assert (row.stream, row.fallback, row.connect_ms, row.error_code) == (True, False, None, None)


def test_rollups_count_only_the_rows_inserted(harness: Harness) -> None:
    minute, hour, day = 1772600760, 1772600400, 1772582400
    core = FakeCore(
        [event("a", seq=1), event("b", seq=2, status=502, outcome="upstream_error")],
        [
            event("a", seq=1),  # replayed: already counted
            event("c", seq=3, started_at=T0 + 60, model="other", cost_micros=100),
            event("c", seq=3, started_at=T0 + 60, model="other", cost_micros=100),
        ],
    )
    core.drainer(harness).drain()
    rollups = _rollups(harness)
    assert rollups[("minute", minute, "chat")] == (2, 24, 68, 14, 1)
    assert rollups[("minute", minute + 60, "other")] == (1, 12, 34, 100, 0)
    assert rollups[("hour", hour, "chat")] == (2, 24, 68, 14, 1)
    assert rollups[("hour", hour, "other")] == (1, 12, 34, 100, 0)
    assert rollups[("day", day, "chat")] == (2, 24, 68, 14, 1)
    assert len(rollups) == 6


def test_acknowledged_only_after_the_commit_and_kept_while_the_database_is_away(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = FakeCore([event("r1", seq=4)], [event("r2", seq=9)])
    drainer = core.drainer(harness)

    def committed(seq: int) -> None:
        # Acknowledged means stored: another session sees the rows already.
        assert len(_rows(harness)) == {4: 1, 9: 2}[seq]

    core.on_ack = committed
    real = harness.ctx.sessions
    failures = {"left": 2}

    def flaky() -> Any:
        if failures["left"]:
            failures["left"] -= 1
            raise sa.exc.OperationalError("INSERT", {}, Exception("database is down"))
        return real()

    monkeypatch.setattr(drainer, "_sessions", flaky)
    if drainer._writer is not None:  # batches go through their own connection
        real_write = drainer._writer.write

        def flaky_write(text: bytes, gentle: bool = False) -> Any:
            flaky()
            return real_write(text, gentle)

        monkeypatch.setattr(drainer._writer, "write", flaky_write)
    for _ in range(2):
        with pytest.raises(sa.exc.OperationalError):
            drainer.step(0)
        assert (core.acks, drainer.pending, len(core.batches)) == ([], 1, 1)  # r2 not taken
    assert drainer.step(0) == 1  # r1, from the kept batch
    assert drainer.step(0) == 1  # then r2
    assert core.acks == [4, 9]
    assert [r.request_id for r in _rows(harness)] == ["r1", "r2"]


def test_the_batch_is_stored_unparsed(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL unpacks the core's JSON itself, and for SQLite the core stores the batch
    itself; either returns the batch's highest `seq`: the drainer parses a batch only when the
    database refuses it."""
    import control.usage.drainer as drainer_module

    parses: list[str] = []
    real = drainer_module.parse

    def counted(raw: str) -> Any:
        parses.append(raw)
        return real(raw)

    monkeypatch.setattr(drainer_module, "parse", counted)
    core = FakeCore([event("r1", seq=3), event("r2", seq=7), event("r3", seq=5)])
    drainer = core.drainer(harness)
    assert drainer.step(0) == 3
    assert core.acks == [7]
    assert sorted(r.request_id for r in _rows(harness)) == ["r1", "r2", "r3"]
    assert parses == []


def test_postgresql_batches_share_one_connection_and_outlive_its_loss(harness: Harness) -> None:
    """One statement per batch on a connection held from batch to batch (no checkout, pre-ping,
    BEGIN or COMMIT per batch); when that connection dies, the batch in hand is kept, not
    acknowledged, and stored on a new connection at the next try."""
    engine = harness.ctx.engine
    if engine.dialect.name != "postgresql":
        pytest.skip("the held connection is PostgreSQL's path")
    checkouts: list[object] = []
    here = threading.get_ident()

    def checkout(*args: object) -> None:
        if threading.get_ident() == here:  # not the harness's own jobs
            checkouts.append(args)

    sa.event.listen(engine, "checkout", checkout)
    core = FakeCore(*([event(f"r{i}", seq=i)] for i in range(1, 5)))
    drainer = core.drainer(harness)
    try:
        assert [drainer.step(0) for _ in range(3)] == [1, 1, 1]
        assert len(checkouts) == 1 and core.acks == [1, 2, 3]
        with engine.connect() as conn:
            killed = conn.execute(
                sa.text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND query LIKE '%json_to_recordset%'"
                )
            ).scalar_one()
        assert killed >= 1  # with any a finished test left behind
        with pytest.raises(sa.exc.OperationalError):
            drainer.step(0)
        assert (core.acks, drainer.pending) == ([1, 2, 3], 1)
        assert drainer.step(0) == 1
        assert core.acks == [1, 2, 3, 4]
        assert [r.request_id for r in _rows(harness)] == ["r1", "r2", "r3", "r4"]
    finally:
        drainer.close()
        sa.event.remove(engine, "checkout", checkout)


def test_a_batch_is_cut_only_between_its_events() -> None:
    """`slices` cuts the core's text where it separates two events, never inside a value: a
    string holding the separator's characters is escaped in JSON (a raw newline never is in a
    string). Each slice is a JSON array; together they are the batch, in order."""
    hostile = "}" + BETWEEN_EVENTS.decode() + '{"seq":999,"request_id":"forged"}'
    events = [event(f"r{i}", seq=i, end_user=hostile if i % 3 == 0 else None) for i in range(40)]
    text = batch_text(events)
    for size in (1, 300, 2000, len(text) - 1):
        parts = slices(text, size)
        assert all(json.loads(part) for part in parts)
        assert [e for part in parts for e in json.loads(part)] == events
        assert all(len(part) >= size for part in parts[:-1])
    assert len(slices(text, 1)) == len(events)
    assert slices(text, len(text)) == [text]
    # Text that is not the core's (no separator) stays whole.
    plain = json.dumps(events).encode()
    assert slices(plain, 100) == [plain]


@pytest.mark.parametrize(
    ("url", "configured", "slices"),
    [
        ("postgresql+psycopg://u@127.0.0.1:5432/db", None, 64),
        ("postgresql+psycopg://u@localhost/db", None, 64),
        ("postgresql+psycopg://u@[::1]/db", None, 64),
        ("postgresql+psycopg:///db", None, 64),  # the Unix socket
        ("postgresql+psycopg://u@/db?host=/var/run/postgresql", None, 64),
        ("postgresql+psycopg://u@db.internal:5432/db", None, 1),
        ("postgresql+psycopg://u@10.0.0.7/db", None, 1),
        ("postgresql+psycopg://u@db.internal/db", 4, 4),
        ("postgresql+psycopg://u@127.0.0.1/db", 1, 1),
    ],
)
def test_a_batch_is_sliced_where_the_server_shares_the_gateways_cpus(
    url: str, configured: int | None, slices: int
) -> None:
    """Slicing pays off only where the server's work runs on the gateway's CPUs: by default on
    this host (loopback, a Unix socket), not elsewhere; `usage.postgresql_slices` decides."""
    engine = sa.create_engine(url)
    try:
        text_writer = writer.TextWriter.of(engine, configured)
        assert text_writer is not None and text_writer.max_slices == slices
    finally:
        engine.dispose()


def test_a_local_servers_batch_goes_in_short_slices_up_to_two_megabytes() -> None:
    """Beside live traffic a batch for a server on this host goes in slices of about
    `POSTGRESQL_SLICE_BYTES` (a third of a millisecond of the server's work), however large the
    batch up to 2 MB: a fast machine's c=1 batch (1.1 MB) too. Past that, whole: a busy
    gateway's batch would not come in short stretches anyway."""
    engine = sa.create_engine("postgresql+psycopg://u@127.0.0.1:5432/db")
    try:
        text_writer = writer.TextWriter.of(engine)
        assert text_writer is not None
        one = len(batch_text([event("r0", seq=0)]))

        def sliced(events: int) -> list[bytes]:
            text = batch_text([event(f"r{i}", seq=i) for i in range(events)])
            return text_writer._slices(text)

        size = writer.POSTGRESQL_SLICE_BYTES
        for megabytes in (0.1, 0.5, 1.1, 1.9):
            parts = sliced(int(megabytes * 1e6 / one))
            assert 1 < len(parts) <= text_writer.max_slices
            # A slice is at most the larger of the bound and an even share, plus one event.
            share = max(size, sum(map(len, parts)) // text_writer.max_slices)
            assert all(len(part) <= share + 2 * one for part in parts)
        assert size <= 16 * 1024
        assert len(sliced(int(2.2e6 / one))) == 1
    finally:
        engine.dispose()


def test_postgresql_stores_a_batch_beside_live_traffic_in_slices_and_counts_it_once(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside live traffic PostgreSQL's batch goes in slices, a statement each; catching up, in
    one. A batch whose later slice fails is kept, not acknowledged, and stored whole at the
    next try: the rows of the slices stored before are neither doubled nor counted twice in
    the rollups."""
    engine = harness.ctx.engine
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's statements")
    monkeypatch.setattr(writer, "POSTGRESQL_SLICE_BYTES", 3000)  # a few events a slice
    statements: list[int] = []
    real = writer._write_postgresql

    def counted(conn: sa.Connection, text: bytes) -> writer.Stored:
        statements.append(len(json.loads(text)))
        if len(statements) == 2 and failing:
            raise sa.exc.OperationalError("the batch's statement", {}, Exception("connection lost"))
        return real(conn, text)

    monkeypatch.setattr(writer, "_write_postgresql", counted)
    count = 30
    batch = [event(f"r{i}", seq=i + 1, prompt_tokens=1) for i in range(count)]
    failing = True
    core = FakeCore(batch, [event("late", seq=count + 1, prompt_tokens=1)])
    drainer = core.drainer(harness, batch=1000)
    try:
        with pytest.raises(sa.exc.OperationalError):
            drainer.step(0, gentle=True)
        assert (core.acks, drainer.pending) == ([], count)
        stored_before = len(_rows(harness))
        assert 0 < stored_before < count
        failing = False
        statements.clear()
        assert drainer.step(0, gentle=True) == count
        assert len(statements) > 2 and sum(statements) == count
        assert core.acks == [count]
        statements.clear()
        assert drainer.step(0) == 1  # not gentle: one statement
        assert statements == [1]
    finally:
        drainer.close()
    # Configured to one statement, or a batch too large for short slices (a busy gateway's):
    # one statement.
    large = [event(f"l{i}", seq=1000 + i, prompt_tokens=1) for i in range(700)]
    assert len(batch_text(large)) > writer.LOCAL_SERVER_SLICES * 2 * writer.POSTGRESQL_SLICE_BYTES
    for options, events in (({"postgresql_slices": 1}, batch), ({}, large)):
        statements.clear()
        one = FakeCore(events).drainer(harness, batch=1000, **options)
        try:
            assert one.step(0, gentle=True) == len(events)
        finally:
            one.close()
        assert statements == [len(events)]
    assert len(_rows(harness)) == count + 1 + len(large)
    minute = {k: v for k, v in _rollups(harness).items() if k[0] == "minute"}
    assert [v[:2] for v in minute.values()] == [(count + 1 + len(large),) * 2]


def test_a_failed_acknowledgement_is_covered_by_the_next(harness: Harness) -> None:
    core = FakeCore([event("r1", seq=1)], [event("r2", seq=2)])
    calls: list[int] = []

    def ack(seq: int) -> None:
        calls.append(seq)
        if seq == 1:
            raise OSError("disk full")

    drainer = UsageDrainer(core.drain, harness.ctx.sessions, ack=ack)
    drainer.drain()
    assert calls == [1, 2] and drainer.acknowledged == 2
    assert len(_rows(harness)) == 2


def test_a_batch_that_is_not_json_is_kept_whole_among_the_rejects(harness: Harness) -> None:
    core = FakeCore([event("r1", seq=1)])
    core.batches.insert(0, b'[{"seq": 1, "model": "caf\xc3\xa9"')  # cut short, UTF-8 inside
    drainer = core.drainer(harness)
    try:
        assert drainer.step(0) == 1 and drainer.rejected == 1
        assert drainer.step(0) == 1 and core.acks == [1]
    finally:
        drainer.close()
    with harness.ctx.sessions() as session:
        (reject,) = session.scalars(sa.select(UsageReject))
    assert reject.reason.startswith("the batch is not JSON")
    assert json.loads(reject.payload) == '[{"seq": 1, "model": "caf\u00e9"'
    assert [r.request_id for r in _rows(harness)] == ["r1"]


@pytest.mark.parametrize("gentle", [False, True])
def test_malformed_events_are_kept_aside_and_the_rest_written(
    harness: Harness, caplog: pytest.LogCaptureFixture, gentle: bool
) -> None:
    """Replaying (`drain`) and beside live traffic (`gentle`: SQLite's insert in slices through
    the driver's cursor), a refused value is told from an unreachable database."""
    missing = event("missing", seq=2)
    del missing["status"]
    refused = event("refused", seq=3, model=None)  # the database refuses a null model
    unbindable = event("unbindable", seq=6, prompt_tokens={"n": 1})
    good = [event(f"good{i}", seq=6 + i) for i in range(1, SQLITE_SLICE + 2)]
    # The values the database refuses come in a batch of their own: a missing field is found
    # before any statement runs.
    first = [event("good0", seq=1), refused, *good[:3], unbindable, *good[3:]]
    second = [missing, "not an event", event("late", seq=99)]
    core = FakeCore(first, second)
    drainer = core.drainer(harness)
    if gentle:
        assert drainer.step(0, gentle=True) == len(first)
        assert drainer.step(0, gentle=True) == len(second)
    assert drainer.drain(deadline=time.monotonic() + 10)
    stored = ["good0", *(e["request_id"] for e in good), "late"]
    assert [r.request_id for r in _rows(harness)] == stored
    assert core.acks == [good[-1]["seq"], 99]
    with harness.ctx.sessions() as session:
        rejects = {
            (r.request_id, r.reason.split(":")[0]): json.loads(r.payload)
            for r in session.scalars(sa.select(UsageReject))
        }
    assert set(rejects) == {
        ("missing", "missing fields"),
        ("refused", "refused by the database"),
        ("unbindable", "refused by the database"),
        (None, "not a JSON object"),
    }
    assert rejects[("missing", "missing fields")]["seq"] == 2
    assert "usage event missing refused (missing fields: status)" in caplog.text
    assert drainer.rejected == 4
    # The good events were counted once.
    assert sum(v[0] for k, v in _rollups(harness).items() if k[0] == "day") == len(stored)


def test_the_drainer_thread_runs_and_drains_on_stop(harness: Harness) -> None:
    core = FakeCore(*[[event(f"t{i}", seq=i + 1)] for i in range(5)])
    drainer = core.drainer(harness, timeout_ms=10)
    stop = threading.Event()
    thread = threading.Thread(target=drainer.run, args=(stop,))
    thread.start()
    deadline = time.monotonic() + 5
    while len(_rows(harness)) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert len(_rows(harness)) == 5 and core.acks == [1, 2, 3, 4, 5]


def test_drain_waits_until_the_core_holds_nothing(harness: Harness) -> None:
    core = FakeCore([event("r1", seq=1)])
    backlog = iter([2, 1, 0])  # events not yet synced by the core's journal when first asked

    def later() -> None:
        core.batches.append(json.dumps([event("r2", seq=2)]).encode())

    def probe() -> int:
        left = next(backlog)
        if left == 1:
            later()
        return left

    drainer = UsageDrainer(core.drain, harness.ctx.sessions, ack=core.ack, backlog=probe)
    assert drainer.drain(deadline=time.monotonic() + 10)
    assert [r.request_id for r in _rows(harness)] == ["r1", "r2"]


@pytest.mark.parametrize("behind", [False, True])
def test_the_drainer_lingers_after_a_batch_unless_a_full_one_waits(
    harness: Harness, behind: bool
) -> None:
    """Lingering after every batch (not only after part ones) keeps batches full; a drainer
    that has fallen a batch or more behind takes the next one at once."""
    core = FakeCore([event("r1", seq=1), event("r2", seq=2)], [event("r3", seq=3)])
    drainer = core.drainer(harness, batch=2, linger_ms=60_000, backlog=lambda: 5 if behind else 0)
    stop = threading.Event()
    thread = threading.Thread(target=drainer.run, args=(stop,))
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while len(core.acks) < (2 if behind else 1) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        assert core.acks == ([2, 3] if behind else [2])
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


@pytest.mark.parametrize("behind", [False, True])
def test_a_steady_drainer_yields_the_cpu_between_slices_of_the_insert(
    harness: Harness, behind: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside live traffic the SQLite insert goes in slices with a yield of the CPU between
    them (a request path's worker that woke meanwhile runs at once); catching up, or replaying
    at start, it does not yield. Every row is stored and counted once either way."""
    yields: list[int] = []
    monkeypatch.setattr(os, "sched_yield", lambda: yields.append(1))
    count = 2 * SQLITE_SLICE + 3
    batch = [event(f"r{i}", seq=i + 1, prompt_tokens=1) for i in range(count)]
    core = FakeCore(batch, [event("late", seq=count + 1)])
    waiting = [1000 if behind else 0]
    drainer = core.drainer(harness, batch=1000, backlog=lambda: waiting[0])

    def yielded() -> int:
        # The core's SQLite writer yields itself (`sched_yield`) and counts it.
        writer = drainer._writer
        return len(yields) + (writer.pauses if isinstance(writer, CoreSqliteWriter) else 0)

    assert drainer.step(0, gentle=True) == count
    sqlite = harness.ctx.engine.dialect.name == "sqlite"
    assert yielded() == (2 if sqlite and not behind else 0)
    waiting[0] = 0
    assert drainer.drain(deadline=time.monotonic() + 10)  # replaying: no yields
    assert yielded() == (2 if sqlite and not behind else 0)
    assert len(_rows(harness)) == count + 1
    assert core.acks == [count, count + 1]
    minute = {k: v for k, v in _rollups(harness).items() if k[0] == "minute"}
    assert [v[:2] for v in minute.values()] == [(count + 1, count + 12)]


def test_usage_list_filters_and_tenant_scope(harness: Harness, world: dict[str, Any]) -> None:
    acme_key, globex_key = world["acme_key"]["id"], world["globex_key"]["id"]
    now = time.time()
    core = FakeCore(
        [
            event("a1", "acme", acme_key, started_at=now - 3),
            event("a2", "acme", acme_key, model="other", outcome="interrupted", started_at=now - 2),
            event("g1", "globex", globex_key, started_at=now - 1),
        ]
    )
    core.drainer(harness).drain()
    admin = harness.admin
    assert [u["request_id"] for u in admin.all_pages("/v1/admin/usage")] == ["g1", "a2", "a1"]
    assert [u["request_id"] for u in admin.all_pages("/v1/admin/usage", model="other")] == ["a2"]
    assert [
        u["request_id"]
        for u in admin.all_pages("/v1/admin/usage", outcome="interrupted", tenant_id="acme")
    ] == ["a2"]
    assert [u["request_id"] for u in admin.all_pages("/v1/admin/usage", key_id=globex_key)] == [
        "g1"
    ]
    paged = admin.all_pages("/v1/admin/usage", limit=1)
    assert [u["request_id"] for u in paged] == ["g1", "a2", "a1"]
    since = datetime.fromtimestamp(now - 2.5, UTC).isoformat()
    assert [u["request_id"] for u in admin.all_pages("/v1/admin/usage", since=since)] == [
        "g1",
        "a2",
    ]
    assert admin.get("/v1/admin/usage", cursor="bm9wZQ").status_code == 422

    acme = harness.as_token(admin.create_tenant_token("acme"))
    assert [u["request_id"] for u in acme.all_pages("/v1/admin/usage")] == ["a2", "a1"]
    assert [u["request_id"] for u in acme.all_pages("/v1/admin/usage", key_id=acme_key)] == [
        "a2",
        "a1",
    ]


def test_retention_deletes_old_raw_rows_in_batches_and_keeps_rollups(harness: Harness) -> None:
    now = datetime(2026, 3, 4, tzinfo=UTC)
    day = 86400.0
    old = [event(f"old{i}", seq=i + 1, started_at=now.timestamp() - 40 * day + i) for i in range(5)]
    recent = event("recent", seq=9, started_at=now.timestamp() - 29 * day)
    FakeCore([*old, recent]).drainer(harness).drain()
    before = _rollups(harness)
    deleted = delete_old_rows(harness.ctx.sessions, 30, now=now, batch=2)
    assert deleted == 5
    assert [r.request_id for r in _rows(harness)] == ["recent"]
    assert _rollups(harness) == before
    assert delete_old_rows(harness.ctx.sessions, 30, now=now + timedelta(days=2)) == 1


def _raw_rows(harness: Harness) -> list[dict[str, Any]]:
    """Every stored column as SQLite holds it (type included), but the row's own identity."""
    with harness.ctx.sessions() as session:
        rows = session.execute(sa.text("SELECT * FROM usage_records ORDER BY seq")).mappings()
        return [
            {k: (type(v).__name__, v) for k, v in row.items() if k not in ("id", "recorded_at")}
            for row in rows
        ]


def _all_rollups(harness: Harness) -> list[tuple[Any, ...]]:
    with harness.ctx.sessions() as session:
        rows = session.execute(sa.text("SELECT * FROM usage_rollups ORDER BY 1, 2, 3, 4, 5"))
        return [tuple(row) for row in rows]


def test_the_cores_sqlite_writer_stores_what_pythons_path_stores(harness: Harness) -> None:
    """The core binds the batch's values itself, formats the start time and sums the rollups;
    every column must hold what Python's path (parse, tuples, `executemany`, the rollup in
    SQL) stores, to the stored type: nulls, booleans as 0 or 1, floats, escaped and non-ASCII
    text, tags as their JSON text, an event of an earlier release with the fields it lacks
    filled in; and the same rollups: per tenant, key and model, errors by status and by
    outcome, a start half a millisecond before a minute in the next one, a replay not
    counted."""
    if harness.ctx.engine.dialect.name != "sqlite":
        pytest.skip("the core's writer is SQLite's")
    old = {k: v for k, v in event("r3", seq=3).items() if k not in ("tags", "reasoning_tokens")}
    batches = [
        [
            event("r1", seq=1, connect_ms=None, fallback=True, client_retry_count=2),
            event(
                'r\u00e9-"2"\n',
                seq=2,
                tags='{"team":"\u00e9 \\"x\\""}',
                end_user="u\u2028",
                ttft_ms=1e-7,
            ),
            old,
            event("r4", "beta", "k2", seq=4, status=502, outcome="upstream_error"),
            event("r5", "beta", "k2", seq=5, outcome="timeout", started_at=T0 + 52.7496),
        ],
        [event("r1", seq=1), event("r6", "acme", "k3", seq=6, model="other", started_at=T0 + 3600)],
    ]
    core = FakeCore(*batches)
    drainer = core.drainer(harness)
    assert isinstance(drainer._writer, CoreSqliteWriter)
    assert drainer.drain()
    by_core = _raw_rows(harness)
    rollups = _all_rollups(harness)
    with harness.ctx.sessions() as session, session.begin():
        session.execute(sa.delete(UsageRecord))
        session.execute(sa.delete(UsageRollup))
    python = FakeCore(*batches).drainer(harness)
    python._writer = None  # the path for parsed batches
    assert python.drain()
    assert _raw_rows(harness) == by_core
    assert _all_rollups(harness) == rollups
    assert by_core[0]["started_at"] == ("str", "2026-03-04 05:06:07.250000")
    assert by_core[4]["started_at"] == ("str", "2026-03-04 05:07:00.000000")
    minute = {(r[2], r[3], r[4], r[1]): r[5:] for r in rollups if r[0] == "minute"}
    # (requests, prompt, completion, cached, cost, errors) per tenant, key, model and minute.
    assert minute == {
        ("acme", "k1", "chat", 1772600760): (3, 36, 102, 0, 21, 0),
        ("beta", "k2", "chat", 1772600760): (1, 12, 34, 0, 7, 1),
        ("beta", "k2", "chat", 1772600820): (1, 12, 34, 0, 7, 1),
        ("acme", "k3", "other", 1772604360): (1, 12, 34, 0, 7, 0),
    }


def test_a_start_the_core_cannot_format_is_stored_by_pythons_path(harness: Harness) -> None:
    """A start before 1970 (never a request's, but nothing the core hands out is dropped): the
    core's writer refuses the batch, and Python's path stores every event of it."""
    if harness.ctx.engine.dialect.name != "sqlite":
        pytest.skip("the core's writer is SQLite's")
    core = FakeCore([event("r1", seq=1), event("r2", seq=2, started_at=-5.0)])
    drainer = core.drainer(harness)
    assert isinstance(drainer._writer, CoreSqliteWriter)
    assert drainer.drain()
    assert [r.request_id for r in _rows(harness)] == ["r1", "r2"]
    assert drainer.rejected == 0 and core.acks == [2]
    assert sum(v[0] for k, v in _rollups(harness).items() if k[0] == "day") == 2


def test_sqlite_batches_go_through_python_where_the_core_cannot_reach_its_library(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A Python whose SQLite the core cannot look up (linked in statically, say): the drainer
    parses and writes batches itself, and says so once."""
    if harness.ctx.engine.dialect.name != "sqlite":
        pytest.skip("the core's writer is SQLite's")
    import control.usage.writer as writer_module

    monkeypatch.setattr(writer_module._sqlite3, "__file__", "/nonexistent/_sqlite3.so")
    core = FakeCore([event("r1", seq=1), event("r2", seq=2)])
    with caplog.at_level("INFO", logger="sluicegate.usage"):
        drainer = core.drainer(harness)
    assert drainer._writer is None
    assert "written through Python" in caplog.text and "/nonexistent/_sqlite3.so" in caplog.text
    assert drainer.drain()
    assert [r.request_id for r in _rows(harness)] == ["r1", "r2"] and core.acks == [2]


def test_a_batch_the_cores_writer_refuses_is_split_and_nothing_of_it_is_lost(
    harness: Harness,
) -> None:
    """A value no column takes (an object where a number belongs) fails the core's batch whole
    (rolled back); the drainer then isolates that event as a reject and stores the rest."""
    core = FakeCore(
        [event("r1", seq=1), event("bad", seq=2, prompt_tokens={"n": 1}), event("r3", seq=3)]
    )
    drainer = core.drainer(harness)
    assert drainer.drain()
    assert sorted(r.request_id for r in _rows(harness)) == ["r1", "r3"]
    with harness.ctx.sessions() as session:
        rejects = list(session.scalars(sa.select(UsageReject)))
    assert [(r.request_id, r.seq) for r in rejects] == [("bad", 2)]
    assert core.acks == [3]
