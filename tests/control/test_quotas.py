"""Quotas over the admin API: set with tenants and keys (tokens and/or money, periods none, daily,
monthly in UTC), checked against the tenant's, pushed in the snapshot with the ledger's use,
reported and reset; and end to end through the real data plane: 50 concurrent requests against
a quota for one, and against a daily token quota, never spend more than the quota."""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import sqlalchemy as sa

from control.keys.models import ApiKey
from control.quotas import ledger
from control.quotas.periods import period_start
from control.usage.models import UsageRecord
from tests.control.helpers import UPSTREAM_CREDENTIAL, Harness, error_fields
from tests.control.usage_events import FakeCore, event
from tests.support.procs import Proc


def _snapshot(harness: Harness) -> dict[str, Any]:
    with harness.ctx.sessions() as session:
        payload: dict[str, Any] = json.loads(harness.ctx.mutator.snapshot(session).payload)
    return payload


def test_quotas_are_set_checked_against_the_tenant_and_pushed(harness: Harness) -> None:
    admin = harness.admin
    tenant = admin.create_tenant(
        id="acme", name="Acme", quota={"period": "monthly", "tokens": 1000, "cost_micros": 5000}
    )
    assert tenant["quota"] == {
        "period": "monthly",
        "tokens": 1000,
        "cost_micros": 5000,
        "reset_at": None,
    }
    above = admin.post(
        "/v1/admin/keys",
        {"tenant_id": "acme", "name": "k", "quota": {"period": "monthly", "tokens": 2000}},
    )
    assert above.status_code == 422
    assert "exceeds the tenant's monthly quota (1000)" in error_fields(above)["quota.tokens"]
    empty = admin.post("/v1/admin/keys", {"tenant_id": "acme", "name": "k", "quota": {}})
    assert empty.status_code == 422
    # A quota is sent whole: an allowance without its period is refused, never defaulted.
    no_period = admin.post("/v1/admin/keys", {"tenant_id": "acme", "quota": {"tokens": 5}})
    assert no_period.status_code == 422 and "quota.period" in error_fields(no_period)
    # Another period is not compared (the tenant's bounds the key's use anyway).
    key = admin.create_key(tenant_id="acme", name="k", quota={"period": "daily", "tokens": 5000})
    assert key["quota"]["period"] == "daily"

    now = int(time.time())
    payload = _snapshot(harness)
    (pushed_key,) = payload["keys"]
    assert pushed_key["quota"]["tokens"] == 5000 and pushed_key["quota"]["cost_micros"] is None
    assert pushed_key["quota"]["period_start"] >= period_start("daily", now)
    assert (pushed_key["quota"]["used_tokens"], pushed_key["quota"]["used_cost_micros"]) == (0, 0)
    assert payload["tenants"][0]["quota"]["period"] == "monthly"

    # The key's quota moves to the tenant's period: now compared, and refused.
    moved = admin.patch(
        f"/v1/admin/keys/{key['id']}", {"quota": {"period": "monthly", "tokens": 1500}}
    )
    assert moved.status_code == 422 and "quota.tokens" in error_fields(moved)
    fits = admin.patch(
        f"/v1/admin/keys/{key['id']}", {"quota": {"period": "monthly", "tokens": 800}}
    )
    assert fits.status_code == 200 and fits.json()["quota"]["tokens"] == 800
    # The tenant's may not drop below a key's of the same period.
    lower = admin.patch("/v1/admin/tenants/acme", {"quota": {"period": "monthly", "tokens": 500}})
    assert lower.status_code == 422 and "quota.tokens" in error_fields(lower)
    gone = admin.patch(f"/v1/admin/keys/{key['id']}", {"quota": None})
    assert gone.status_code == 200 and gone.json()["quota"] is None
    assert _snapshot(harness)["keys"][0]["quota"] is None
    assert admin.get(f"/v1/admin/keys/{key['id']}/quota").status_code == 404


def test_quota_status_reads_the_ledger_and_a_reset_starts_again(harness: Harness) -> None:
    admin = harness.admin
    admin.create_tenant(id="acme", name="Acme")
    admin.create_tenant(id="globex", name="Globex", quota={"period": "daily", "tokens": 10})
    key = admin.create_key(tenant_id="acme", name="k", quota={"period": "none", "tokens": 100})
    other = admin.create_key(tenant_id="globex", name="g")
    now = time.time()
    FakeCore(
        [
            event("r1", key_id=key["id"], seq=1, started_at=now),  # 12 + 34 tokens, 7 micros
            event("r2", key_id=key["id"], seq=2, started_at=now),
            event("old", key_id=key["id"], seq=3, started_at=now - 86400),  # before the quota
        ]
    ).drainer(harness).drain()

    status = admin.get(f"/v1/admin/keys/{key['id']}/quota").json()
    assert (status["used_tokens"], status["used_cost_micros"]) == (92, 14)
    assert status["remaining_tokens"] == 8 and status["period_end"] is None
    (pushed,) = _snapshot(harness)["keys"][:1]
    assert pushed["quota"]["used_tokens"] == 92

    acme = harness.as_token(admin.create_tenant_token("acme"))
    assert acme.get(f"/v1/admin/keys/{key['id']}/quota").json()["used_tokens"] == 92
    assert acme.get(f"/v1/admin/keys/{other['id']}/quota").status_code == 404
    assert acme.get("/v1/admin/tenants/globex/quota").status_code == 404

    # A reset counts from its second on: one later than the requests'.
    time.sleep(max(0.0, int(now) + 1 - time.time()))
    reset = admin.post(f"/v1/admin/keys/{key['id']}/quota/reset")
    assert reset.status_code == 200, reset.text
    assert reset.json()["used_tokens"] == 0 and reset.json()["reset_at"] is not None
    pushed_quota = next(k for k in _snapshot(harness)["keys"] if k["id"] == key["id"])["quota"]
    assert pushed_quota["period_start"] >= int(now) and pushed_quota["used_tokens"] == 0
    audit = admin.all_pages("/v1/admin/audit", action="key.quota_reset")
    assert len(audit) == 1 and audit[0]["config_version"] is not None

    tenant = admin.get("/v1/admin/tenants/globex/quota").json()
    assert tenant["used_tokens"] == 0 and tenant["period_end"] is not None
    assert acme.post("/v1/admin/tenants/acme/quota/reset").status_code in (403, 409)
    no_quota = admin.post("/v1/admin/tenants/acme/quota/reset")
    assert no_quota.status_code == 409 and no_quota.json()["error"]["code"] == "conflict"


# --- through the data plane --------------------------------------------------------------------

CHAT = "/v1/chat/completions"
# 10 prompt tokens (40 characters) + max_tokens 10: every request reserves 20 tokens.
BODY = {"model": "chat", "max_tokens": 10, "messages": [{"role": "user", "content": "x" * 40}]}


def _data_plane(harness_factory: Callable[..., Harness], sim: Proc) -> Harness:
    harness = harness_factory(start_core=True)
    admin = harness.admin
    admin.create_provider(
        id="sim", base_url=f"http://{sim.address}/v1", credential=UPSTREAM_CREDENTIAL
    )
    admin.create_pool(id="sims", members=[{"provider_id": "sim"}])
    admin.create_route(alias="chat", chain=[{"pool": "sims", "model": "sim-llama"}])
    # 2 micros per prompt token, 3 per completion token: a request reserves 10*2 + 10*3 = 50.
    price = {"model": "chat", "input_micros_per_mtok": 2_000_000}
    price |= {"output_micros_per_mtok": 3_000_000, "currency": "USD"}
    assert admin.post("/v1/admin/prices", price).status_code == 201
    admin.create_tenant(id="acme", name="Acme")
    return harness


def _fifty(harness: Harness, secret: str) -> list[httpx.Response]:
    headers = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(timeout=30) as client, concurrent.futures.ThreadPoolExecutor(50) as pool:
        return list(
            pool.map(
                lambda _: client.post(harness.data_url + CHAT, json=BODY, headers=headers),
                range(50),
            )
        )


def _ledger(harness: Harness, key_id: str, expect: int) -> tuple[int, int, int]:
    """(rows, tokens, cost) of the key in SQL, once the drainer has written `expect` rows."""
    deadline = time.monotonic() + 15
    while True:
        with harness.ctx.sessions() as session:
            r = UsageRecord
            rows, tokens, cost = session.execute(
                sa.select(
                    sa.func.count(),
                    sa.func.coalesce(sa.func.sum(r.prompt_tokens + r.completion_tokens), 0),
                    sa.func.coalesce(sa.func.sum(r.cost_micros), 0),
                ).where(r.key_id == key_id)
            ).one()
        if rows >= expect or time.monotonic() > deadline:
            return int(rows), int(tokens), int(cost)
        time.sleep(0.05)


def test_fifty_concurrent_requests_against_a_money_quota_for_one(
    harness_factory: Callable[..., Harness], sim_factory: Callable[..., Proc]
) -> None:
    sim = sim_factory("--api-key", UPSTREAM_CREDENTIAL, "--ttft-ms", "300", "--itl-ms", "1")
    harness = _data_plane(harness_factory, sim)
    key = harness.admin.create_key(
        tenant_id="acme", name="one", quota={"period": "monthly", "cost_micros": 50}
    )
    responses = _fifty(harness, key["key"])
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] + [429] * 49
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.json()["error"]["code"] == "insufficient_quota"
    assert refused.headers["x-should-retry"] == "false"
    rows, _, cost = _ledger(harness, key["id"], 1)
    assert rows == 1 and 0 < cost <= 50  # refused requests are never billed
    status = harness.admin.get(f"/v1/admin/keys/{key['id']}/quota").json()
    assert status["used_cost_micros"] == cost <= status["cost_micros"]


def test_fifty_concurrent_requests_against_a_daily_token_quota(
    harness_factory: Callable[..., Harness], sim_factory: Callable[..., Proc]
) -> None:
    sim = sim_factory("--api-key", UPSTREAM_CREDENTIAL, "--ttft-ms", "300", "--itl-ms", "1")
    harness = _data_plane(harness_factory, sim)
    # Room for five reservations of 20 tokens. The bound: spend never exceeds the quota, since a
    # request reserves its prompt estimate plus max_tokens and settles to at most that.
    key = harness.admin.create_key(
        tenant_id="acme", name="five", quota={"period": "daily", "tokens": 100}
    )
    responses = _fifty(harness, key["key"])
    admitted = sum(r.status_code == 200 for r in responses)
    assert 1 <= admitted <= 5
    assert all(r.status_code in (200, 429) for r in responses)
    rows, tokens, _ = _ledger(harness, key["id"], admitted)
    assert rows == admitted and tokens <= 100
    assert harness.admin.get(f"/v1/admin/keys/{key['id']}/quota").json()["used_tokens"] == tokens


def test_the_ledger_counts_from_the_second_the_quota_started(harness: Harness) -> None:
    """Raw rows for the seconds before the first whole minute, then minutes, hours and days."""
    admin = harness.admin
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme", name="k", quota={"period": "none", "tokens": 10**9})
    since = 1772618400 + 30  # 2026-03-04T10:00:30Z
    with harness.ctx.sessions() as session, session.begin():
        session.get_one(ApiKey, key["id"]).quota_since = since
    offsets = [-20, -1, 0, 29, 30, 95, 3700, 90000]  # seconds from `since`
    events = [
        event(f"r{i}", key_id=key["id"], seq=i + 1, started_at=since + o, prompt_tokens=10**i)
        for i, o in enumerate(offsets)
    ]
    assert FakeCore(events).drainer(harness).drain()
    counted = sum(10**i + 34 for i, o in enumerate(offsets) if o >= 0)
    with harness.ctx.sessions() as session:
        used = ledger.used(session.connection(), "key", since + 2 * 86400, [key["id"]])
    assert used == {key["id"]: (counted, 7 * 6)}
