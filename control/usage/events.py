"""Usage events as the core hands them out (`proxy_core/src/usage/event.rs`, JSON objects from
`Core.drain_usage`): the fields stored, and the one check an event gets before it is written.

There is no per-event model: the drainer parses a batch with one `json.loads` and reads the
dicts directly (a pydantic model per event cost ten times the rest of the drainer).
"""

from __future__ import annotations

import json
from typing import Any

# The columns of a raw usage row that come from the event, in insert order.
FIELDS: tuple[str, ...] = (
    "request_id",
    "seq",
    "key_id",
    "key_prefix",
    "tenant_id",
    "endpoint",
    "model",
    "upstream_model",
    "pool",
    "upstream",
    "priority",
    "stream",
    "status",
    "outcome",
    "error_code",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "usage_source",
    "cost_micros",
    "price_version",
    "queue_wait_ms",
    "connect_ms",
    "ttft_ms",
    "tpot_ms",
    "duration_ms",
    "started_at",
    "attempts",
    "fallback",
    "client_retry_count",
    "tags",
    "end_user",
)
# What the core writes between two events of a batch (`proxy_core/src/usage/batch.rs`): a raw
# newline is never inside a JSON string, so a batch can be cut between events without parsing it.
BETWEEN_EVENTS = b",\n"

# Fields the events of an earlier release lack (a journal written before an upgrade replays
# into the new ledger), with the value they stand for there.
ADDED_LATER: dict[str, Any] = {
    "cache_write_tokens": 0,
    "reasoning_tokens": 0,
    "tags": None,
    "end_user": None,
}
# The core writes every field (null when it has no value); one missing is a malformed event.
REQUIRED = frozenset(FIELDS) - ADDED_LATER.keys()

OUTCOMES = ("complete", "client_cancelled", "upstream_error", "timeout", "interrupted")
# Requests counted as errors in the rollups: an error status, or an end the client did not
# choose. A client that hangs up (`client_cancelled`) is not an error of the gateway's.
ERROR_OUTCOMES = frozenset({"upstream_error", "timeout", "interrupted"})


def complete(event: dict[str, Any]) -> dict[str, Any]:
    """The event with the fields of `ADDED_LATER` it lacks filled in."""
    return {**ADDED_LATER, **event}


def batch_text(events: list[Any]) -> bytes:
    """A batch's text as the core writes it (tests and benchmarks stand in for the core)."""
    items = (json.dumps(e, separators=(",", ":")).encode() for e in events)
    return b"[" + BETWEEN_EVENTS.join(items) + b"]"


def missing_fields(event: Any) -> list[str] | None:
    """The fields an event lacks (sorted), or None when it has them all."""
    if not isinstance(event, dict):
        return ["(not an object)"]
    if event.keys() >= REQUIRED:
        return None
    return sorted(REQUIRED - event.keys())


def is_error(status: int, outcome: str) -> bool:
    return status >= 400 or outcome in ERROR_OUTCOMES
