"""The migrations build exactly the models' schema, and the key list stays an index range scan
at 100k keys (checked through the query plan, not a stopwatch)."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.orm import Session

from control import migrations
from control.db import create_db_engine
from control.keys.models import ApiKey
from control.keys.repository import KeyFilters, page_query
from control.models import metadata
from control.pools.models import Pool
from control.pools.policies import Admission, Ejection, Retry
from control.tenants.models import Tenant
from tests.support.pg import with_search_path


def test_migrations_match_the_models(database_url: str) -> None:
    engine = create_db_engine(database_url)
    migrations.upgrade(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    engine.dispose()
    assert diff == []


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database without any table, not even Alembic's."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/empty.db"
        return
    pg_url: str = request.getfixturevalue("pg_url")
    schema = f"sgempty_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield with_search_path(pg_url, schema)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def test_pools_from_before_the_policies_get_the_defaults(empty_database_url: str) -> None:
    engine = create_db_engine(empty_database_url)
    migrations.upgrade(engine, "0001")
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO pools (id, name, connect_ms, first_byte_ms, idle_ms, total_ms, "
                "created_at, updated_at) VALUES ('old', 'old', 1, 2, 3, 4, :now, :now)"
            ),
            {"now": now},
        )
    migrations.upgrade(engine)
    with Session(engine) as session:
        pool = session.get(Pool, "old")
        assert pool is not None
        assert pool.admission == Admission().model_dump(mode="json")
        assert pool.retry == Retry().model_dump(mode="json")
        assert pool.ejection == Ejection().model_dump(mode="json")
        assert pool.health_check is None
    migrations.downgrade(engine, "0001")
    with engine.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("pools")}
    assert "admission" not in columns and "total_ms" in columns
    engine.dispose()


def _plan(engine: sa.Engine, stmt: sa.Select[ApiKey, str]) -> str:
    compiled = stmt.compile(engine, compile_kwargs={"render_postcompile": True})
    with engine.connect() as conn:
        params = tuple(compiled.params[name] for name in compiled.positiontup or ())
        rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", params).all()
    return "\n".join(str(row[-1]) for row in rows)


def test_key_pages_use_indexes_at_100k_keys(tmp_path: Path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path}/big.db")
    migrations.upgrade(engine)
    now = datetime.now(UTC)
    tenants = [f"t{i:03d}" for i in range(100)]
    started = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(
            sa.insert(Tenant),
            [
                {"id": t, "name": t, "status": "active", "created_at": now, "updated_at": now}
                for t in tenants
            ],
        )
        stamp = now.replace(tzinfo=None).isoformat(sep=" ")
        # Generated inside SQLite: 100k rows without 100k Python round trips.
        conn.exec_driver_sql(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99999) "
            "INSERT INTO api_keys (id, tenant_id, prefix, hash, status, priority, created_at, "
            "updated_at) SELECT printf('key_%08d', i), printf('t%03d', i % 100), "
            "printf('sk-sg-%06d', i % 1000), printf('%064x', i), 'active', 'interactive', ?, ? "
            "FROM n",
            (stamp, stamp),
        )
        conn.exec_driver_sql("ANALYZE")
    print(f"inserted 100k keys in {time.perf_counter() - started:.1f}s")

    by_tenant = page_query(KeyFilters(tenant_id="t042"), now, "key_00050000", 50)
    assert "USING INDEX ix_api_keys_tenant_id_id (tenant_id=? AND id>?)" in _plan(engine, by_tenant)
    by_prefix = page_query(KeyFilters(prefix="sk-sg-000042"), now, None, 50)
    assert "USING INDEX ix_api_keys_prefix_id (prefix=?)" in _plan(engine, by_prefix)
    everything = page_query(KeyFilters(), now, "key_00099000", 50)
    plan = _plan(engine, everything)
    assert "SCAN api_keys" not in plan or "USING INDEX" in plan.split("SCAN api_keys")[1]

    with engine.connect() as conn:
        started = time.perf_counter()
        rows = conn.execute(by_tenant).all()
        print(f"tenant page in {(time.perf_counter() - started) * 1000:.1f} ms")
    ids = [row[0] for row in rows]
    assert len(ids) == 51 and ids == sorted(ids)
    assert all(int(i[4:]) % 100 == 42 and i > "key_00050000" for i in ids)
    engine.dispose()


def test_a_new_sqlite_database_has_16k_pages_and_a_wal(tmp_path: Path) -> None:
    # The page size can only be chosen before the first table and before WAL mode; the engine's
    # connect hook must set it first (bench/README, 2026-12-05: the ledger's insert is cheaper).
    engine = create_db_engine(f"sqlite:///{tmp_path}/new.db")
    migrations.upgrade(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA page_size").scalar() == 16384
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


def test_an_existing_sqlite_database_keeps_its_page_size(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:
        old.execute("PRAGMA page_size=4096")
        old.execute("PRAGMA journal_mode=WAL")
        old.execute("CREATE TABLE kept (x INTEGER)")
        old.execute("INSERT INTO kept VALUES (1)")
    engine = create_db_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA page_size").scalar() == 4096
        assert conn.exec_driver_sql("SELECT x FROM kept").scalar() == 1
