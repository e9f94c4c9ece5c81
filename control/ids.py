"""Identifiers: time-ordered (ULID layout) so that ordering by id is creation order."""

from __future__ import annotations

import re
import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

# Ids chosen by operators (tenants, providers, pools): they appear in logs, metrics and usage rows.
SLUG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
SLUG = re.compile(SLUG_PATTERN)


def _base32(value: int, width: int) -> str:
    out = []
    for _ in range(width):
        out.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(out))


def new_id(prefix: str) -> str:
    """`prefix_` + 10 characters of milliseconds + 16 random characters (Crockford base32)."""
    millis = time.time_ns() // 1_000_000
    return f"{prefix}_{_base32(millis, 10)}{_base32(secrets.randbits(80), 16)}"
