"""Engine, sessions and the declarative base. SQLite file by default, PostgreSQL by URL.

SQLite runs in WAL mode with foreign keys on and a busy timeout, so the usage drainer and the
admin API can write from different threads. Mutations start with a write (the control-state
row), which takes SQLite's write lock up front and PostgreSQL's row lock: see `mutation.py`.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import DateTime, Engine, MetaData, create_engine, event, text
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

from control.timeutil import as_utc

DEFAULT_URL = "sqlite:///./sluicegate.db"


def _null(value: None) -> None:
    return None


# Python's sqlite3 binds `None` and `bool` only after a search for an adapter that ends in an
# AttributeError formatted and then discarded (about 0.4-0.7 us a value): every usage row has
# several nulls and two booleans, and this was about a tenth of the drainer's CPU per event. A
# registered adapter is found at once. What is stored does not change: NULL, and 0 or 1.
sqlite3.register_adapter(type(None), _null)
sqlite3.register_adapter(bool, int)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in Python on every backend (SQLite stores them naive, in UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = as_utc(value)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime()}


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def create_db_engine(url: str) -> Engine:
    """An engine that never prints statement parameters in its errors (they may be secrets)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise ValueError(
                "SQLite needs a file database (the control plane uses several threads)"
            )
        engine = create_engine(
            parsed,
            hide_parameters=True,
            connect_args={"check_same_thread": False, "timeout": 30},
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    try:
        return create_engine(parsed, hide_parameters=True, pool_pre_ping=True)
    except ModuleNotFoundError as e:
        # The PostgreSQL driver is the package's `postgres` extra, not a base dependency.
        hint = (
            " (pip install 'sluicegate[postgres]')"
            if parsed.get_backend_name() == "postgresql"
            else ""
        )
        raise ValueError(f"the driver of {parsed.drivername} is not installed{hint}") from e


# Every SQLite connection's settings, the core's ledger writer's too (`control/usage/writer.py`).
SQLITE_PRAGMAS = (
    # Only a new file takes it (before its first table and before WAL mode): the ledger's batch
    # inserts into five trees, and 16 KiB pages cost it a tenth less CPU than 4 KiB ones
    # (bench/README.md, 2026-12-05). An existing database keeps its page size.
    "PRAGMA page_size=16384",
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=30000",
    # FULL: a commit survives a power loss too. The drainer acknowledges usage after its commit
    # and the core then forgets it, so a commit that could be lost would lose usage.
    "PRAGMA synchronous=FULL",
)


def _sqlite_pragmas(dbapi_connection: Any, connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in SQLITE_PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def ping(engine: Engine) -> bool:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:
        return False


def insert_if_missing(session: Session, model: type[Base], **values: Any) -> None:
    """`INSERT ... ON CONFLICT DO NOTHING`: a row another transaction inserts at the same moment
    (a replica starting beside this one) is left as it is, where a read-then-insert would fail
    on the primary key. On PostgreSQL the statement waits for that transaction, so what follows
    sees its row."""
    table = model.__table__
    dialect = session.get_bind().dialect.name
    insert: Any
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:
        raise ValueError(f"unsupported database dialect {dialect!r}")
    session.execute(insert(table).values(**values).on_conflict_do_nothing())
