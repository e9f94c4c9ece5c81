"""Usage events shaped like the core's, and a stand-in for the core's side of the drainer."""

from __future__ import annotations

from typing import Any

from control.usage.drainer import UsageDrainer
from control.usage.events import batch_text
from tests.control.helpers import Harness

# 2026-03-04T05:06:07Z
T0 = 1772600767.25


def event(
    request_id: str, tenant_id: str = "acme", key_id: str = "k1", seq: int = 1, **extra: Any
) -> dict[str, Any]:
    base = {
        "seq": seq,
        "request_id": request_id,
        "key_id": key_id,
        "key_prefix": "sk-sg-abcdef",
        "tenant_id": tenant_id,
        "endpoint": "chat_completions",
        "model": "chat",
        "upstream_model": "sim-llama",
        "pool": "main",
        "upstream": "up1",
        "priority": "interactive",
        "stream": True,
        "status": 200,
        "outcome": "complete",
        "error_code": None,
        "prompt_tokens": 12,
        "completion_tokens": 34,
        "cached_tokens": 0,
        "cache_write_tokens": 0,
        "reasoning_tokens": 0,
        "usage_source": "upstream",
        "cost_micros": 7,
        "price_version": 3,
        "queue_wait_ms": 0.1,
        "connect_ms": 1.5,
        "ttft_ms": 20.0,
        "tpot_ms": 2.0,
        "duration_ms": 90.0,
        "started_at": T0,
        "attempts": 1,
        "fallback": False,
        "client_retry_count": None,
        "tags": None,
        "end_user": None,
    }
    return base | extra


class FakeCore:
    """Stands in for `Core.drain_usage` and `Core.ack_usage`: hands out queued batches (as the
    core does, a JSON array) and records the acknowledgements."""

    def __init__(self, *batches: list[Any]) -> None:
        self.batches = [batch_text(b) for b in batches]
        self.acks: list[int] = []
        self.on_ack: Any = None

    def drain(self, max_events: int, timeout_ms: int) -> bytes:
        return self.batches.pop(0) if self.batches else b"[]"

    def ack(self, seq: int) -> None:
        if self.on_ack is not None:
            self.on_ack(seq)
        self.acks.append(seq)

    def drainer(self, harness: Harness, **options: Any) -> UsageDrainer:
        return UsageDrainer(self.drain, harness.ctx.sessions, ack=self.ack, **options)
