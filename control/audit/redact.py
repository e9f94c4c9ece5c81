"""The last guard before a summary is stored: fields that name a secret never keep their value.
Services build summaries without secrets in the first place; this catches a future slip."""

from __future__ import annotations

from typing import Any

SECRET_NAMES = frozenset(
    {"credential", "key", "token", "secret", "password", "key_pepper", "encryption_key"}
)


def redact(summary: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in summary.items():
        if name in SECRET_NAMES and value is not None:
            out[name] = "[redacted]"
        elif isinstance(value, dict):
            out[name] = redact(value)
        elif isinstance(value, list):
            out[name] = [redact(v) if isinstance(v, dict) else v for v in value]
        else:
            out[name] = value
    return out
