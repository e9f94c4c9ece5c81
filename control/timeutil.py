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
    """Naive datetimes are read as UTC (what the API documents); aware ones are converted. A
    ValueError (an input error) for one its offset moves past year 9999 or before year 1, where
    Python raises OverflowError."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError("is outside the years 1 to 9999 once moved to UTC") from None
