"""Validation helpers shared by request schemas."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def not_null(value: T | None) -> T:
    """In a partial update some fields may be left out but not set to null."""
    if value is None:
        raise ValueError("may be left out, but cannot be null")
    return value
