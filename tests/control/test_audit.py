"""Every mutation leaves one audit row: who, what, which object, a summary without secrets, and
the config version it produced."""

from __future__ import annotations

from tests.control.helpers import Api, Harness


def test_every_mutation_is_audited(harness: Harness, admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    admin.patch("/v1/admin/tenants/acme", {"rpm": 100})
    admin.create_provider(
        id="up", base_url="http://127.0.0.1:9001/v1", credential="sk-abcdefgh1234"
    )
    admin.patch("/v1/admin/providers/up", {"name": "Upstream"})
    admin.create_pool(id="p", members=[{"provider_id": "up"}])
    admin.patch("/v1/admin/pools/p", {"timeouts": {"idle_ms": 1000}})
    admin.create_route(alias="chat", chain=[{"pool": "p", "model": "m"}])
    admin.patch("/v1/admin/routes/chat", {"max_output_tokens": 10})
    admin.post(
        "/v1/admin/prices",
        {"model": "chat", "input_micros_per_mtok": 1, "output_micros_per_mtok": 2},
    )
    key = admin.create_key(tenant_id="acme")
    tenant = harness.as_token(admin.create_tenant_token("acme", name="acme-ops"))
    tenant.patch(f"/v1/admin/keys/{key['id']}", {"name": "renamed"})
    rotated = tenant.post(f"/v1/admin/keys/{key['id']}/rotate", {"overlap_seconds": 10}).json()
    tenant.post(f"/v1/admin/keys/{rotated['key']['id']}/revoke")
    admin.delete("/v1/admin/routes/chat")
    admin.delete("/v1/admin/pools/p")
    admin.delete("/v1/admin/providers/up")

    entries = list(reversed(admin.all_pages("/v1/admin/audit")))
    bootstrap = [e for e in entries if e["actor_role"] == "system"]
    rows = [(e["action"], e["resource_id"], e["actor_name"]) for e in entries[len(bootstrap) :]]
    assert rows == [
        ("tenant.create", "acme", "bootstrap"),
        ("tenant.update", "acme", "bootstrap"),
        ("provider.create", "up", "bootstrap"),
        ("provider.update", "up", "bootstrap"),
        ("pool.create", "p", "bootstrap"),
        ("pool.update", "p", "bootstrap"),
        ("route.create", "chat", "bootstrap"),
        ("route.update", "chat", "bootstrap"),
        ("price.create", "1", "bootstrap"),
        ("key.create", key["id"], "bootstrap"),
        ("token.create", rows[10][1], "bootstrap"),
        ("key.update", key["id"], "acme-ops"),
        ("key.rotate", key["id"], "acme-ops"),
        ("key.revoke", rotated["key"]["id"], "acme-ops"),
        ("route.delete", "chat", "bootstrap"),
        ("pool.delete", "p", "bootstrap"),
        ("provider.delete", "up", "bootstrap"),
    ]
    # "bootstrap" is the name of the configured admin token; tenant changes carry the tenant.
    by_action = {e["action"]: e for e in entries}
    assert by_action["key.update"]["tenant_id"] == "acme"
    assert by_action["key.update"]["summary"] == {"name": "renamed"}
    assert by_action["provider.create"]["summary"]["credential_fingerprint"]
    assert "sk-abcdefgh1234" not in str(entries)
    versions = [e["config_version"] for e in entries[len(bootstrap) :]]
    core_changes = [v for v in versions if v is not None]
    assert core_changes == sorted(core_changes) and len(set(core_changes)) == len(core_changes)
    # The core costs requests at the price in force: a new price version is pushed.
    assert by_action["price.create"]["config_version"] is not None
    assert by_action["token.create"]["config_version"] is None
    filtered = admin.all_pages(
        "/v1/admin/audit", resource_type="key", actor_id=by_action["key.update"]["actor_id"]
    )
    assert [e["action"] for e in filtered] == ["key.revoke", "key.rotate", "key.update"]
