"""Retention of raw usage rows: rows whose request started more than `usage.raw_retention_days`
ago are deleted in bounded batches (each its own short transaction, so the drainer and admin
changes keep getting the database between them). Rollups are never deleted."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from control.timeutil import utcnow
from control.usage.models import UsageRecord

log = logging.getLogger("sluicegate.usage")

BATCH = 5000
# How often the job runs, and how long after the start it first runs.
INTERVAL_S = 3600.0
FIRST_RUN_S = 60.0


def delete_old_rows(
    sessions: sessionmaker[Session],
    days: int,
    *,
    now: datetime | None = None,
    batch: int = BATCH,
    stop: threading.Event | None = None,
) -> int:
    """Delete raw rows that started before `now - days`; returns how many were deleted."""
    cutoff = (now or utcnow()) - timedelta(days=days)
    oldest = (
        select(UsageRecord.id)
        .where(UsageRecord.started_at < cutoff)
        .order_by(UsageRecord.started_at, UsageRecord.id)
        .limit(batch)
    )
    total = 0
    while stop is None or not stop.is_set():
        with sessions() as session, session.begin():
            deleted = session.execute(
                delete(UsageRecord).where(UsageRecord.id.in_(oldest.scalar_subquery()))
            ).rowcount  # type: ignore[attr-defined]
        total += deleted
        if deleted < batch:
            break
    return total


class RetentionJob:
    def __init__(self, sessions: sessionmaker[Session], days: int) -> None:
        self._sessions = sessions
        self._days = days

    def run(self, stop: threading.Event) -> None:
        wait = FIRST_RUN_S
        while not stop.wait(wait):
            wait = INTERVAL_S
            try:
                deleted = delete_old_rows(self._sessions, self._days, stop=stop)
            except Exception:
                log.exception("usage retention: deleting old raw rows failed; next run in an hour")
                continue
            if deleted:
                log.info(
                    "usage retention: %d raw rows older than %d days deleted", deleted, self._days
                )
