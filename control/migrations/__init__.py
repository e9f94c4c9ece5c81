"""Alembic migrations, configured in code (no alembic.ini): `upgrade(engine)` runs at start.

New revision: `.venv/bin/python -m control.migrations revision -m "what changes"` writes a file
under versions/ from the difference between the models and a database at head.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

HERE = Path(__file__).parent


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(HERE))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str) -> None:
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
