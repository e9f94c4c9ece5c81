"""A tenant's bounds over its keys: the tenant's model allowlist (each key's in force is the key's
within the tenant's, narrowed at once on the data plane), a disabled tenant's tokens refused, and
a cap on the keys a tenant holds."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import update

from control.keys.models import ApiKey
from control.timeutil import utcnow
from tests.control.helpers import Harness, error_fields


def _models_seen(harness: Harness, key: str) -> list[str]:
    answer = httpx.get(f"{harness.data_url}/v1/models", headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200, answer.text
    return sorted(m["id"] for m in answer.json()["data"])


def _snapshot_models(harness: Harness) -> dict[str, Any]:
    with harness.ctx.sessions() as session:
        payload = json.loads(harness.ctx.mutator.snapshot(session).payload)
    return {k["id"]: k["models"] for k in payload["keys"]}


def test_the_tenant_allowlist_bounds_every_key(harness_factory: Any) -> None:
    harness: Harness = harness_factory(start_core=True)
    admin = harness.admin
    admin.create_provider(id="up1", base_url="http://127.0.0.1:9/v1")
    admin.create_pool(id="main", members=[{"provider_id": "up1"}])
    for alias in ("chat", "other", "third"):
        admin.create_route(alias=alias, chain=[{"pool": "main", "model": alias}])
    tenant = admin.create_tenant(id="acme", name="Acme", models=["chat", "other"])
    assert tenant["models"] == ["chat", "other"]

    outside = admin.post("/v1/admin/keys", {"tenant_id": "acme", "models": ["chat", "third"]})
    assert outside.status_code == 422 and "models" in error_fields(outside), outside.text
    everything = admin.create_key(tenant_id="acme")  # null: whatever the tenant allows
    token = harness.as_token(admin.create_tenant_token("acme"))
    narrow = token.create_key(tenant_id="acme", models=["other"])
    widened = token.patch(f"/v1/admin/keys/{narrow['id']}", {"models": ["other", "third"]})
    assert widened.status_code == 422 and "models" in error_fields(widened)

    assert _models_seen(harness, everything["key"]) == ["chat", "other"]
    assert _models_seen(harness, narrow["key"]) == ["other"]
    assert _snapshot_models(harness)[everything["id"]] == ["chat", "other"]

    # Narrowing the tenant narrows its keys at once.
    assert admin.patch("/v1/admin/tenants/acme", {"models": ["chat"]}).status_code == 200
    assert _models_seen(harness, everything["key"]) == ["chat"]
    assert _models_seen(harness, narrow["key"]) == []
    assert _snapshot_models(harness) == {everything["id"]: ["chat"], narrow["id"]: []}
    # A tenant token cannot change its tenant's allowlist.
    assert token.patch("/v1/admin/tenants/acme", {"models": None}).status_code == 403
    assert admin.patch("/v1/admin/tenants/acme", {"models": None}).status_code == 200
    assert _models_seen(harness, everything["key"]) == ["chat", "other", "third"]


def test_a_disabled_tenants_tokens_are_refused(harness: Harness, world: dict[str, Any]) -> None:
    admin = harness.admin
    token = harness.as_token(admin.create_tenant_token("acme"))
    assert token.get("/v1/admin/keys").status_code == 200
    admin.patch("/v1/admin/tenants/acme", {"status": "disabled"})
    for response in (
        token.get("/v1/admin/keys"),
        token.get("/v1/admin/tenants/acme"),
        token.post("/v1/admin/keys", {"tenant_id": "acme"}),
        token.patch(f"/v1/admin/keys/{world['acme_key']['id']}", {"status": "active"}),
    ):
        assert response.status_code == 403, response.text
        assert response.json()["error"]["code"] == "tenant_disabled"
    admin.patch("/v1/admin/tenants/acme", {"status": "active"})
    assert token.get("/v1/admin/keys").status_code == 200


def test_a_tenant_holds_at_most_max_keys(harness_factory: Any) -> None:
    harness: Harness = harness_factory(SLUICEGATE_ADMIN_DEFAULT_MAX_KEYS="3")
    admin = harness.admin
    assert admin.create_tenant(id="acme", name="Acme")["max_keys"] == 3
    token = harness.as_token(admin.create_tenant_token("acme"))
    keys = [token.create_key(tenant_id="acme")["id"] for _ in range(3)]
    over = token.post("/v1/admin/keys", {"tenant_id": "acme"})
    assert over.status_code == 409, over.text
    assert "max_keys" in over.json()["error"]["message"]
    assert admin.post("/v1/admin/keys", {"tenant_id": "acme"}).status_code == 409

    # Rotation with an overlap works at the cap: the old key ends with the overlap.
    rotated = token.post(f"/v1/admin/keys/{keys[0]}/rotate", {"overlap_seconds": 600})
    assert rotated.status_code == 200, rotated.text
    # ... but rotating again and again within overlaps is bounded (twice the cap in all).
    chain = rotated.json()["key"]["id"]
    for _ in range(2):
        step = token.post(f"/v1/admin/keys/{chain}/rotate", {"overlap_seconds": 600})
        assert step.status_code == 200, step.text
        chain = step.json()["key"]["id"]
    bounded = token.post(f"/v1/admin/keys/{chain}/rotate", {"overlap_seconds": 600})
    assert bounded.status_code == 409, bounded.text

    # Revoked and expired keys do not count.
    token.post(f"/v1/admin/keys/{keys[1]}/revoke")
    assert token.post("/v1/admin/keys", {"tenant_id": "acme"}).status_code == 201
    assert token.post("/v1/admin/keys", {"tenant_id": "acme"}).status_code == 409
    with harness.ctx.sessions() as session, session.begin():
        session.execute(update(ApiKey).where(ApiKey.id == keys[2]).values(expires_at=utcnow()))
    assert token.post("/v1/admin/keys", {"tenant_id": "acme"}).status_code == 201
    assert token.post("/v1/admin/keys", {"tenant_id": "acme"}).status_code == 409
    # The operator raises the cap of one tenant.
    raised = admin.patch("/v1/admin/tenants/acme", {"max_keys": 10})
    assert raised.status_code == 200 and raised.json()["max_keys"] == 10
    assert token.patch("/v1/admin/tenants/acme", {"max_keys": 10_000}).status_code == 403
    assert token.post("/v1/admin/keys", {"tenant_id": "acme"}).status_code == 201
