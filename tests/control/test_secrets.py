"""No secret (tenant key, upstream credential, admin token, pepper, encryption key) appears in any
response after its creation, in any error body, in the log (SQL logging included), in the audit
log or anywhere in the database."""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx
import pytest
import sqlalchemy as sa

from tests.control.helpers import (
    ADMIN_TOKEN,
    ENCRYPTION_KEY,
    PEPPER,
    UPSTREAM_CREDENTIAL,
    Harness,
)


def test_canaries_never_leak(
    harness_factory: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    harness = harness_factory()
    admin = harness.admin
    seen: list[httpx.Response] = []

    def call(method: str, path: str, body: object = None) -> httpx.Response:
        response = admin.request(method, path, json=body)
        seen.append(response)
        return response

    # Creations: their own responses may carry the one secret they create, nothing else.
    provider = admin.create_provider(
        id="up", base_url="https://api.example.com/v1", credential=UPSTREAM_CREDENTIAL
    )
    assert UPSTREAM_CREDENTIAL not in str(provider)
    admin.create_pool(id="p", members=[{"provider_id": "up"}])
    admin.create_route(alias="chat", chain=[{"pool": "p", "model": "m"}])
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme")
    tenant_token = admin.create_tenant_token("acme")
    rotated = admin.post(f"/v1/admin/keys/{key['id']}/rotate", {"overlap_seconds": 30}).json()
    secrets = {
        "admin token": ADMIN_TOKEN,
        "pepper": PEPPER,
        "encryption key": ENCRYPTION_KEY,
        "credential": UPSTREAM_CREDENTIAL,
        "tenant key": key["key"],
        "rotated key": rotated["key"]["key"],
        "tenant token": tenant_token,
    }

    # Reads, updates and failures after the creations.
    for method, path in [
        ("GET", "/v1/admin/providers"),
        ("GET", "/v1/admin/providers/up"),
        ("GET", "/v1/admin/keys"),
        ("GET", f"/v1/admin/keys/{key['id']}"),
        ("GET", "/v1/admin/tokens"),
        ("GET", "/v1/admin/config/version"),
        ("GET", "/openapi.json"),
    ]:
        call(method, path)
    call("PATCH", "/v1/admin/providers/up", {"credential": UPSTREAM_CREDENTIAL + "-2"})
    call("PATCH", "/v1/admin/providers/up", {"base_url": "http://169.254.169.254/"})
    call("PATCH", "/v1/admin/providers/up", {"credential": UPSTREAM_CREDENTIAL + " bad"})
    call(
        "POST",
        "/v1/admin/providers",
        {"kind": "nope", "base_url": 5, "credential": [UPSTREAM_CREDENTIAL]},
    )
    call(
        "POST",
        "/v1/admin/providers",
        {"kind": "openai", "base_url": "ftp://x", "credential": UPSTREAM_CREDENTIAL},
    )
    call("POST", "/v1/admin/keys", {"tenant_id": "acme", "key": key["key"]})
    call(
        "POST",
        "/v1/admin/pools",
        {"members": [{"provider_id": "up"}], "timeouts": {"idle_ms": 10**11}},
    )
    call("PATCH", "/v1/admin/tenants/acme", {"name": PEPPER + "\n"})
    for token in (key["key"], PEPPER):
        seen.append(harness.as_token(token).get("/v1/admin/tenants"))
    assert {r.status_code for r in seen} >= {200, 401, 422}

    audit = admin.all_pages("/v1/admin/audit")
    assert audit
    with harness.ctx.sessions() as session:
        tables = [t for t in sa.inspect(session.connection()).get_table_names()]
        dump = [
            repr(session.execute(sa.text(f'SELECT * FROM "{table}"')).all()) for table in tables
        ]

    places = {
        "responses": "\n".join(r.text for r in seen),
        "audit log": repr(audit),
        "database": "\n".join(dump),
        "log": caplog.text,
    }
    assert "SELECT" in caplog.text or "UPDATE" in caplog.text  # SQL logging was on
    for place, text in places.items():
        for name, secret in secrets.items():
            assert secret not in text, f"the {name} appears in the {place}"
