"""The usage drainer writes core events to SQL idempotently; the usage list is tenant-scoped."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa

from control.usage.drainer import UsageDrainer
from control.usage.models import UsageRecord
from tests.control.helpers import Harness


def event(
    request_id: str, tenant_id: str = "acme", key_id: str = "k1", **extra: Any
) -> dict[str, Any]:
    base = {
        "seq": 1,
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
        "usage_source": "upstream",
        "queue_wait_ms": 0.1,
        "connect_ms": 1.5,
        "ttft_ms": 20.0,
        "tpot_ms": 2.0,
        "duration_ms": 90.0,
        "started_at": time.time(),
        "attempts": 1,
        "fallback": False,
        "client_retry_count": None,
    }
    return base | extra


class FakeCore:
    """Stands in for `Core.drain_usage`: hands out queued batches."""

    def __init__(self, *batches: list[dict[str, Any]]) -> None:
        self.batches = list(batches)

    def drain(self, max_events: int, timeout_ms: int) -> list[dict[str, Any]]:
        return self.batches.pop(0) if self.batches else []


def _rows(harness: Harness) -> list[UsageRecord]:
    with harness.ctx.sessions() as session:
        return list(session.scalars(sa.select(UsageRecord).order_by(UsageRecord.id)))


def test_events_are_written_once_per_request_id(harness: Harness) -> None:
    core = FakeCore(
        [event("r1"), event("r2")],
        [event("r2"), event("r3", outcome="timeout", ttft_ms=None)],  # r2 replayed
    )
    drainer = UsageDrainer(core.drain, harness.ctx.sessions)
    assert drainer.flush() == 4
    rows = _rows(harness)
    assert [r.request_id for r in rows] == ["r1", "r2", "r3"]
    assert drainer.written == 3
    assert (rows[2].outcome, rows[2].ttft_ms, rows[0].completion_tokens) == ("timeout", None, 34)
    assert abs(rows[0].started_at.timestamp() - time.time()) < 60


def test_a_failed_write_is_retried_before_anything_new(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = FakeCore([event("r1")], [event("r2")])
    drainer = UsageDrainer(core.drain, harness.ctx.sessions)
    real = harness.ctx.sessions
    failures = {"left": 1}

    def flaky() -> Any:
        if failures["left"]:
            failures["left"] -= 1
            raise sa.exc.OperationalError("INSERT", {}, Exception("database is down"))
        return real()

    monkeypatch.setattr(drainer, "_sessions", flaky)
    with pytest.raises(sa.exc.OperationalError):
        drainer.step(0)
    assert len(core.batches) == 1  # r2 not taken yet
    assert drainer.step(0) == 1  # r1, from the kept batch
    assert drainer.step(0) == 1  # then r2
    assert [r.request_id for r in _rows(harness)] == ["r1", "r2"]


def test_the_drainer_thread_runs_and_flushes_on_stop(harness: Harness) -> None:
    core = FakeCore(*[[event(f"t{i}")] for i in range(5)])
    drainer = UsageDrainer(core.drain, harness.ctx.sessions, timeout_ms=10)
    stop = threading.Event()
    thread = threading.Thread(target=drainer.run, args=(stop,))
    thread.start()
    deadline = time.monotonic() + 5
    while len(_rows(harness)) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert len(_rows(harness)) == 5


def test_a_malformed_event_is_reported_and_the_rest_written(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    broken = event("bad")
    del broken["status"]
    core = FakeCore([broken, event("good")])
    UsageDrainer(core.drain, harness.ctx.sessions).flush()
    assert [r.request_id for r in _rows(harness)] == ["good"]
    assert "usage event bad refused (fields: status)" in caplog.text


def test_usage_list_filters_and_tenant_scope(harness: Harness, world: dict[str, Any]) -> None:
    acme_key, globex_key = world["acme_key"]["id"], world["globex_key"]["id"]
    core = FakeCore(
        [
            event("a1", "acme", acme_key),
            event("a2", "acme", acme_key, model="other", outcome="upstream_error"),
            event("g1", "globex", globex_key),
        ]
    )
    UsageDrainer(core.drain, harness.ctx.sessions).flush()
    admin = harness.admin
    assert [u["request_id"] for u in admin.all_pages("/v1/admin/usage")] == ["g1", "a2", "a1"]
    assert [u["request_id"] for u in admin.all_pages("/v1/admin/usage", model="other")] == ["a2"]
    assert [
        u["request_id"]
        for u in admin.all_pages("/v1/admin/usage", outcome="complete", tenant_id="acme")
    ] == ["a1"]
    assert [u["request_id"] for u in admin.all_pages("/v1/admin/usage", key_id=globex_key)] == [
        "g1"
    ]
    paged = admin.all_pages("/v1/admin/usage", limit=1)
    assert [u["request_id"] for u in paged] == ["g1", "a2", "a1"]

    acme = harness.as_token(admin.create_tenant_token("acme"))
    assert [u["request_id"] for u in acme.all_pages("/v1/admin/usage")] == ["a2", "a1"]
    assert [u["request_id"] for u in acme.all_pages("/v1/admin/usage", key_id=acme_key)] == [
        "a2",
        "a1",
    ]
