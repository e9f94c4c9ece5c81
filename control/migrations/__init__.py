"""Alembic migrations, configured in code (no alembic.ini): `upgrade(engine)` runs at start.

New revision: `.venv/bin/python -m control.migrations revision -m "what changes"` writes a file
under versions/ from the difference between the models and a database at head.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

HERE = Path(__file__).parent


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(HERE))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate to `revision`. On PostgreSQL the replicas of a fleet starting together take turns
    (a transaction-level advisory lock named after the schema), so one migrates and the others
    find the work done."""
    config = alembic_config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            schema = connection.execute(text("SELECT current_schema()")).scalar() or "public"
            digest = hashlib.sha256(f"{schema}:migrate".encode()).digest()
            key = int.from_bytes(digest[:8], "big", signed=True)
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str) -> None:
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
