"""Cost attribution in the usage views: rows stored with the tags and end user the core sent
(tags as the text of a JSON object), listed and exported filtered by a tag or an end user,
and totalled per tag value, end user, model or key; tenant tokens see their own tenant only."""

from __future__ import annotations

import csv
import io
import json
import time
from typing import Any

from tests.control.helpers import Harness, error_fields
from tests.control.usage_events import FakeCore, event


def _tags(**tags: str) -> str:
    return json.dumps(dict(sorted(tags.items())), separators=(",", ":"))


def _drained(harness: Harness, world: dict[str, Any]) -> tuple[str, str]:
    acme, globex = world["acme_key"]["id"], world["globex_key"]["id"]
    now = time.time()
    core = FakeCore(
        [
            event(
                "s1",
                "acme",
                acme,
                tags=_tags(team="search", feature="ac"),
                cost_micros=10,
                end_user="u1",
                started_at=now - 5,
            ),
            event(
                "s2",
                "acme",
                acme,
                tags=_tags(team="search"),
                cost_micros=5,
                status=500,
                end_user="u2",
                started_at=now - 4,
            ),
            event("a1", "acme", acme, tags=_tags(team="ads"), cost_micros=30, started_at=now - 3),
            event("n1", "acme", acme, cost_micros=1, started_at=now - 2),
            event(
                "g1",
                "globex",
                globex,
                tags=_tags(team="search"),
                cost_micros=100,
                end_user="u1",
                started_at=now - 1,
            ),
        ]
    )
    assert core.drainer(harness).drain()
    return acme, globex


def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["request_id"] for r in rows]


def test_rows_are_listed_and_exported_by_tag_and_end_user(
    harness: Harness, world: dict[str, Any]
) -> None:
    acme, _ = _drained(harness, world)
    admin = harness.admin
    search = admin.all_pages("/v1/admin/usage", tag="team=search")
    assert _ids(search) == ["g1", "s2", "s1"]
    assert search[-1]["tags"] == {"feature": "ac", "team": "search"}
    assert _ids(admin.all_pages("/v1/admin/usage", tag="feature=ac")) == ["s1"]
    assert _ids(admin.all_pages("/v1/admin/usage", end_user="u1")) == ["g1", "s1"]
    assert _ids(admin.all_pages("/v1/admin/usage", tag="team=search", tenant_id="acme")) == [
        "s2",
        "s1",
    ]
    bad = admin.get("/v1/admin/usage", tag="team")
    assert bad.status_code == 422 and set(error_fields(bad)) == {"tag"}

    export = admin.get(f"/v1/admin/keys/{acme}/usage/export", tag="team=search")
    assert export.status_code == 200
    rows = list(csv.DictReader(io.StringIO(export.text)))
    assert [r["request_id"] for r in rows] == ["s1", "s2"]
    assert json.loads(rows[0]["tags"]) == {"feature": "ac", "team": "search"}
    assert rows[0]["end_user"] == "u1"


def test_totals_per_tag_value_end_user_model_and_key(
    harness: Harness, world: dict[str, Any]
) -> None:
    acme, globex = _drained(harness, world)
    admin = harness.admin
    teams = admin.get("/v1/admin/usage/groups", by="tag:team").json()
    totals = {g["value"]: (g["requests"], g["cost_micros"], g["errors"]) for g in teams["groups"]}
    assert totals == {"search": (3, 115, 1), "ads": (1, 30, 0), None: (1, 1, 0)}
    assert [g["value"] for g in teams["groups"]] == ["search", "ads", None], "costliest first"
    assert teams["truncated"] is False

    users = admin.get("/v1/admin/usage/groups", by="end_user", tag="team=search").json()
    assert {g["value"]: g["requests"] for g in users["groups"]} == {"u1": 2, "u2": 1}
    keys = admin.get("/v1/admin/usage/groups", by="key_id").json()
    assert {g["value"]: g["cost_micros"] for g in keys["groups"]} == {globex: 100, acme: 46}
    first = admin.get("/v1/admin/usage/groups", by="tag:team", limit=1).json()
    assert [g["value"] for g in first["groups"]] == ["search"] and first["truncated"] is True

    for bad in ({"by": "tag:Team"}, {"by": "status"}, {"by": "model", "tag": "x"}):
        refused = admin.get("/v1/admin/usage/groups", **bad)
        assert refused.status_code == 422, bad
    # The range sets how much a call reads: at most usage.latency_max_days.
    wide = admin.get("/v1/admin/usage/groups", by="model", **{"from": "2020-01-01T00:00:00Z"})
    assert wide.status_code == 422 and set(error_fields(wide)) == {"from"}

    tenant = harness.as_token(admin.create_tenant_token("acme"))
    own = tenant.get("/v1/admin/usage/groups", by="tag:team").json()
    assert {g["value"]: g["requests"] for g in own["groups"]} == {"search": 2, "ads": 1, None: 1}
    assert tenant.get("/v1/admin/usage/groups", by="model", tenant_id="globex").status_code == 404
    assert tenant.get("/v1/admin/usage/groups", by="model", key_id=globex).status_code == 404
