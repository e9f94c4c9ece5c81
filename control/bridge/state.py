"""Process-wide rows: the config version counter (one row) and named settings (key-value)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, String, Text, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from control.db import Base, insert_if_missing
from control.timeutil import utcnow


class ControlState(Base):
    """The single row every mutation locks first (write lock on SQLite, row lock on PostgreSQL)."""

    __tablename__ = "control_state"
    __table_args__ = (CheckConstraint("id = 1", name="single_row"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # Version of the last snapshot committed (and acknowledged by the core before the commit).
    config_version: Mapped[int] = mapped_column(BigInteger)
    # Every committed mutation, including those that do not change the snapshot.
    mutations: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime]


class Setting(Base):
    """Values the process keeps across restarts (generated pepper, key checks). Never returned."""

    __tablename__ = "settings"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


def lock_state(session: Session) -> ControlState:
    """Take the mutation lock of the database and return the state row (created if missing)."""
    take = (
        update(ControlState)
        .where(ControlState.id == 1)
        .values(mutations=ControlState.mutations + 1, updated_at=utcnow())
    )
    if session.execute(take).rowcount == 0:  # type: ignore[attr-defined]
        # A new database: whoever inserts first, every one of them then takes the row's lock.
        insert_if_missing(
            session, ControlState, id=1, config_version=0, mutations=0, updated_at=utcnow()
        )
        session.execute(take)
    state = session.scalars(select(ControlState).where(ControlState.id == 1)).one()
    session.refresh(state)
    return state


def committed_version(session: Session) -> int:
    version = session.scalar(select(ControlState.config_version).where(ControlState.id == 1))
    return version or 0


def get_setting(session: Session, name: str) -> str | None:
    return session.scalar(select(Setting.value).where(Setting.name == name))


def put_setting(session: Session, name: str, value: str) -> None:
    row = session.get(Setting, name)
    if row is None:
        insert_if_missing(session, Setting, name=name, value=value)
        row = session.get(Setting, name, populate_existing=True)
    if row is not None:
        row.value = value
