"""Reading server-sent events the way the SDKs do."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def events(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Group `event:`/`data:` lines into events; data is parsed as JSON when it is JSON."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in lines:
        if not line:
            if current:
                out.append(current)
                current = {}
            continue
        if line.startswith(":"):
            current.setdefault("comment", line[1:].strip())
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            try:
                current["data"] = json.loads(value)
            except ValueError:
                current["data"] = value
        elif name == "event":
            current["event"] = value
    if current:
        out.append(current)
    return out
