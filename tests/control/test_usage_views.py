"""A key's usage views over the admin API: time series per minute, hour and day from the
rollups, totals per model, TTFT/TPOT percentiles (nearest rank, the same on both databases), the
CSV export; tenant tokens see their own keys only; errors in the API's format."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Any

from tests.control.helpers import Api, Harness, error_fields
from tests.control.usage_events import FakeCore, event

# 2026-03-04T10:00:00Z, a whole hour.
HOUR0 = 1772618400


def iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat()


def unix(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


def _feed(harness: Harness, key_id: str, other_key: str) -> None:
    events = [
        # Minute 0 of hour 0: two requests of `chat`, one of `other`.
        event("a", key_id=key_id, seq=1, started_at=HOUR0 + 5, ttft_ms=10.0, tpot_ms=1.0),
        event("b", key_id=key_id, seq=2, started_at=HOUR0 + 50, ttft_ms=20.0, tpot_ms=2.0),
        event(
            "c",
            key_id=key_id,
            seq=3,
            started_at=HOUR0 + 30,
            model="other",
            ttft_ms=30.0,
            tpot_ms=None,
            cost_micros=100,
            status=502,
            outcome="upstream_error",
        ),
        # Minute 2 of hour 0, then hour 1.
        event("d", key_id=key_id, seq=4, started_at=HOUR0 + 150, ttft_ms=40.0, tpot_ms=4.0),
        event("e", key_id=key_id, seq=5, started_at=HOUR0 + 3700, ttft_ms=None, tpot_ms=None),
        # Another tenant's key: never in this key's views.
        event("g", "globex", other_key, seq=6, started_at=HOUR0 + 10, ttft_ms=999.0),
    ]
    assert FakeCore(events).drainer(harness).drain()


def _get(api: Api, key_id: str, view: str, **params: Any) -> Any:
    response = api.get(f"/v1/admin/keys/{key_id}/usage/{view}", **params)
    assert response.status_code == 200, response.text
    return response.json()


def test_series_totals_and_latency_of_a_key(harness: Harness, world: dict[str, Any]) -> None:
    key, other = world["acme_key"]["id"], world["globex_key"]["id"]
    _feed(harness, key, other)
    admin = harness.admin
    window = {"from": iso(HOUR0), "to": iso(HOUR0 + 7200)}

    minutes = _get(admin, key, "series", granularity="minute", **window)
    assert [(unix(b["start"]), b["requests"], b["errors"]) for b in minutes["buckets"]] == [
        (HOUR0, 3, 1),
        (HOUR0 + 120, 1, 0),
        (HOUR0 + 3660, 1, 0),
    ]
    hours = _get(admin, key, "series", granularity="hour", **window)
    assert [(b["requests"], b["cost_micros"]) for b in hours["buckets"]] == [(4, 121), (1, 7)]
    days = _get(admin, key, "series", granularity="day", **window)
    assert unix(days["start"]) == HOUR0 - 10 * 3600  # aligned to whole days
    assert [b["requests"] for b in days["buckets"]] == [5]
    only_other = _get(admin, key, "series", granularity="hour", model="other", **window)
    assert [b["requests"] for b in only_other["buckets"]] == [1]

    # Totals per model over a range with ragged edges: minutes, hours and days combined.
    models = _get(admin, key, "models", **{"from": iso(HOUR0 + 60), "to": iso(HOUR0 + 7200)})
    assert [(m["model"], m["requests"]) for m in models["models"]] == [("chat", 2)]
    models = _get(admin, key, "models", **{"from": iso(HOUR0 - 86400), "to": iso(HOUR0 + 7200)})
    by_model = {m["model"]: m for m in models["models"]}
    assert by_model["chat"]["requests"] == 4 and by_model["other"]["requests"] == 1
    assert by_model["chat"]["prompt_tokens"] == 4 * 12
    assert models["total"]["requests"] == 5 and models["total"]["errors"] == 1

    latency = _get(admin, key, "latency", **window)
    assert latency["ttft_ms"] == {"count": 4, "p50": 20.0, "p95": 40.0, "p99": 40.0}
    assert latency["tpot_ms"] == {"count": 3, "p50": 2.0, "p95": 4.0, "p99": 4.0}


def test_csv_export_of_a_key(harness: Harness, world: dict[str, Any]) -> None:
    key, other = world["acme_key"]["id"], world["globex_key"]["id"]
    _feed(harness, key, other)
    response = harness.admin.get(
        f"/v1/admin/keys/{key}/usage/export", **{"from": iso(HOUR0), "to": iso(HOUR0 + 7200)}
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert "attachment" in response.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert [r["request_id"] for r in rows] == ["a", "c", "b", "d", "e"]  # in start order
    assert rows[1]["outcome"] == "upstream_error" and rows[1]["cost_micros"] == "100"
    assert rows[4]["ttft_ms"] == ""


def test_tenants_see_their_own_keys_only_and_errors_are_api_errors(
    harness: Harness, world: dict[str, Any]
) -> None:
    key, other = world["acme_key"]["id"], world["globex_key"]["id"]
    _feed(harness, key, other)
    acme = harness.as_token(harness.admin.create_tenant_token("acme"))
    window = {"from": iso(HOUR0), "to": iso(HOUR0 + 7200)}
    assert _get(acme, key, "models", **window)["total"]["requests"] == 5
    for view in ("series", "models", "latency", "export"):
        response = acme.get(f"/v1/admin/keys/{other}/usage/{view}", **window)
        assert response.status_code == 404, view
        assert response.json()["error"]["code"] == "not_found"

    backwards = harness.admin.get(
        f"/v1/admin/keys/{key}/usage/series", **{"from": iso(HOUR0 + 60), "to": iso(HOUR0)}
    )
    assert backwards.status_code == 422 and "from" in error_fields(backwards)
    too_many = harness.admin.get(
        f"/v1/admin/keys/{key}/usage/series",
        granularity="minute",
        **{"from": iso(HOUR0 - 30 * 86400), "to": iso(HOUR0)},
    )
    assert too_many.status_code == 422
    assert "at most 10000 buckets" in error_fields(too_many)["from"]
    bad = harness.admin.get(f"/v1/admin/keys/{key}/usage/series", granularity="second")
    assert bad.status_code == 422 and "granularity" in error_fields(bad)
