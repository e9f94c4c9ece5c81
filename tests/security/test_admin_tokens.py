"""Admin tokens: rate-limited per token (tenant tokens by default), an optional expiry, the last
use recorded at most once a minute, and stored as HMAC under the pepper (SHA-256 rows of older
releases keep working and are upgraded the first time they authenticate)."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sluicegate._core import Core

from control import migrations
from control.api.access.ratelimit import TokenBuckets
from control.api.app import create_app
from control.api.errors import StartupError
from control.bridge.core_bridge import CoreBridge
from control.db import create_db_engine
from control.process.startup import prepare
from control.timeutil import utcnow
from control.tokens.hashing import hash_token
from control.tokens.models import AdminToken
from tests.control.conftest import make_settings
from tests.control.helpers import ADMIN_TOKEN, PEPPER, Api, Harness, error_fields


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_token_buckets_refill_at_their_rate() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(rate_per_minute=60, burst=2, clock=clock)
    assert buckets.take("a") == 0 and buckets.take("a") == 0
    wait = buckets.take("a")
    assert 0.99 < wait <= 1.0  # one token a second
    assert buckets.take("b") == 0  # every token has its own bucket
    clock.now += 1.0
    assert buckets.take("a") == 0 and buckets.take("a") > 0
    clock.now += 3600
    assert [buckets.take("a") for _ in range(3)][:2] == [0, 0]  # refilled up to the burst only
    assert TokenBuckets(rate_per_minute=0, burst=0, clock=clock).take("x") == 0  # no limit


def test_tenant_tokens_are_rate_limited(harness_factory: Any) -> None:
    harness: Harness = harness_factory(
        SLUICEGATE_ADMIN_TENANT_TOKEN_RPM="1", SLUICEGATE_ADMIN_TENANT_TOKEN_BURST="3"
    )
    admin = harness.admin
    admin.create_tenant(id="acme", name="Acme")
    admin.create_tenant(id="globex", name="Globex")
    acme = harness.as_token(admin.create_tenant_token("acme"))
    globex = harness.as_token(admin.create_tenant_token("globex"))
    assert [acme.get("/v1/admin/keys").status_code for _ in range(3)] == [200] * 3
    limited = acme.post("/v1/admin/keys", {"tenant_id": "acme"})
    assert limited.status_code == 429, limited.text
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    assert globex.get("/v1/admin/keys").status_code == 200  # a bucket per token
    # The operator's scripts are not limited by default.
    assert all(admin.get("/v1/admin/keys").status_code == 200 for _ in range(50))


def _set_token(harness: Harness, token_id: str, **values: Any) -> None:
    with harness.ctx.sessions() as session, session.begin():
        session.execute(sa.update(AdminToken).where(AdminToken.id == token_id).values(**values))


def _token(harness: Harness, token_id: str) -> AdminToken:
    with harness.ctx.sessions() as session:
        row = session.get(AdminToken, token_id)
        assert row is not None
        return row


def test_tokens_expire(harness: Harness, world: dict[str, Any]) -> None:
    admin = harness.admin
    past = admin.post("/v1/admin/tokens", {"name": "old", "expires_at": "2020-01-01T00:00:00Z"})
    assert past.status_code == 422 and "expires_at" in error_fields(past)
    soon = (utcnow() + timedelta(hours=1)).isoformat()
    created = admin.post("/v1/admin/tokens", {"name": "ops", "expires_at": soon}).json()
    assert created["expires_at"] is not None
    tenant = admin.post("/v1/admin/tenants/acme/tokens", {"name": "t", "expires_at": soon}).json()
    for made in (created, tenant):
        api = harness.as_token(made["token"])
        assert api.get("/v1/admin/keys").status_code == 200
        _set_token(harness, made["id"], expires_at=utcnow() - timedelta(seconds=1))
        refused = api.get("/v1/admin/keys")
        assert refused.status_code == 401 and "expired" in refused.json()["error"]["message"]


def test_last_use_is_written_at_most_once_a_minute(harness: Harness) -> None:
    admin = harness.admin
    created = admin.post("/v1/admin/tokens", {"name": "ops"}).json()
    assert created["last_used_at"] is None
    ops = harness.as_token(created["token"])
    ops.get("/v1/admin/tenants")
    first = _token(harness, created["id"]).last_used_at
    assert first is not None
    recent = utcnow() - timedelta(seconds=30)
    _set_token(harness, created["id"], last_used_at=recent)
    ops.get("/v1/admin/tenants")
    assert _token(harness, created["id"]).last_used_at == recent  # within the minute: no write
    stale = utcnow() - timedelta(seconds=61)
    _set_token(harness, created["id"], last_used_at=stale)
    ops.get("/v1/admin/tenants")
    later = _token(harness, created["id"]).last_used_at
    assert later is not None and later > stale + timedelta(seconds=60)
    listed = {t["id"]: t for t in admin.get("/v1/admin/tokens").json()["items"]}
    assert listed[created["id"]]["last_used_at"] is not None


def test_token_hashes_are_keyed_by_the_pepper(harness: Harness, world: dict[str, Any]) -> None:
    created = harness.admin.post("/v1/admin/tokens", {"name": "ops"}).json()
    row = _token(harness, created["id"])
    assert row.hash_scheme == "hmac-sha256"
    assert row.token_hash == hash_token(PEPPER, created["token"])
    assert row.token_hash != hashlib.sha256(created["token"].encode()).hexdigest()
    bootstrap = harness.admin.get("/v1/admin/tokens", role="admin").json()["items"][0]
    assert _token(harness, bootstrap["id"]).token_hash == hash_token(PEPPER, ADMIN_TOKEN)


def test_sha256_rows_are_upgraded_when_they_authenticate(
    harness: Harness, world: dict[str, Any]
) -> None:
    created = harness.admin.post("/v1/admin/tenants/acme/tokens", {"name": "old"}).json()
    legacy = hashlib.sha256(created["token"].encode()).hexdigest()
    _set_token(harness, created["id"], token_hash=legacy, hash_scheme="sha256")
    old = harness.as_token(created["token"])
    assert old.get("/v1/admin/keys").status_code == 200
    row = _token(harness, created["id"])
    assert (row.hash_scheme, row.token_hash) == (
        "hmac-sha256",
        hash_token(PEPPER, created["token"]),
    )
    assert old.get("/v1/admin/keys").status_code == 200
    # A SHA-256 digest presented as if it were the token is no way in.
    assert harness.as_token(legacy).get("/v1/admin/keys").status_code == 401


def test_tokens_of_an_older_release_keep_working(tmp_path: Path) -> None:
    """A database at the previous revision, its tokens stored as SHA-256: after the upgrade the
    configured token and a tenant token authenticate, and are stored as HMAC from then on."""
    url = f"sqlite:///{tmp_path}/old.db"
    engine = create_db_engine(url)
    migrations.upgrade(engine, "0005")
    tenant_token = "sgt_older-release-tenant-token-0123456789abcdef"
    now = utcnow().replace(tzinfo=None).isoformat(sep=" ")
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO tenants (id, name, status, created_at, updated_at) "
                "VALUES ('acme', 'Acme', 'active', :now, :now)"
            ),
            {"now": now},
        )
        for ident, role, tenant, secret in (
            ("tok_boot", "admin", None, ADMIN_TOKEN),
            ("tok_tenant", "tenant", "acme", tenant_token),
        ):
            conn.execute(
                sa.text(
                    "INSERT INTO admin_tokens (id, name, role, tenant_id, token_hash, prefix, "
                    "created_at) VALUES (:id, :name, :role, :tenant, :hash, 'p', :now)"
                ),
                {
                    "id": ident,
                    "name": "bootstrap" if role == "admin" else "tenant",
                    "role": role,
                    "tenant": tenant,
                    "hash": hashlib.sha256(secret.encode()).hexdigest(),
                    "now": now,
                },
            )
    engine.dispose()
    settings = make_settings(url)
    bridge = CoreBridge(Core(workers=1))
    with TestClient(create_app(settings, bridge)) as client:
        for secret in (ADMIN_TOKEN, tenant_token):
            assert Api(client, secret).get("/v1/admin/keys").status_code == 200
    engine = create_db_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT id, hash_scheme, token_hash, revoked_at FROM admin_tokens")
        ).all()
    engine.dispose()
    assert {r[0]: (r[1], r[2], r[3]) for r in rows} == {
        "tok_boot": ("hmac-sha256", hash_token(PEPPER, ADMIN_TOKEN), None),
        "tok_tenant": ("hmac-sha256", hash_token(PEPPER, tenant_token), None),
    }


def test_a_changed_pepper_is_refused_while_tokens_depend_on_it(tmp_path: Path) -> None:
    """Without keys, admin tokens alone hold the start to its pepper: a changed one would lock
    every token out (a generated bootstrap token included)."""
    url = f"sqlite:///{tmp_path}/s.db"
    ctx, _ = prepare(make_settings(url), CoreBridge(Core(workers=1)))
    ctx.engine.dispose()
    other = make_settings(url, SLUICEGATE_KEY_PEPPER="another-pepper-0123456789")
    with pytest.raises(StartupError, match="key pepper differs"):
        prepare(other, CoreBridge(Core(workers=1)))
