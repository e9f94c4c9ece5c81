"""Providers: credentials encrypted at rest and never returned; base URLs guarded against SSRF."""

from __future__ import annotations

import json

import sqlalchemy as sa

from control.crypto import fingerprint
from control.providers.models import Provider
from tests.control.helpers import UPSTREAM_CREDENTIAL, Api, Harness, error_fields


def test_credential_is_encrypted_and_never_returned(harness: Harness, admin: Api) -> None:
    created = admin.create_provider(
        id="oai",
        kind="openai",
        base_url="https://api.example.com/v1",
        credential=UPSTREAM_CREDENTIAL,
    )
    assert "credential" not in created
    assert created["credential_mask"] == f"sk-…{UPSTREAM_CREDENTIAL[-4:]}"
    assert created["credential_fingerprint"] == fingerprint(UPSTREAM_CREDENTIAL)
    for response in (admin.get("/v1/admin/providers/oai"), admin.get("/v1/admin/providers")):
        assert UPSTREAM_CREDENTIAL not in response.text
    with harness.ctx.sessions() as session:
        rows = session.execute(sa.text("SELECT * FROM providers")).all()
        row = session.get(Provider, "oai")
        assert row is not None and row.credential_ciphertext is not None
        assert harness.ctx.cipher.decrypt(row.credential_ciphertext) == UPSTREAM_CREDENTIAL
    assert UPSTREAM_CREDENTIAL not in repr(rows)


def test_credential_update_and_removal(admin: Api) -> None:
    admin.create_provider(
        id="oai", base_url="https://api.example.com/v1", credential="sk-first-aaaaaaaa"
    )
    updated = admin.patch("/v1/admin/providers/oai", {"credential": "sk-second-bbbbbbbb"}).json()
    assert updated["credential_fingerprint"] == fingerprint("sk-second-bbbbbbbb")
    audit = admin.get("/v1/admin/audit", resource_id="oai").json()["items"][0]
    assert audit["summary"]["credential_fingerprint"] == fingerprint("sk-second-bbbbbbbb")
    removed = admin.patch("/v1/admin/providers/oai", {"credential": None}).json()
    assert (removed["credential_mask"], removed["credential_fingerprint"]) == (None, None)


def test_credential_shape_is_checked(admin: Api) -> None:
    response = admin.post(
        "/v1/admin/providers",
        {"kind": "openai", "base_url": "https://x.example/v1", "credential": "has space\n"},
    )
    assert response.status_code == 422 and set(error_fields(response)) == {"credential"}
    assert "has space" not in response.text


def test_unsafe_base_urls_are_refused_with_a_field_error(admin: Api) -> None:
    for url in ("http://169.254.169.254/latest", "http://127.0.0.1:18081/v1", "ftp://x/v1"):
        response = admin.post("/v1/admin/providers", {"kind": "openai", "base_url": url})
        assert response.status_code == 422, response.text
        assert set(error_fields(response)) == {"base_url"}
        assert url not in response.text
    assert admin.get("/v1/admin/providers").json()["items"] == []


def test_the_data_port_is_refused_once_listening(harness_factory: object) -> None:
    harness = harness_factory(start_core=True)  # type: ignore[operator]
    admin = harness.admin
    port = harness.bridge.address.rsplit(":", 1)[1]
    response = admin.post(
        "/v1/admin/providers", {"kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1"}
    )
    assert response.status_code == 422 and "own listener" in error_fields(response)["base_url"]


def test_internal_providers_may_use_internal_addresses(harness: Harness, admin: Api) -> None:
    for i, url in enumerate(["http://169.254.10.20:8000/v1", "http://[fe80::1]:8000/v1"]):
        created = admin.create_provider(id=f"int{i}", base_url=url, internal=True)
        assert created["internal"] is True
    # The core checks resolved addresses when it connects: it is told which members may be
    # internal.
    admin.create_pool(id="inside", members=[{"provider_id": "int0"}])
    with harness.ctx.sessions() as session:
        payload = json.loads(harness.ctx.mutator.snapshot(session).payload)
    assert payload["pools"][0]["members"][0]["internal"] is True
    # Metadata endpoints stay refused even for internal providers.
    response = admin.post(
        "/v1/admin/providers",
        {"kind": "openai", "base_url": "http://169.254.169.254/", "internal": True},
    )
    assert response.status_code == 422
    # Dropping `internal` re-checks the URL.
    dropped = admin.patch("/v1/admin/providers/int0", {"internal": False})
    assert dropped.status_code == 422 and "link-local" in error_fields(dropped)["base_url"]


def test_loopback_is_allowed(admin: Api) -> None:
    created = admin.create_provider(id="local", base_url="http://127.0.0.1:9000/v1/")
    assert created["base_url"] == "http://127.0.0.1:9000/v1"


def test_update_rechecks_the_url(admin: Api) -> None:
    admin.create_provider(id="p", base_url="https://api.example.com/v1")
    bad = admin.patch("/v1/admin/providers/p", {"base_url": "http://169.254.169.254/"})
    assert bad.status_code == 422
    good = admin.patch("/v1/admin/providers/p", {"base_url": "https://other.example.com/v1"})
    assert good.json()["base_url"] == "https://other.example.com/v1"
    kind = admin.patch("/v1/admin/providers/p", {"kind": "anthropic"})
    assert kind.status_code == 422 and "kind" in error_fields(kind)


def test_delete_refused_while_in_a_pool(admin: Api) -> None:
    admin.create_provider(id="p", base_url="https://api.example.com/v1")
    admin.create_pool(id="pool", members=[{"provider_id": "p"}])
    response = admin.delete("/v1/admin/providers/p")
    assert response.status_code == 409 and "pool" in response.json()["error"]["message"]
    assert admin.delete("/v1/admin/pools/pool").status_code == 204
    assert admin.delete("/v1/admin/providers/p").status_code == 204
    assert admin.get("/v1/admin/providers/p").status_code == 404
