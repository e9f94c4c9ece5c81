"""Usage survives what a gateway meets in production, checked against the simulator's record
(the requests the upstream actually saw, keyed by the `x-request-id` the gateway sends it):

- `kill -9` ten times under streaming load, at random moments (some while the journal's replay
  is being written to SQL at start, the others while requests stream and the drainer flushes),
  each time started again on the same journal and database: one usage row per request, the
  ledger's ids and tokens those of the record (interrupted requests billed by the policy);
- PostgreSQL unreachable for a while under load: the journal holds the usage (requests keep being
  served), drains when the database is back, nothing lost or doubled;
- SIGTERM lets in-flight streams finish and writes their usage before the exit.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.e2e.helpers import UPSTREAM_SECRET
from tests.e2e.ledger import BODY, Load, Serve, compare, ledger, set_up, write_config
from tests.support.faultproxy import FaultProxy
from tests.support.jsonl import whole_lines
from tests.support.pg import PG_URL, create_schema, drop_schema, pg_problem, with_search_path
from tests.support.procs import Proc

KILLS = 10


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A schema of this test's own on the real PostgreSQL (skipped without one, except in CI)."""
    problem = pg_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    schema = f"sge2e_{uuid.uuid4().hex[:12]}"
    create_schema(PG_URL, schema)
    try:
        yield schema
    finally:
        drop_schema(PG_URL, schema)


def _sim(sim_factory: Callable[..., Proc], record: Path, itl_ms: str = "5") -> Proc:
    return sim_factory(
        "--api-key", UPSTREAM_SECRET, "--ttft-ms", "20", "--itl-ms", itl_ms,
        "--record", str(record),
    )  # fmt: skip


def _wait_for_rows(database_url: str, at_least: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while len(ledger(database_url)) < at_least and time.monotonic() < deadline:
        time.sleep(0.1)


def test_kill_9_ten_times_under_streaming_load(
    tmp_path: Path, sim_factory: Callable[..., Proc]
) -> None:
    rng = random.Random()
    record = tmp_path / "sim.jsonl"
    sim = _sim(sim_factory, record)
    database_url = f"sqlite:///{tmp_path}/sluicegate.db"
    serve = Serve(tmp_path, write_config(tmp_path, database_url))
    serve.start()
    load = Load(serve, set_up(serve, sim.address))
    load.start()
    # Which kills land while the replay of the previous crash is written to SQL.
    during_start = set(rng.sample(range(1, KILLS), 3))
    for kill in range(KILLS):
        if kill in during_start:
            # Killed while the previous crash's journal is written to SQL, before any request
            # (if the previous kill left nothing to replay, just after the start).
            serve.spawn()
            assert serve.wait_for_log("usage journal replayed", "listening on", timeout=30)
            time.sleep(rng.uniform(0.0, 0.25))
        else:
            if serve.url is None:
                serve.start()
            time.sleep(rng.uniform(0.3, 1.5))
        serve.kill()
    serve.start()
    time.sleep(0.5)
    load.stop()
    assert serve.terminate() == 0
    sim.stop()

    rows = ledger(database_url)
    counts = compare(rows, whole_lines(record))
    print(f"kill -9 x{KILLS}: {counts}, client side {dict(load.outcomes)}")
    assert counts["complete"] > 50 and counts["interrupted"] > 0
    assert load.outcomes["complete"] > 50 and load.outcomes["cut"] > 0


def test_postgresql_unreachable_under_load(
    tmp_path: Path, sim_factory: Callable[..., Proc], pg_database: str
) -> None:
    outage_s = 30.0  # as the issue asks; six times the drainer's longest backoff (5 s)
    record = tmp_path / "sim.jsonl"
    sim = _sim(sim_factory, record)
    pg = sa.engine.make_url(PG_URL)
    proxy = FaultProxy(f"{pg.host or '127.0.0.1'}:{pg.port or 5432}")
    direct_url = with_search_path(PG_URL, pg_database)
    through_proxy = pg.set(host="127.0.0.1", port=proxy.port)
    via_proxy = with_search_path(through_proxy.render_as_string(hide_password=False), pg_database)
    serve = Serve(tmp_path, write_config(tmp_path, via_proxy))
    try:
        serve.start()
        load = Load(serve, set_up(serve, sim.address))
        load.start()
        time.sleep(1.5)
        before = load.outcomes["complete"]
        proxy.set_mode("refuse")
        backlog = 0.0
        deadline = time.monotonic() + outage_s
        while time.monotonic() < deadline:
            backlog = max(backlog, serve.metric("sluicegate_usage_backlog"))
            time.sleep(0.5)
        served_during = load.outcomes["complete"] - before
        proxy.set_mode("pass")
        # Requests kept being served, and their usage waited in the journal.
        assert served_during > 20 and backlog >= served_during * 0.5, (served_during, backlog)
        drained = time.monotonic() + 30
        while serve.metric("sluicegate_usage_backlog") > 20 and time.monotonic() < drained:
            time.sleep(0.2)
        assert serve.metric("sluicegate_usage_backlog") <= 20, "the journal did not drain"
        load.stop()
        assert serve.terminate() == 0
    finally:
        serve.kill()
        proxy.close()
    sim.stop()
    rows = ledger(direct_url)
    counts = compare(rows, whole_lines(record))
    print(f"outage {outage_s:.0f}s: {served_during} served meanwhile, backlog peak {backlog:.0f}")
    assert counts == {"complete": load.outcomes["complete"], "interrupted_unseen": 0}
    assert "retrying in" in (serve.log.read_text() if serve.log else "")


def test_sigterm_finishes_streams_and_writes_their_usage(
    tmp_path: Path, sim_factory: Callable[..., Proc]
) -> None:
    record = tmp_path / "sim.jsonl"
    sim = _sim(sim_factory, record, itl_ms="60")  # 20 tokens: about 1.2 s per stream
    database_url = f"sqlite:///{tmp_path}/sluicegate.db"
    serve = Serve(tmp_path, write_config(tmp_path, database_url, grace=20))
    serve.start()
    key = set_up(serve, sim.address)
    url = serve.url
    assert url is not None
    results: list[tuple[int, bytes]] = []

    def stream() -> None:
        with httpx.stream(
            "POST",
            url + "/v1/chat/completions",
            json=BODY,
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        ) as response:
            results.append((response.status_code, b"".join(response.iter_bytes())))

    clients = [threading.Thread(target=stream) for _ in range(8)]
    for client in clients:
        client.start()
    time.sleep(0.4)  # every stream is under way
    started = time.monotonic()
    assert serve.terminate() == 0
    assert time.monotonic() - started < 15
    for client in clients:
        client.join(10)
    assert len(results) == 8
    assert all(code == 200 and body.rstrip().endswith(b"data: [DONE]") for code, body in results)
    sim.stop()
    rows = ledger(database_url)
    assert compare(rows, whole_lines(record)) == {"complete": 8, "interrupted_unseen": 0}
    # Nothing was left in the journal: the next start replays nothing.
    serve.start()
    assert serve.terminate() == 0
    assert len(ledger(database_url)) == 8
    assert serve.log is not None and "usage journal replayed" not in serve.log.read_text()
