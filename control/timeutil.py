"""Time in one convention: timezone-aware UTC datetimes in Python, unix seconds for the core."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_unix(moment: datetime) -> float:
    return moment.timestamp()


def from_unix(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def as_utc(moment: datetime) -> datetime:
    """Naive datetimes are read as UTC (what the API documents); aware ones are converted."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
