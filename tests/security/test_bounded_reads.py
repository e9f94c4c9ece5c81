"""Reads a tenant token can trigger stay bounded, and dead keys leave the data plane's snapshots:
latency percentiles over a range of at most `usage.latency_max_days`, computed without loading
the range's rows into Python; expired and rotated-out keys in no snapshot and no key change."""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from control.api.caller import SYSTEM
from control.bridge import snapshot
from control.timeutil import utcnow
from control.usage import service as usage
from tests.control.helpers import Harness, error_fields

DAY0 = datetime(2026, 3, 1, tzinfo=UTC)


def test_the_latency_range_is_bounded(harness: Harness, world: dict[str, Any]) -> None:
    tenant = harness.as_token(harness.admin.create_tenant_token("acme"))
    path = f"/v1/admin/keys/{world['acme_key']['id']}/usage/latency"
    start = DAY0.isoformat()
    month = tenant.get(path, **{"from": start, "to": (DAY0 + timedelta(days=31)).isoformat()})
    assert month.status_code == 200, month.text
    year = tenant.get(path, **{"from": start, "to": (DAY0 + timedelta(days=365)).isoformat()})
    assert year.status_code == 422 and "from" in error_fields(year), year.text
    assert "31 days" in year.json()["error"]["message"]
    open_ended = tenant.get(path, **{"from": "2020-01-01T00:00:00Z"})  # to: now
    assert open_ended.status_code == 422


def _fill_sqlite(database: Path, key_id: str, rows: int) -> None:
    """`rows` raw usage rows of one key over a day, generated inside SQLite."""
    engine = sa.create_engine(f"sqlite:///{database}")
    stamp = DAY0.replace(tzinfo=None)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            "INSERT INTO usage_records (request_id, seq, key_id, key_prefix, tenant_id, "
            "endpoint, model, priority, stream, status, outcome, prompt_tokens, "
            "completion_tokens, cached_tokens, usage_source, cost_micros, queue_wait_ms, "
            "ttft_ms, tpot_ms, duration_ms, started_at, attempts, fallback, recorded_at) "
            "SELECT printf('r%08d', i), i, ?, 'sk-sg-abcdef', 'acme', 'chat_completions', "
            "'chat', 'interactive', 1, 200, 'complete', 1, 1, 0, 'upstream', 0, 0.0, "
            "(i * 7919) % 100000, CASE WHEN i % 10 = 0 THEN NULL ELSE (i % 1000) / 10.0 END, "
            "1.0, datetime(?, printf('+%d seconds', i % 86400)) || '.000000', 1, 0, ? FROM n",
            (rows - 1, key_id, stamp.isoformat(sep=" "), stamp.isoformat(sep=" ")),
        )
    engine.dispose()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_percentiles_do_not_load_the_rows(
    harness: Harness, world: dict[str, Any], tmp_path: Path
) -> None:
    key_id = world["acme_key"]["id"]
    rows = 100_000
    _fill_sqlite(tmp_path / "control.db", key_id, rows)
    with harness.ctx.sessions() as session:
        tracemalloc.start()
        try:
            result = usage.latency(
                session, SYSTEM, key_id, DAY0, DAY0 + timedelta(days=1), max_days=31
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    # Exact nearest-rank figures: ttft is a permutation of 0..99999 (7919 is prime to 10^5).
    assert result.ttft_ms.count == rows
    assert (result.ttft_ms.p50, result.ttft_ms.p95, result.ttft_ms.p99) == (49999, 94999, 98999)
    assert result.tpot_ms.count == rows - rows // 10
    assert peak < 1 << 20, f"{peak} bytes of Python objects for {rows} rows"


def _payload_keys(harness: Harness) -> set[str]:
    with harness.ctx.sessions() as session:
        payload = json.loads(harness.ctx.mutator.snapshot(session).payload)
    return {k["id"] for k in payload["keys"]}


def test_dead_keys_leave_the_snapshots(
    harness: Harness, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = harness.admin
    live = world["acme_key"]["id"]
    soon = (utcnow() + timedelta(minutes=10)).isoformat()
    expiring = admin.create_key(tenant_id="acme", expires_at=soon)["id"]
    rotated = admin.create_key(tenant_id="acme")["id"]
    successor = admin.post(f"/v1/admin/keys/{rotated}/rotate", {"overlap_seconds": 600})
    new_id = successor.json()["key"]["id"]
    assert {live, expiring, rotated, new_id} <= _payload_keys(harness)

    # An hour later: the expiry has passed, and so has the end of the rotation's overlap.
    later = utcnow() + timedelta(hours=1)
    monkeypatch.setattr(snapshot, "utcnow", lambda: later)
    keys = _payload_keys(harness)
    assert expiring not in keys and rotated not in keys
    assert {live, new_id, world["globex_key"]["id"]} <= keys

    # The core's own copy drops them with the next change, even a change of keys only.
    pushed: list[dict[str, Any]] = []
    bridge = harness.ctx.bridge
    apply_keys = bridge.apply_keys

    def spy(version: int, payload: str) -> None:
        pushed.append(json.loads(payload))
        apply_keys(version, payload)

    monkeypatch.setattr(bridge, "apply_keys", spy)
    admin.patch(f"/v1/admin/keys/{live}", {"name": "renamed"})
    admin.patch(f"/v1/admin/keys/{live}", {"name": "renamed again"})
    assert len(pushed) == 2
    assert {expiring, rotated} <= set(pushed[0]["remove"])
    assert [k["id"] for k in pushed[0]["upsert"]] == [live]
    # Once removed, they are not sent again.
    assert pushed[1]["remove"] == []
