"""Keyset pagination: pages ordered by a unique column, the cursor holds the last value seen.
Stable under inserts and deletes (no offsets), and an index range scan at any depth."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import InstrumentedAttribute

from control.api.errors import Validation

R = TypeVar("R")
S = TypeVar("S", bound="Select[*tuple[Any, ...]]")
K = TypeVar("K", str, int)


def encode_cursor(value: str | int) -> str:
    raw = json.dumps({"after": value}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# A cursor this API hands out holds one id (at most 64 characters, each escaped in six at worst)
# or a time and a row id: a few hundred characters. A longer one is refused before it is decoded.
MAX_CURSOR = 2048
# Integer keys are 64-bit signed columns on both databases; SQLite's driver cannot bind more.
INT64 = range(-(2**63), 2**63)


def decode_cursor(cursor: str | None, kind: type[K]) -> K | None:
    """The last value a page held, from its `next_cursor`; a `Validation` error for anything this
    API did not hand out (too long, not base64 of JSON, nested past the decoder's depth, of the
    wrong kind, or an integer beyond the key columns)."""
    if cursor is None:
        return None
    if len(cursor) > MAX_CURSOR:
        raise Validation.field("cursor", "is not a cursor returned by this API")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))["after"]
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeError, RecursionError):
        raise Validation.field("cursor", "is not a cursor returned by this API") from None
    if type(value) is not kind or (type(value) is int and value not in INT64):
        raise Validation.field("cursor", "is not a cursor returned by this list")
    return value


def keyset(
    stmt: S,
    column: InstrumentedAttribute[Any],
    after: str | int | None,
    limit: int,
    *,
    descending: bool = False,
) -> S:
    """Rows after `after` in `column` order: one more than `limit`, to know if more exist."""
    if after is not None:
        stmt = stmt.where(column < after if descending else column > after)
    order = column.desc() if descending else column.asc()
    return stmt.order_by(order).limit(limit + 1)


def page(
    rows: Sequence[R], limit: int, key: Callable[[R], str | int]
) -> tuple[list[R], str | None]:
    items = list(rows[:limit])
    more = len(rows) > limit
    return items, (encode_cursor(key(items[-1])) if more and items else None)
