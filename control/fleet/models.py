"""One row per live replica of the fleet, written by the replica itself (`heartbeat.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from control.db import Base


class Replica(Base):
    __tablename__ = "replicas"
    __table_args__ = (Index("ix_replicas_heartbeat_at", "heartbeat_at"),)

    # Unique per process start: a restarted replica is a new row.
    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    data_address: Mapped[str] = mapped_column(String(200))
    admin_address: Mapped[str] = mapped_column(String(200))
    package_version: Mapped[str] = mapped_column(String(40))
    started_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]
    # The config version its data plane runs, and the last one it refused (version skew).
    applied_version: Mapped[int | None] = mapped_column(BigInteger)
    refused_version: Mapped[int | None] = mapped_column(BigInteger)
    refused_message: Mapped[str | None] = mapped_column(String(500))
    # `shared` (Redis), `fallback` (local shares while Redis is away) or `local` (no Redis).
    limits_mode: Mapped[str] = mapped_column(String(16))
    leader: Mapped[bool] = mapped_column(Boolean)
    ready: Mapped[bool] = mapped_column(Boolean)
    # The replica's windowed status (the core's), for the fleet's status and doctor.
    status: Mapped[dict[str, Any] | None] = mapped_column(JSON)
