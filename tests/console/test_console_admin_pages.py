"""The operator's pages over HTTP: tenants and their tokens, providers, pools and routes made,
changed and deleted through forms, drills started and ended, the audit log; each change lands
in the admin API exactly as a form said, and its refusals come back to the form."""

from __future__ import annotations

import re

from tests.console.conftest import NONCE, Browser
from tests.control.helpers import UPSTREAM_CREDENTIAL, Harness


def test_tenants_and_their_tokens(harness: Harness, browser: Browser) -> None:
    browser.sign_in()
    browser.get("/console/tenants")
    made = browser.post("/console/tenants", {"id": "acme", "name": "Acme", "rpm": "600"})
    assert made.status_code == 303
    assert harness.admin.get("/v1/admin/tenants/acme").json()["rpm"] == 600
    refused = browser.post("/console/tenants", {"id": "acme", "name": "Again"})
    assert refused.status_code == 409 and "alert error" in refused.text
    edited = browser.post(
        "/console/tenants/acme/edit",
        {
            "name": "Acme Inc",
            "rpm": "600",
            "models": "chat, embed",
            "quota_period": "monthly",
            "quota_cost_micros": "5000000",
        },
    )
    assert edited.status_code == 303
    tenant = harness.admin.get("/v1/admin/tenants/acme").json()
    assert tenant["name"] == "Acme Inc" and tenant["models"] == ["chat", "embed"]
    assert tenant["quota"]["cost_micros"] == 5_000_000
    page = browser.get("/console/tenants/acme")
    assert "Tenant Acme Inc" in page.text and 'data-testid="quota"' in page.text
    nonce = NONCE.search(page.text)
    assert nonce
    created = browser.post("/console/tenants/acme/tokens", {"name": "ops", "nonce": nonce.group(1)})
    secret = re.search(r'data-testid="secret">(sgt_[^<]+)<', created.text)
    assert secret
    # The token signs in elsewhere; revoking it here ends that session at once.
    other = Browser(harness)
    assert other.sign_in(secret.group(1)).status_code == 303
    tokens = harness.admin.get("/v1/admin/tokens", tenant_id="acme").json()["items"]
    browser.get("/console/tenants/acme")
    revoked = browser.post(
        f"/console/tokens/{tokens[0]['id']}/revoke", {"back": "/console/tenants/acme"}
    )
    assert revoked.status_code == 303
    assert other.get("/console/keys").status_code == 303
    disabled = browser.post("/console/tenants/acme/status", {"status": "disabled"})
    assert disabled.status_code == 303
    assert harness.admin.get("/v1/admin/tenants/acme").json()["status"] == "disabled"


def test_providers_pools_and_routes(harness: Harness, browser: Browser) -> None:
    browser.sign_in()
    browser.get("/console/upstreams")
    provider = browser.post(
        "/console/upstreams/providers",
        {
            "id": "up1",
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "credential": UPSTREAM_CREDENTIAL,
            "headers": "OpenAI-Organization: org-1",
        },
    )
    assert provider.status_code == 303
    stored = harness.admin.get("/v1/admin/providers/up1").json()
    assert stored["headers"] == {"OpenAI-Organization": "org-1"} and stored["credential_mask"]
    page = browser.get("/console/upstreams/providers/up1")
    assert UPSTREAM_CREDENTIAL not in page.text
    bad = browser.post(
        "/console/upstreams/providers",
        {"id": "meta", "kind": "openai", "base_url": "http://169.254.169.254/v1"},
    )
    assert bad.status_code == 422 and "base_url" in bad.text
    pool = browser.post(
        "/console/upstreams/pools",
        {
            "id": "main",
            "member.provider_id": "up1",
            "member.id": "",
            "member.weight": "2",
            "member.max_concurrency": "8",
            "member.http2": "",
            "connect_ms": "500",
        },
    )
    assert pool.status_code == 303, pool.text
    stored = harness.admin.get("/v1/admin/pools/main").json()
    assert stored["members"][0]["weight"] == 2 and stored["timeouts"]["connect_ms"] == 500
    route = browser.post(
        "/console/upstreams/routes",
        {
            "alias": "team/chat",
            "chain.pool": "main",
            "chain.model": "llama",
            "max_output_tokens": "2048",
        },
    )
    assert route.status_code == 303
    assert harness.admin.get("/v1/admin/routes/team/chat").json()["max_output_tokens"] == 2048
    # Edit: only what changed is sent.
    browser.get("/console/upstreams/routes/team/chat")
    changed = browser.post(
        "/console/upstreams/routes/team/chat",
        {
            "chain.pool": "main",
            "chain.model": "llama",
            "max_output_tokens": "",
            "slo_ttft_p95_ms": "800",
        },
    )
    assert changed.status_code == 303
    after = harness.admin.get("/v1/admin/routes/team/chat").json()
    assert after["max_output_tokens"] is None and after["slo_ttft_p95_ms"] == 800
    in_use = browser.post("/console/upstreams/pools/main", {"action": "delete"})
    assert in_use.status_code == 409
    assert (
        browser.post("/console/upstreams/routes/team/chat", {"action": "delete"}).status_code == 303
    )
    assert browser.post("/console/upstreams/pools/main", {"action": "delete"}).status_code == 303
    assert harness.admin.get("/v1/admin/pools/main").status_code == 404


def test_drills_and_the_audit_log(harness: Harness, browser: Browser) -> None:
    admin = harness.admin
    admin.create_provider(id="up1", base_url="http://127.0.0.1:9/v1")
    admin.create_provider(id="up2", base_url="http://127.0.0.1:10/v1")
    admin.create_pool(id="main", members=[{"provider_id": "up1"}, {"provider_id": "up2"}])
    admin.create_route(alias="chat", chain=[{"pool": "main", "model": "m"}])
    browser.sign_in()
    page = browser.get("/console/drills")
    nonce = NONCE.search(page.text)
    assert nonce
    outage = browser.post(
        "/console/drills",
        {"target": "main", "route": "chat", "seconds": "30", "nonce": nonce.group(1)},
    )
    assert outage.status_code == 409 and "alert error" in outage.text  # no path left
    nonce = NONCE.search(outage.text)
    assert nonce
    started = browser.post(
        "/console/drills",
        {
            "target": "main:up1",
            "route": "chat",
            "seconds": "30",
            "reason": "rehearsal",
            "nonce": nonce.group(1),
        },
    )
    assert started.status_code == 303
    drill_id = started.headers["location"].rsplit("/", 1)[1]
    live = browser.get(f"/console/drills/{drill_id}")
    assert 'data-upstream="chat/main/up1"' in live.text and "drilled" in live.text
    assert browser.post(f"/console/drills/{drill_id}/end").status_code == 303
    assert admin.get(f"/v1/admin/drills/{drill_id}").json()["state"] == "ended"
    audit = browser.get("/console/audit", params={"action": "drill.start"})
    assert "drill.start" in audit.text and "drill.end" not in audit.text
