"""Authentication and roles. Tenant tokens see their own tenant only: another tenant's objects
answer 404 (exactly like objects that do not exist), admin-only collections answer 403."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.control.helpers import ADMIN_TOKEN, Api, Harness

# Every route with an id in its path, and what a tenant token gets for another tenant's id.
# A new id-bearing route fails `test_every_id_bearing_route_is_covered` until it is added here.
ISOLATION: dict[tuple[str, str], tuple[int, Any]] = {
    ("GET", "/v1/admin/tenants/{tenant_id}"): (404, None),
    ("PATCH", "/v1/admin/tenants/{tenant_id}"): (404, {"name": "x"}),
    ("POST", "/v1/admin/tenants/{tenant_id}/tokens"): (404, {"name": "x"}),
    ("GET", "/v1/admin/keys/{key_id}"): (404, None),
    ("PATCH", "/v1/admin/keys/{key_id}"): (404, {"name": "x"}),
    ("POST", "/v1/admin/keys/{key_id}/rotate"): (404, {}),
    ("POST", "/v1/admin/keys/{key_id}/revoke"): (404, None),
    ("GET", "/v1/admin/keys/{key_id}/quota"): (404, None),
    ("POST", "/v1/admin/keys/{key_id}/quota/reset"): (404, None),
    ("GET", "/v1/admin/keys/{key_id}/usage/series"): (404, None),
    ("GET", "/v1/admin/keys/{key_id}/usage/models"): (404, None),
    ("GET", "/v1/admin/keys/{key_id}/usage/latency"): (404, None),
    ("GET", "/v1/admin/keys/{key_id}/usage/export"): (404, None),
    ("GET", "/v1/admin/tenants/{tenant_id}/quota"): (404, None),
    ("POST", "/v1/admin/tenants/{tenant_id}/quota/reset"): (404, None),
    ("DELETE", "/v1/admin/tokens/{token_id}"): (403, None),
    ("GET", "/v1/admin/providers/{provider_id}"): (403, None),
    ("PATCH", "/v1/admin/providers/{provider_id}"): (403, {"name": "x"}),
    ("DELETE", "/v1/admin/providers/{provider_id}"): (403, None),
    ("GET", "/v1/admin/pools/{pool_id}"): (403, None),
    ("PATCH", "/v1/admin/pools/{pool_id}"): (403, {"name": "x"}),
    ("DELETE", "/v1/admin/pools/{pool_id}"): (403, None),
    ("GET", "/v1/admin/routes/{alias}"): (403, None),
    ("PATCH", "/v1/admin/routes/{alias}"): (403, {"max_output_tokens": 5}),
    ("DELETE", "/v1/admin/routes/{alias}"): (403, None),
    ("GET", "/v1/admin/prices/{price_id}"): (403, None),
    ("GET", "/v1/admin/drills/{drill_id}"): (403, None),
    ("GET", "/v1/admin/drills/{drill_id}/traffic"): (403, None),
    ("DELETE", "/v1/admin/drills/{drill_id}"): (403, None),
}


def _id_routes(harness: Harness) -> set[tuple[str, str]]:
    paths = harness.client.app.openapi()["paths"]  # type: ignore[attr-defined]
    return {(method.upper(), path) for path, ops in paths.items() if "{" in path for method in ops}


def test_every_id_bearing_route_is_covered(harness: Harness) -> None:
    assert _id_routes(harness) == set(ISOLATION)


@pytest.fixture
def two_tenants(harness: Harness, world: dict[str, Any]) -> dict[str, Any]:
    admin = harness.admin
    admin.create_key(tenant_id="acme", name="acme-2")
    globex_token = admin.create_tenant_token("globex")
    price = admin.post(
        "/v1/admin/prices",
        {"model": "chat", "input_micros_per_mtok": 1, "output_micros_per_mtok": 2},
    ).json()
    token_id = admin.get("/v1/admin/tokens", tenant_id="globex").json()["items"][0]["id"]
    drill = admin.post(
        "/v1/admin/drills", {"pool": "main", "seconds": 60, "allow_outage": True}
    ).json()
    return {
        "acme": harness.as_token(admin.create_tenant_token("acme")),
        "globex_token": globex_token,
        "ids": {
            "tenant_id": "globex",
            "key_id": world["globex_key"]["id"],
            "token_id": token_id,
            "provider_id": "up1",
            "pool_id": "main",
            "alias": "chat",
            "price_id": str(price["id"]),
            "drill_id": drill["id"],
        },
    }


def _fill(path: str, ids: dict[str, str]) -> str:
    return re.sub(r"{(\w+)}", lambda m: ids[m.group(1)], path)


def test_another_tenants_objects_are_invisible(
    harness: Harness, two_tenants: dict[str, Any]
) -> None:
    acme: Api = two_tenants["acme"]
    missing = {name: "does-not-exist" for name in two_tenants["ids"]} | {"price_id": "999999"}
    for (method, path), (status, body) in ISOLATION.items():
        theirs = acme.request(method, _fill(path, two_tenants["ids"]), json=body)
        assert theirs.status_code == status, (method, path, theirs.text)
        nobody = acme.request(method, _fill(path, missing), json=body)
        # Another tenant's object is indistinguishable from no object at all.
        assert (nobody.status_code, nobody.json()) == (theirs.status_code, theirs.json()), path
    # Nothing of globex changed.
    admin = harness.admin
    key = admin.get(f"/v1/admin/keys/{two_tenants['ids']['key_id']}").json()
    assert (key["name"], key["status"]) == ("globex-1", "active")
    assert admin.get("/v1/admin/tenants/globex").json()["name"] == "Globex"


def test_another_tenants_lists_and_filters(two_tenants: dict[str, Any]) -> None:
    acme: Api = two_tenants["acme"]
    assert [t["id"] for t in acme.all_pages("/v1/admin/tenants")] == ["acme"]
    assert {k["tenant_id"] for k in acme.all_pages("/v1/admin/keys")} == {"acme"}
    assert len(acme.all_pages("/v1/admin/keys")) == 2
    for path, params in [
        ("/v1/admin/keys", {"tenant_id": "globex"}),
        ("/v1/admin/usage", {"tenant_id": "globex"}),
        ("/v1/admin/usage", {"key_id": two_tenants["ids"]["key_id"]}),
    ]:
        assert acme.get(path, **params).status_code == 404, (path, params)
    assert acme.post("/v1/admin/keys", {"tenant_id": "globex"}).status_code == 404


def test_admin_only_collections_are_forbidden(two_tenants: dict[str, Any]) -> None:
    acme: Api = two_tenants["acme"]
    for method, path in [
        ("GET", "/v1/admin/providers"),
        ("POST", "/v1/admin/providers"),
        ("GET", "/v1/admin/pools"),
        ("GET", "/v1/admin/routes"),
        ("GET", "/v1/admin/prices"),
        ("GET", "/v1/admin/prices/in-force?model=chat"),
        ("GET", "/v1/admin/audit"),
        ("GET", "/v1/admin/config/version"),
        ("GET", "/v1/admin/tokens"),
        ("POST", "/v1/admin/tokens"),
        ("GET", "/v1/admin/drills"),
        ("POST", "/v1/admin/drills"),
        ("POST", "/v1/admin/tenants"),
    ]:
        body = {"name": "x"} if method == "POST" else None
        response = acme.request(method, path, json=body)
        assert response.status_code in (403, 422), (path, response.text)
        if response.status_code == 403:
            assert response.json()["error"]["code"] == "forbidden"
    own = acme.patch("/v1/admin/tenants/acme", {"rpm": 10**6})
    assert own.status_code == 403
    assert acme.post("/v1/admin/tenants/acme/tokens", {"name": "x"}).status_code == 403


def test_a_tenant_token_manages_its_own_keys(two_tenants: dict[str, Any]) -> None:
    acme: Api = two_tenants["acme"]
    key = acme.create_key(tenant_id="acme", name="self-service", rpm=600)
    assert acme.get(f"/v1/admin/keys/{key['id']}").status_code == 200
    assert acme.patch(f"/v1/admin/keys/{key['id']}", {"rpm": 601}).status_code == 422
    assert acme.patch(f"/v1/admin/keys/{key['id']}", {"rpm": 5}).json()["rpm"] == 5
    rotated = acme.post(f"/v1/admin/keys/{key['id']}/rotate", {"overlap_seconds": 5})
    assert rotated.status_code == 200
    new_id = rotated.json()["key"]["id"]
    assert acme.post(f"/v1/admin/keys/{new_id}/revoke").json()["status"] == "revoked"
    assert acme.get("/v1/admin/tenants/acme").status_code == 200
    assert acme.get("/v1/admin/usage").status_code == 200


def test_missing_unknown_and_revoked_tokens(harness: Harness, two_tenants: dict[str, Any]) -> None:
    for token in (None, "", "sgt_unknown", ADMIN_TOKEN + "x"):
        response = harness.as_token(token).get("/v1/admin/tenants")
        assert response.status_code == 401, token
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["error"]["code"] == "unauthorized"
    globex = harness.as_token(two_tenants["globex_token"])
    assert globex.get("/v1/admin/keys").status_code == 200
    revoked = harness.admin.delete(f"/v1/admin/tokens/{two_tenants['ids']['token_id']}")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert globex.get("/v1/admin/keys").status_code == 401


def test_admin_tokens_and_the_last_one(harness: Harness) -> None:
    admin = harness.admin
    created = admin.post("/v1/admin/tokens", {"name": "ops"}).json()
    assert created["role"] == "admin" and created["token"].startswith("sgt_")
    listed = admin.get("/v1/admin/tokens").text
    assert created["token"] not in listed and ADMIN_TOKEN not in listed
    second = harness.as_token(created["token"])
    assert second.get("/v1/admin/tenants").status_code == 200
    bootstrap = [
        t
        for t in admin.get("/v1/admin/tokens", role="admin").json()["items"]
        if t["name"] == "bootstrap"
    ]
    assert second.delete(f"/v1/admin/tokens/{bootstrap[0]['id']}").status_code == 200
    assert admin.get("/v1/admin/tenants").status_code == 401
    last = second.delete(f"/v1/admin/tokens/{created['id']}")
    assert last.status_code == 409 and "last admin token" in last.json()["error"]["message"]
