"""The admin app in-process (FastAPI TestClient) over SQLite and over the real PostgreSQL.

Every test gets an empty database: a SQLite file in its tmp dir, or the emptied tables of a
PostgreSQL schema that belongs to this test session (`search_path`) and is dropped at its end,
so that concurrent runs on one server never collide.
PostgreSQL comes from SLUICEGATE_TEST_PG_URL; without it the PostgreSQL half is skipped, except
under CI=true where a missing server is a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sluicegate._core import Core

from control.api.app import create_app
from control.bridge.core_bridge import CoreBridge
from control.process.settings import Settings, load_settings
from tests.control.helpers import ADMIN_TOKEN, ENCRYPTION_KEY, PEPPER, Api, Harness
from tests.support.pg import PG_URL, create_schema, drop_schema, pg_problem, with_search_path


@pytest.fixture(scope="session")
def pg_url() -> str:
    problem = pg_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return PG_URL


@pytest.fixture(scope="session")
def pg_session_url(pg_url: str) -> Iterator[str]:
    """A schema of this test session's own; tables are emptied before each test."""
    schema = f"sgtest_{uuid.uuid4().hex[:12]}"
    create_schema(pg_url, schema)
    try:
        yield with_search_path(pg_url, schema)
    finally:
        drop_schema(pg_url, schema)


@pytest.fixture
def pg_schema_url(pg_session_url: str) -> str:
    engine = sa.create_engine(pg_session_url)
    with engine.begin() as conn:
        tables = [name for name in sa.inspect(conn).get_table_names() if name != "alembic_version"]
        if tables:
            names = ", ".join(f'"{t}"' for t in tables)
            conn.execute(sa.text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    engine.dispose()
    return pg_session_url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/control.db"
    url: str = request.getfixturevalue("pg_schema_url")
    return url


def make_settings(database_url: str, **env: str) -> Settings:
    values = {
        "SLUICEGATE_DATABASE_URL": database_url,
        "SLUICEGATE_ADMIN_TOKEN": ADMIN_TOKEN,
        "SLUICEGATE_KEY_PEPPER": PEPPER,
        "SLUICEGATE_ENCRYPTION_KEY": ENCRYPTION_KEY,
        "SLUICEGATE_DATA_LISTEN": "127.0.0.1:0",
        "SLUICEGATE_ADMIN_LISTEN": "127.0.0.1:18081",
        "SLUICEGATE_USAGE_DRAIN_TIMEOUT_MS": "50",
        **env,
    }
    return load_settings(None, values)


@pytest.fixture
def harness_factory(database_url: str) -> Iterator[Callable[..., Harness]]:
    """Start the admin app (lifespan included); `start_core=True` also serves the data plane."""
    started: list[tuple[TestClient, CoreBridge]] = []

    def start(*, start_core: bool = False, **env: str) -> Harness:
        settings = make_settings(database_url, **env)
        bridge = CoreBridge(Core(workers=1, expose_upstream=True))
        if start_core:
            bridge.start("127.0.0.1:0")
        client = TestClient(create_app(settings, bridge), raise_server_exceptions=False)
        client.__enter__()
        started.append((client, bridge))
        return Harness(client, bridge, settings)

    yield start
    for client, bridge in reversed(started):
        bridge.stop(1.0)
        client.__exit__(None, None, None)


@pytest.fixture
def harness(harness_factory: Callable[..., Harness]) -> Harness:
    return harness_factory()


@pytest.fixture
def admin(harness: Harness) -> Api:
    return harness.admin


@pytest.fixture
def world(admin: Api) -> dict[str, Any]:
    """Two tenants with a key each, a provider, a pool and a route."""
    admin.create_tenant(id="acme", name="Acme", rpm=600, tpm=100_000, max_concurrency=20)
    admin.create_tenant(id="globex", name="Globex")
    admin.create_provider(id="up1", base_url="http://127.0.0.1:9/v1", credential="sk-up-1-abcdefgh")
    admin.create_pool(id="main", members=[{"provider_id": "up1"}])
    admin.create_route(alias="chat", chain=[{"pool": "main", "model": "sim-llama"}])
    return {
        "acme_key": admin.create_key(tenant_id="acme", name="acme-1"),
        "globex_key": admin.create_key(tenant_id="globex", name="globex-1"),
    }
