"""Tenants: create, read, list, update limits, disable (which disables every key)."""

from __future__ import annotations

from tests.control.helpers import Api, Harness, error_fields


def test_create_get_and_list(admin: Api) -> None:
    created = admin.create_tenant(id="acme", name="Acme", rpm=100, tpm=5000)
    assert created["status"] == "active"
    assert created["rpm"] == 100 and created["max_concurrency"] is None
    generated = admin.create_tenant(name="No id given")
    assert generated["id"].startswith("ten_")

    assert admin.get("/v1/admin/tenants/acme").json() == created
    listed = admin.all_pages("/v1/admin/tenants")
    assert [t["id"] for t in listed] == sorted(["acme", generated["id"]])


def test_duplicate_id_is_a_conflict(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    response = admin.post("/v1/admin/tenants", {"id": "acme", "name": "Again"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"


def test_validation_errors_name_each_field(admin: Api) -> None:
    response = admin.post(
        "/v1/admin/tenants",
        {"id": "bad id!", "name": "", "rpm": 0, "tpm": "many", "extra": 1},
    )
    assert response.status_code == 422
    fields = error_fields(response)
    assert set(fields) == {"id", "name", "rpm", "tpm", "extra"}
    assert response.json()["error"]["code"] == "validation_error"


def test_unknown_tenant_is_404(admin: Api) -> None:
    for response in (
        admin.get("/v1/admin/tenants/nobody"),
        admin.patch("/v1/admin/tenants/nobody", {"name": "x"}),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"


def test_update_limits_and_clear_with_null(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme", rpm=100)
    updated = admin.patch("/v1/admin/tenants/acme", {"rpm": None, "tpm": 900, "name": "ACME"})
    assert updated.status_code == 200, updated.text
    body = updated.json()
    assert (body["rpm"], body["tpm"], body["name"]) == (None, 900, "ACME")
    null_name = admin.patch("/v1/admin/tenants/acme", {"name": None})
    assert null_name.status_code == 422
    assert "name" in error_fields(null_name)


def test_lowering_a_limit_below_a_key_is_refused(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme", rpm=100)
    admin.create_key(tenant_id="acme", rpm=80)
    response = admin.patch("/v1/admin/tenants/acme", {"rpm": 50})
    assert response.status_code == 422
    assert "higher rpm" in error_fields(response)["rpm"]
    assert admin.get("/v1/admin/tenants/acme").json()["rpm"] == 100
    assert admin.patch("/v1/admin/tenants/acme", {"rpm": 80}).status_code == 200


def test_disabling_a_tenant_disables_its_keys(harness: Harness, admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme")
    response = admin.patch("/v1/admin/tenants/acme", {"status": "disabled"})
    assert response.status_code == 200 and response.json()["status"] == "disabled"
    assert admin.get(f"/v1/admin/keys/{key['id']}").json()["status"] == "disabled"
    disabled = admin.all_pages("/v1/admin/keys", status="disabled")
    assert [k["id"] for k in disabled] == [key["id"]]
    assert admin.all_pages("/v1/admin/keys", status="active") == []
    # New keys for a disabled tenant are refused.
    assert admin.post("/v1/admin/keys", {"tenant_id": "acme"}).status_code == 409
    # The snapshot the core runs says so: the tenant is disabled there too.
    snapshot = harness.ctx.mutator.snapshot(harness.ctx.sessions())
    assert '"id":"acme","status":"disabled"' in snapshot.payload

    audit = admin.get("/v1/admin/audit", resource_id="acme").json()["items"]
    assert audit[0]["action"] == "tenant.disable"

    assert admin.patch("/v1/admin/tenants/acme", {"status": "active"}).status_code == 200
    assert admin.get(f"/v1/admin/keys/{key['id']}").json()["status"] == "active"


def test_empty_update_changes_nothing(harness: Harness, admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    before = admin.get("/v1/admin/config/version").json()["committed_version"]
    assert admin.patch("/v1/admin/tenants/acme", {"name": "Acme"}).status_code == 200
    assert admin.patch("/v1/admin/tenants/acme", {}).status_code == 200
    assert admin.get("/v1/admin/config/version").json()["committed_version"] == before
