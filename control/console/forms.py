"""Form fields into the admin API's JSON: whole numbers, lists, quotas, times. A field that
cannot be read is reported against its name, as the API reports its own refusals."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from control.console.api import ApiError
from control.timeutil import as_utc

MISSING = object()


class FormError(ApiError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(422, "validation_error", f"{field}: {message}", {field: message})


def text(form: Mapping[str, str], name: str) -> str | None:
    value = form.get(name, "").strip()
    return value or None


def whole(form: Mapping[str, str], name: str) -> int | None:
    value = text(form, name)
    if value is None:
        return None
    try:
        return int(value.replace(",", "").replace("_", ""))
    except ValueError:
        raise FormError(name, "must be a whole number") from None


def names(form: Mapping[str, str], name: str) -> list[str] | None:
    """A list written one per line or comma-separated; empty: none (null)."""
    value = text(form, name)
    if value is None:
        return None
    return [part for part in (p.strip() for p in re.split(r"[,\n]", value)) if part]


def moment(form: Mapping[str, str], name: str) -> str | None:
    """`datetime-local` input (read as UTC) or ISO 8601 text, as ISO 8601 UTC."""
    value = text(form, name)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise FormError(name, "must be a date and time (YYYY-MM-DDTHH:MM, UTC)") from None
    try:
        return as_utc(parsed).isoformat()
    except ValueError:  # an offset that moves it past year 1 or 9999
        raise FormError(name, "must be a date and time between the years 1 and 9999") from None


def quota(form: Mapping[str, str]) -> dict[str, Any] | None:
    """`quota_period` (empty: no quota), `quota_tokens`, `quota_cost_micros`."""
    period = text(form, "quota_period")
    if period is None:
        return None
    return {
        "period": period,
        "tokens": whole(form, "quota_tokens"),
        "cost_micros": whole(form, "quota_cost_micros"),
    }


def checked(form: Mapping[str, str], name: str) -> bool:
    return form.get(name) in ("on", "true", "1")


def changes(body: dict[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `body` that differ from what the API returned: a PATCH that names only
    what the person changed (a tenant token may not even restate an operator's lock)."""
    out: dict[str, Any] = {}
    for name, value in body.items():
        now = current.get(name, MISSING)
        if name == "quota" and isinstance(now, dict):
            now = {k: now.get(k) for k in ("period", "tokens", "cost_micros")}
        same_moment = name == "expires_at" and value is not None and now not in (None, MISSING)
        if same_moment and _same_moment(str(value), str(now)):
            continue
        if value != now:
            out[name] = value
    return out


def _same_moment(a: str, b: str) -> bool:
    def parse(s: str) -> datetime:
        d = datetime.fromisoformat(s.replace("Z", "+00:00"))
        return d if d.tzinfo else d.replace(tzinfo=UTC)

    try:
        return parse(a).replace(second=0, microsecond=0) == parse(b).replace(
            second=0, microsecond=0
        )
    except ValueError:
        return False
