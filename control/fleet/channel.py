"""How replicas tell each other that something was committed: PostgreSQL's NOTIFY, sent inside
the committing transaction (so it is delivered at commit, and never for a rolled-back change),
and a dedicated LISTEN connection per replica. A notification carries only the new counters; a
listener re-reads the database, so a lost notification costs nothing but the delay until the
next periodic check.

Notifications and advisory locks are database-wide: the channel and lock names include the
schema the replicas work in, so fleets (and tests) in other schemas of the same database never
hear each other."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session


def is_postgresql(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def namespace(engine: Engine) -> str:
    """The schema the fleet's tables live in."""
    with engine.connect() as conn:
        schema = conn.execute(text("SELECT current_schema()")).scalar()
    return str(schema or "public")


def channel_name(schema: str) -> str:
    digest = hashlib.sha256(schema.encode()).hexdigest()[:16]
    return f"sluicegate_fleet_{digest}"


def lock_key(schema: str, purpose: str) -> int:
    """A signed 64-bit advisory lock key for `purpose` in this schema."""
    digest = hashlib.sha256(f"{schema}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def announce(session: Session, channel: str, payload: dict[str, Any]) -> None:
    """Queue a notification in the session's transaction (PostgreSQL; sent at its commit)."""
    if session.get_bind().dialect.name != "postgresql":
        return
    session.execute(
        text("SELECT pg_notify(:channel, :payload)"),
        {"channel": channel, "payload": json.dumps(payload)},
    )


def direct_connection(engine: Engine, *, autocommit: bool) -> Any:
    """A DB-API connection of its own, outside the pool (LISTEN and session-level advisory locks
    live as long as their connection), with keepalives so a dead peer is noticed in seconds."""
    cargs, cparams = engine.dialect.create_connect_args(engine.url)
    cparams = {
        **cparams,
        "autocommit": autocommit,
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": 10_000,
        "connect_timeout": 5,
    }
    return engine.dialect.loaded_dbapi.connect(*cargs, **cparams)
