"""The real PostgreSQL of the tests: its URL (SLUICEGATE_TEST_PG_URL), whether it answers, and
schemas of a test's own (`search_path`), so that concurrent runs on one server never collide."""

from __future__ import annotations

import os

import sqlalchemy as sa

PG_URL = os.environ.get(
    "SLUICEGATE_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def pg_problem(url: str = PG_URL) -> str | None:
    """Why PostgreSQL cannot be used, or None."""
    try:
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as e:
        return f"PostgreSQL at SLUICEGATE_TEST_PG_URL is unreachable: {type(e).__name__}: {e}"


def with_search_path(url: str, schema: str) -> str:
    parsed = sa.engine.make_url(url)
    return parsed.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False
    )


def create_schema(url: str, schema: str) -> None:
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()


def drop_schema(url: str, schema: str) -> None:
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    admin.dispose()
