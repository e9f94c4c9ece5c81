"""A drill: an operator forcing a pool, or one member of it, out of service for a while, to watch
traffic move to the other paths. The core holds the drill in memory; this row is the record (and
what a restart re-applies while its end is still ahead)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from control.db import Base


class Drill(Base):
    __tablename__ = "drills"
    # Active drills: ended_at IS NULL AND ends_at > now (at start, and before each new drill).
    __table_args__ = (Index("ix_drills_ended_at_ends_at", "ended_at", "ends_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # Plain ids, no foreign keys: the record outlives the pool it drilled.
    pool_id: Mapped[str] = mapped_column(String(64))
    # None: the whole pool.
    member_id: Mapped[str | None] = mapped_column(String(64))
    # The route the operator watched (it uses the pool), if one was named.
    route_alias: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(String(200))
    seconds: Mapped[int] = mapped_column(Integer)
    actor_id: Mapped[str] = mapped_column(String(40))
    actor_name: Mapped[str] = mapped_column(String(200))
    started_at: Mapped[datetime]
    ends_at: Mapped[datetime]
    # When the end was recorded (DELETE, or at start when the target was gone); at most ends_at.
    ended_at: Mapped[datetime | None]
    # Who ended it before its time; None when it ran its course.
    ended_by: Mapped[str | None] = mapped_column(String(200))
