"""Keys: plaintext once, hash at rest, limits within the tenant's, search, pages, rotation and
revocation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sluicegate import _core

from control.keys.models import ApiKey
from tests.control.helpers import PEPPER, Api, Harness, error_fields


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def test_create_returns_the_key_once_and_stores_only_its_hash(harness: Harness, admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    created = admin.create_key(tenant_id="acme", name="ci", models=["chat"], priority="batch")
    secret = created["key"]
    assert _core.is_well_formed_api_key(secret)
    assert created["prefix"] == _core.api_key_prefix(secret) and secret.startswith(
        created["prefix"]
    )
    assert (created["status"], created["priority"], created["models"]) == (
        "active",
        "batch",
        ["chat"],
    )

    shown = admin.get(f"/v1/admin/keys/{created['id']}")
    assert "key" not in shown.json() and secret not in shown.text
    assert secret not in admin.get("/v1/admin/keys").text

    with harness.ctx.sessions() as session:
        row = session.get(ApiKey, created["id"])
        assert row is not None
        assert row.hash == _core.hash_api_key(PEPPER, secret)
        stored = session.execute(sa.text("SELECT * FROM api_keys")).all()
    assert secret not in repr(stored)


def test_unknown_tenant_and_validation(admin: Api) -> None:
    assert admin.post("/v1/admin/keys", {"tenant_id": "nobody"}).status_code == 404
    admin.create_tenant(id="acme", name="Acme")
    response = admin.post(
        "/v1/admin/keys",
        {
            "tenant_id": "acme",
            "priority": "urgent",
            "models": ["ok", "ok"],
            "max_concurrency": -1,
            "expires_at": "not a time",
        },
    )
    assert response.status_code == 422
    assert set(error_fields(response)) == {"priority", "models", "max_concurrency", "expires_at"}
    past = admin.post(
        "/v1/admin/keys",
        {"tenant_id": "acme", "expires_at": _iso(datetime.now(UTC) - timedelta(minutes=5))},
    )
    assert past.status_code == 422 and "future" in error_fields(past)["expires_at"]


def test_key_limits_never_exceed_the_tenants(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme", rpm=100, tpm=1000, max_concurrency=4)
    response = admin.post(
        "/v1/admin/keys", {"tenant_id": "acme", "rpm": 101, "tpm": 1000, "max_concurrency": 5}
    )
    assert response.status_code == 422
    fields = error_fields(response)
    assert set(fields) == {"rpm", "max_concurrency"}
    assert "tenant" in fields["rpm"]

    key = admin.create_key(tenant_id="acme", rpm=100)
    raised = admin.patch(f"/v1/admin/keys/{key['id']}", {"tpm": 1001})
    assert raised.status_code == 422 and set(error_fields(raised)) == {"tpm"}
    # A key without its own limit is fine: the tenant's applies.
    assert admin.patch(f"/v1/admin/keys/{key['id']}", {"rpm": None}).status_code == 200


def test_update_fields(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme")
    expiry = datetime.now(UTC) + timedelta(days=7)
    response = admin.patch(
        f"/v1/admin/keys/{key['id']}",
        {
            "name": "renamed",
            "models": ["a", "b"],
            "rpm": 10,
            "tpm": 20,
            "max_concurrency": 3,
            "priority": "batch",
            "expires_at": _iso(expiry),
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["name"], body["models"], body["rpm"], body["tpm"]) == (
        "renamed",
        ["a", "b"],
        10,
        20,
    )
    assert (body["max_concurrency"], body["priority"]) == (3, "batch")
    assert datetime.fromisoformat(body["expires_at"]) == expiry

    cleared = admin.patch(f"/v1/admin/keys/{key['id']}", {"models": None, "expires_at": None})
    assert (cleared.json()["models"], cleared.json()["expires_at"]) == (None, None)
    disabled = admin.patch(f"/v1/admin/keys/{key['id']}", {"status": "disabled"})
    assert disabled.json()["status"] == "disabled"
    bad = admin.patch(f"/v1/admin/keys/{key['id']}", {"status": "revoked", "priority": None})
    assert bad.status_code == 422 and set(error_fields(bad)) == {"status", "priority"}


def _ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for item in items]


def test_search_by_tenant_prefix_status_and_expiry(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    admin.create_tenant(id="globex", name="Globex")
    soon = datetime.now(UTC) + timedelta(hours=1)
    later = datetime.now(UTC) + timedelta(days=30)
    a1 = admin.create_key(tenant_id="acme", expires_at=_iso(soon))
    a2 = admin.create_key(tenant_id="acme", expires_at=_iso(later))
    g1 = admin.create_key(tenant_id="globex")
    admin.post(f"/v1/admin/keys/{a2['id']}/revoke")

    assert _ids(admin.all_pages("/v1/admin/keys", tenant_id="acme")) == [a1["id"], a2["id"]]
    assert _ids(admin.all_pages("/v1/admin/keys", prefix=g1["prefix"])) == [g1["id"]]
    assert g1["id"] in _ids(admin.all_pages("/v1/admin/keys", prefix=g1["prefix"][:8]))
    assert _ids(admin.all_pages("/v1/admin/keys", status="revoked")) == [a2["id"]]
    assert _ids(admin.all_pages("/v1/admin/keys", status="active")) == [a1["id"], g1["id"]]
    in_a_day = _iso(datetime.now(UTC) + timedelta(days=1))
    assert _ids(admin.all_pages("/v1/admin/keys", expires_before=in_a_day)) == [a1["id"]]
    assert _ids(admin.all_pages("/v1/admin/keys", expires_after=in_a_day)) == [a2["id"]]
    too_long = admin.get("/v1/admin/keys", prefix=g1["prefix"] + "xyz")
    assert too_long.status_code == 422 and "prefix" in error_fields(too_long)


def test_pages_are_stable_and_complete(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    made = [admin.create_key(tenant_id="acme")["id"] for _ in range(7)]
    first = admin.get("/v1/admin/keys", limit=3).json()
    assert len(first["items"]) == 3 and first["next_cursor"]
    # A key created mid-walk lands after the cursor: the walk sees every key exactly once.
    made.append(admin.create_key(tenant_id="acme")["id"])
    rest = admin.all_pages("/v1/admin/keys", limit=3, cursor=first["next_cursor"])
    assert _ids(first["items"]) + _ids(rest) == sorted(made) == made
    # The same cursor gives the same page.
    again = admin.get("/v1/admin/keys", limit=3, cursor=first["next_cursor"]).json()
    assert _ids(again["items"]) == _ids(rest[:3])


def test_bad_cursor_and_limit_are_field_errors(admin: Api) -> None:
    for params in ({"cursor": "garbage!"}, {"cursor": "eyJhZnRlciI6MX0"}, {"limit": 501}):
        response = admin.get("/v1/admin/keys", **params)
        assert response.status_code == 422, params
        assert set(error_fields(response)) == set(params)


def test_rotation_with_overlap(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme", rpm=50)
    old = admin.create_key(tenant_id="acme", name="svc", rpm=40, models=["chat"])
    response = admin.post(f"/v1/admin/keys/{old['id']}/rotate", {"overlap_seconds": 600})
    assert response.status_code == 200, response.text
    new, previous = response.json()["key"], response.json()["previous"]
    assert new["key"] != old["key"] and _core.is_well_formed_api_key(new["key"])
    assert (new["name"], new["rpm"], new["models"], new["rotated_from"]) == (
        "svc",
        40,
        ["chat"],
        old["id"],
    )
    assert previous["replaced_by"] == new["id"] and previous["status"] == "active"
    overlap_end = datetime.fromisoformat(previous["expires_at"])
    assert timedelta(seconds=590) < overlap_end - datetime.now(UTC) <= timedelta(seconds=600)
    # Rotating the old one again is refused: the new key is the one to rotate.
    again = admin.post(f"/v1/admin/keys/{old['id']}/rotate", {})
    assert again.status_code == 409 and new["id"] in again.json()["error"]["message"]


def test_rotation_without_overlap_revokes_at_once(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    old = admin.create_key(tenant_id="acme")
    rotated = admin.post(f"/v1/admin/keys/{old['id']}/rotate", {}).json()
    assert rotated["previous"]["status"] == "revoked"
    assert admin.get(f"/v1/admin/keys/{old['id']}").json()["status"] == "revoked"
    assert admin.post(f"/v1/admin/keys/{old['id']}/rotate", {}).status_code == 409
    bad = admin.post(f"/v1/admin/keys/{rotated['key']['id']}/rotate", {"overlap_seconds": -1})
    assert bad.status_code == 422 and "overlap_seconds" in error_fields(bad)


def test_rotated_key_past_its_overlap_reads_as_revoked(harness: Harness, admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    old = admin.create_key(tenant_id="acme")
    admin.post(f"/v1/admin/keys/{old['id']}/rotate", {"overlap_seconds": 60})
    with harness.ctx.sessions() as session, session.begin():
        row = session.get(ApiKey, old["id"])
        assert row is not None
        row.expires_at = datetime.now(UTC) - timedelta(seconds=1)
    assert admin.get(f"/v1/admin/keys/{old['id']}").json()["status"] == "revoked"
    assert old["id"] in _ids(admin.all_pages("/v1/admin/keys", status="revoked"))
    assert old["id"] not in _ids(admin.all_pages("/v1/admin/keys", status="expired"))


def test_revoke_is_final_and_idempotent(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme")
    first = admin.post(f"/v1/admin/keys/{key['id']}/revoke")
    assert first.status_code == 200 and first.json()["status"] == "revoked"
    second = admin.post(f"/v1/admin/keys/{key['id']}/revoke")
    assert second.status_code == 200 and second.json()["revoked_at"] == first.json()["revoked_at"]
    assert admin.patch(f"/v1/admin/keys/{key['id']}", {"name": "x"}).status_code == 409
    revokes = admin.get("/v1/admin/audit", action="key.revoke").json()["items"]
    assert len(revokes) == 1


def test_revoked_keys_leave_the_snapshot(harness: Harness, admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme")
    with harness.ctx.sessions() as session:
        assert key["id"] in harness.ctx.mutator.snapshot(session).payload
    admin.post(f"/v1/admin/keys/{key['id']}/revoke")
    with harness.ctx.sessions() as session:
        assert key["id"] not in harness.ctx.mutator.snapshot(session).payload
