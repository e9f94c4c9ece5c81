"""A fresh PostgreSQL database for the benchmarked `serve` ("sluicegate_bench", or a name of the
caller's, dropped and created again on the server of SLUICEGATE_BENCH_PG_URL, default the local
one)."""

from __future__ import annotations

import os

import psycopg
from sqlalchemy.engine import make_url

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
NAME = "sluicegate_bench"


def fresh_database(name: str = NAME) -> str | None:
    """The URL of an empty database, or None (with the reason printed) when the server does not
    answer: the PostgreSQL row of the comparison is then left out."""
    url = make_url(os.environ.get("SLUICEGATE_BENCH_PG_URL", DEFAULT_URL))
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
    except psycopg.Error as e:
        print(f"[bench] PostgreSQL unavailable ({type(e).__name__}: {e}); its row is left out")
        return None
    return url.set(database=name).render_as_string(hide_password=False)
