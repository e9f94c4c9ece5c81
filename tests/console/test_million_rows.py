"""A key with a million usage rows: its page reads rollups only (no statement touches the raw
rows while it is built), shows the million exactly, and is timed (printed, not asserted: speed
is a benchmark's business). The latency fragment, which reads raw rows, is timed beside it."""

from __future__ import annotations

import sys
import time
from typing import Any

from sqlalchemy import event

from control.usage.writer import write_events
from tests.console.conftest import Browser
from tests.control.helpers import Harness
from tests.control.usage_events import event as usage_event

ROWS = 1_000_000
BATCH = 50_000


def _fill(harness: Harness, key: dict[str, Any]) -> None:
    """A million rows over the last 24 hours, three models, written as the drainer writes them."""
    now = time.time()
    base = usage_event("x", tenant_id=key["tenant_id"], key_id=key["id"])
    models = ("chat", "chat-large", "embed")
    for start in range(0, ROWS, BATCH):
        batch = []
        for i in range(start, min(start + BATCH, ROWS)):
            row = dict(base)
            row["request_id"] = f"m{i}"
            row["seq"] = i + 1
            row["model"] = models[i % 3]
            row["completion_tokens"] = i % 50
            row["ttft_ms"] = 50.0 + i % 200
            row["started_at"] = now - 86_000 * (i / ROWS) - 30
            batch.append(row)
        with harness.ctx.sessions() as session, session.begin():
            assert write_events(session, batch) == len(batch)


def test_a_key_with_a_million_rows(harness: Harness, browser: Browser) -> None:
    harness.admin.create_tenant(id="acme", name="Acme")
    key = harness.admin.create_key(tenant_id="acme", name="busy")
    began = time.perf_counter()
    _fill(harness, key)
    filled = time.perf_counter() - began
    browser.sign_in()

    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    engine = harness.ctx.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        started = time.perf_counter()
        page = browser.get(f"/console/keys/{key['id']}")
        page_seconds = time.perf_counter() - started
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert page.status_code == 200
    assert 'data-field="requests" data-value="1000000"' in page.text
    assert 'data-model="total"><th scope="row">Total</th><td data-value="1000000"' in page.text
    raw = [s for s in statements if "usage_records" in s]
    assert raw == [], raw
    assert any("usage_rollups" in s for s in statements)

    started = time.perf_counter()
    latency = browser.get(f"/console/keys/{key['id']}/latency")
    latency_seconds = time.perf_counter() - started
    assert latency.status_code == 200 and "1,000,000" in latency.text
    sys.stdout.write(
        f"\n[console] {ROWS:,} rows written in {filled:.1f} s; key page "
        f"{page_seconds * 1000:.0f} ms (rollups); latency fragment "
        f"{latency_seconds * 1000:.0f} ms (raw rows)\n"
    )
