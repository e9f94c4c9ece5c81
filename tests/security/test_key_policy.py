"""What the operator sets on a key (disabled, model allowlist, priority, limits, quota) a
tenant-scoped token can only tighten afterwards: every loosening is 403 `admin_locked` naming
the field, the lock is in the key's output and survives rotation."""

from __future__ import annotations

from typing import Any

import pytest

from tests.control.helpers import Api, Harness, error_fields


@pytest.fixture
def locked(harness: Harness, world: dict[str, Any]) -> dict[str, Any]:
    admin = harness.admin
    admin.create_route(alias="other", chain=[{"pool": "main", "model": "sim-other"}])
    key = admin.create_key(tenant_id="acme", name="locked")
    return {"key": key["id"], "tenant": harness.as_token(admin.create_tenant_token("acme"))}


def _refused(response: Any, field: str) -> None:
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "admin_locked"
    assert field in error_fields(response), response.text


def test_an_operator_disabled_key_stays_disabled(harness: Harness, locked: dict[str, Any]) -> None:
    admin, tenant, path = harness.admin, locked["tenant"], f"/v1/admin/keys/{locked['key']}"
    assert admin.patch(path, {"status": "disabled"}).json()["admin_policy"]["status"] == "disabled"
    _refused(tenant.patch(path, {"status": "active"}), "status")
    assert tenant.patch(path, {"name": "renamed"}).status_code == 200  # not a loosening
    assert tenant.get(path).json()["status"] == "disabled"
    # The operator's own re-enable lifts the lock; the tenant may then switch it freely.
    assert admin.patch(path, {"status": "active"}).json()["admin_policy"]["status"] is None
    assert tenant.patch(path, {"status": "disabled"}).status_code == 200
    assert tenant.patch(path, {"status": "active"}).json()["status"] == "active"


def test_models_priority_and_limits_only_tighten(harness: Harness, locked: dict[str, Any]) -> None:
    admin, tenant, path = harness.admin, locked["tenant"], f"/v1/admin/keys/{locked['key']}"
    body = {"models": ["chat", "other"], "priority": "batch", "rpm": 100, "max_concurrency": 4}
    policy = admin.patch(path, body).json()["admin_policy"]
    assert policy["models"] == ["chat", "other"] and policy["priority"] == "batch"
    assert (policy["rpm"], policy["rpm_burst"], policy["max_concurrency"]) == (100, 100, 4)

    _refused(tenant.patch(path, {"models": None}), "models")
    _refused(tenant.patch(path, {"models": ["chat", "gpt-5"]}), "models")
    _refused(tenant.patch(path, {"priority": "interactive"}), "priority")
    _refused(tenant.patch(path, {"rpm": None}), "rpm")
    _refused(tenant.patch(path, {"rpm": 101}), "rpm")
    _refused(tenant.patch(path, {"rpm_burst": 500}), "rpm_burst")
    _refused(tenant.patch(path, {"max_concurrency": 5}), "max_concurrency")
    _refused(tenant.patch(path, {"max_concurrency": None}), "max_concurrency")

    tightened = tenant.patch(path, {"models": ["chat"], "rpm": 50, "max_concurrency": 2})
    assert tightened.status_code == 200, tightened.text
    # The operator's bound stays: the tenant may go back up to it, never past it.
    assert tenant.patch(path, {"models": ["chat", "other"], "rpm": 100}).status_code == 200
    _refused(tenant.patch(path, {"rpm": 100, "rpm_burst": 101}), "rpm_burst")
    # Unlocked limits are the tenant's to set (within the tenant's own limits).
    assert tenant.patch(path, {"tpm": 1000}).status_code == 200
    assert tenant.patch(path, {"tpm": None}).status_code == 200


def test_an_operator_quota_cannot_be_removed_raised_or_reset(
    harness: Harness, locked: dict[str, Any]
) -> None:
    admin, tenant, path = harness.admin, locked["tenant"], f"/v1/admin/keys/{locked['key']}"
    quota = {"period": "daily", "tokens": 1000}
    assert admin.patch(path, {"quota": quota}).json()["admin_policy"]["quota"]["tokens"] == 1000
    _refused(tenant.patch(path, {"quota": None}), "quota")
    _refused(tenant.patch(path, {"quota": {"period": "daily", "tokens": 1001}}), "quota.tokens")
    _refused(tenant.patch(path, {"quota": {"period": "none", "tokens": 10}}), "quota.period")
    _refused(tenant.post(f"{path}/quota/reset"), "quota")
    lower = {"period": "daily", "tokens": 500, "cost_micros": 10}
    assert tenant.patch(path, {"quota": lower}).status_code == 200
    # The operator can reset and remove it.
    assert admin.post(f"{path}/quota/reset").status_code == 200
    assert admin.patch(path, {"quota": None}).json()["admin_policy"]["quota"] is None
    assert tenant.patch(path, {"quota": {"period": "daily", "tokens": 5000}}).status_code == 200


def test_keys_the_operator_creates_are_locked_as_created(harness: Harness, world: Any) -> None:
    admin = harness.admin
    tenant = harness.as_token(admin.create_tenant_token("acme"))
    key = admin.create_key(tenant_id="acme", models=["chat"], rpm=10, priority="batch")
    assert key["admin_policy"]["models"] == ["chat"] and key["admin_policy"]["rpm"] == 10
    _refused(tenant.patch(f"/v1/admin/keys/{key['id']}", {"models": None}), "models")
    # A key the tenant made itself carries no lock.
    own = tenant.create_key(tenant_id="acme", models=["chat"], rpm=10)
    assert all(v is None for v in own["admin_policy"].values())
    assert tenant.patch(f"/v1/admin/keys/{own['id']}", {"models": None}).status_code == 200


def test_rotation_carries_the_lock(harness: Harness, locked: dict[str, Any]) -> None:
    admin, tenant = harness.admin, locked["tenant"]
    path = f"/v1/admin/keys/{locked['key']}"
    admin.patch(path, {"status": "disabled", "rpm": 10, "models": ["chat"]})
    rotated = tenant.post(f"{path}/rotate", {"overlap_seconds": 60})
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["key"]
    assert new["status"] == "disabled"
    assert new["admin_policy"] == admin.get(path).json()["admin_policy"]
    new_path = f"/v1/admin/keys/{new['id']}"
    _refused(tenant.patch(new_path, {"status": "active"}), "status")
    _refused(tenant.patch(new_path, {"rpm": 11}), "rpm")


def test_the_lock_holds_on_the_data_plane(harness_factory: Any) -> None:
    """A key the operator disabled stays refused by the gateway whatever the tenant sends."""
    harness: Harness = harness_factory(start_core=True)
    admin = harness.admin
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme")
    tenant: Api = harness.as_token(admin.create_tenant_token("acme"))
    admin.patch(f"/v1/admin/keys/{key['id']}", {"status": "disabled"})
    tenant.patch(f"/v1/admin/keys/{key['id']}", {"status": "active"})
    import httpx

    models = httpx.get(
        f"{harness.data_url}/v1/models", headers={"Authorization": f"Bearer {key['key']}"}
    )
    assert models.status_code == 401
