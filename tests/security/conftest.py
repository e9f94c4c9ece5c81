"""The security suite: each test holds one of the promises of SECURITY.md against a hostile
tenant, key holder or anonymous client, and failed on the code before that promise was kept.

The admin app fixtures are those of the control suite (in-process app over SQLite and the real
PostgreSQL); `sluicegate serve` runs as a process where memory or files are what is checked."""

from __future__ import annotations

from tests.control.conftest import (
    admin,
    database_url,
    harness,
    harness_factory,
    pg_schema_url,
    pg_session_url,
    pg_url,
    world,
)

__all__ = [
    "admin",
    "database_url",
    "harness",
    "harness_factory",
    "pg_schema_url",
    "pg_session_url",
    "pg_url",
    "world",
]
