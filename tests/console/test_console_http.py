"""The console over HTTP, in-process: sign-in and its cookie, CSRF on every change, sign-out,
sessions ended with their token, a tenant session confined to its tenant (also by URL), and the
pages' numbers equal to the admin API's."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from control.usage.writer import write_events
from tests.console.conftest import NONCE, Browser
from tests.control.helpers import ADMIN_TOKEN, Harness
from tests.control.usage_events import event


def world(harness: Harness) -> dict[str, Any]:
    admin = harness.admin
    admin.create_tenant(id="acme", name="Acme")
    admin.create_tenant(id="globex", name="Globex")
    return {
        "acme": admin.create_key(tenant_id="acme", name="acme-1"),
        "globex": admin.create_key(tenant_id="globex", name="globex-1"),
    }


def test_pages_need_a_session(browser: Browser) -> None:
    for path in ("/console", "/console/keys", "/console/keys/key_x", "/console/audit"):
        response = browser.get(path)
        assert response.status_code == 303
        assert response.headers["location"].startswith("/console/sign-in?next=")
    panel = browser.client.get("/console/overview/panel", headers={"HX-Request": "true"})
    assert panel.status_code == 401 and panel.headers["HX-Redirect"].startswith("/console/sign-in")


def test_sign_in_sets_a_strict_http_only_cookie_and_holds_no_secret(
    harness: Harness, browser: Browser
) -> None:
    response = browser.sign_in()
    assert response.status_code == 303 and response.headers["location"] == "/console"
    cookie = next(c for c in response.headers.get_list("set-cookie") if "sluicegate_console=" in c)
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert "Path=/console" in cookie
    assert ADMIN_TOKEN not in cookie
    page = browser.get("/console")
    assert page.status_code == 200 and "Overview" in page.text
    assert ADMIN_TOKEN not in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"


def test_a_bad_token_or_a_forged_form_does_not_sign_in(browser: Browser) -> None:
    form = browser.client.get("/console/sign-in")
    nonce = NONCE.search(form.text)
    assert nonce
    bad = browser.client.post(
        "/console/sign-in", data={"nonce": nonce.group(1), "token": "sgt_not-a-token"}
    )
    assert bad.status_code == 401 and "unknown, revoked or expired" in bad.text
    assert "sluicegate_console=" not in bad.headers.get("set-cookie", "")
    # A token no header could carry is refused on the form, not as the API's JSON.
    again = NONCE.search(browser.client.get("/console/sign-in").text)
    assert again
    odd = browser.client.post("/console/sign-in", data={"nonce": again.group(1), "token": "€€"})
    assert odd.status_code == 401 and "text/html" in odd.headers["content-type"], odd.text
    assert "not an admin token" in odd.text
    # The sign-in form's nonce must match its cookie (a login posted from elsewhere).
    fresh = Browser.__new__(Browser)
    fresh.client = type(browser.client)(browser.client.app, follow_redirects=False)
    forged = fresh.client.post("/console/sign-in", data={"nonce": "x", "token": ADMIN_TOKEN})
    assert forged.status_code == 403


def test_every_change_needs_the_csrf_token_and_this_origin(
    harness: Harness, browser: Browser
) -> None:
    world(harness)
    browser.sign_in()
    page = browser.get("/console/keys")
    nonce = NONCE.search(page.text)
    assert nonce
    data = {"tenant_id": "acme", "name": "x", "nonce": nonce.group(1)}
    missing = browser.client.post("/console/keys", data=data)
    assert missing.status_code == 403
    wrong = browser.client.post("/console/keys", data={**data, "csrf": "nope"})
    assert wrong.status_code == 403
    elsewhere = browser.client.post(
        "/console/keys",
        data={**data, "csrf": browser.csrf},
        headers={"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
    )
    assert elsewhere.status_code == 403
    keys = harness.admin.all_pages("/v1/admin/keys", tenant_id="acme")
    assert [k["name"] for k in keys] == ["acme-1"]


def test_a_created_key_is_shown_once(harness: Harness, browser: Browser) -> None:
    world(harness)
    browser.sign_in()
    page = browser.get("/console/keys")
    nonce = NONCE.search(page.text)
    assert nonce
    data = {"tenant_id": "acme", "name": "laptop", "rpm": "60", "nonce": nonce.group(1)}
    created = browser.post("/console/keys", data)
    assert created.status_code == 200
    secret = re.search(r'data-testid="secret">(sk-sg-[A-Za-z0-9]+)<', created.text)
    assert secret, created.text
    key_id = re.search(r'data-testid="key-id">([^<]+)<', created.text)
    assert key_id
    # Sent again (a reload): no second key, no secret.
    again = browser.post("/console/keys", data)
    assert again.status_code == 303 and "already_created" in again.headers["location"]
    names = [k["name"] for k in harness.admin.all_pages("/v1/admin/keys", tenant_id="acme")]
    assert names.count("laptop") == 1
    detail = browser.get(f"/console/keys/{key_id.group(1)}")
    assert detail.status_code == 200 and secret.group(1) not in detail.text
    assert secret.group(1) not in browser.get("/console/keys").text


def test_sign_out_ends_the_session(browser: Browser) -> None:
    browser.sign_in()
    assert browser.get("/console").status_code == 200
    out = browser.post("/console/sign-out")
    assert out.status_code == 303
    assert browser.get("/console").status_code == 303


def test_a_revoked_token_ends_its_sessions(harness: Harness, browser: Browser) -> None:
    world(harness)
    token = harness.admin.create_tenant_token("acme")
    browser.sign_in(token)
    assert browser.get("/console/keys").status_code == 200
    tokens = harness.admin.get("/v1/admin/tokens", tenant_id="acme").json()["items"]
    assert harness.admin.delete(f"/v1/admin/tokens/{tokens[0]['id']}").status_code == 200
    response = browser.get("/console/keys")
    assert response.status_code == 303 and "reason=token" in response.headers["location"]
    assert len(harness.client.app.state.console.sessions) == 0  # type: ignore[attr-defined]


def test_an_expired_session_must_sign_in_again(harness: Harness, browser: Browser) -> None:
    browser.sign_in()
    sessions = harness.client.app.state.console.sessions  # type: ignore[attr-defined]
    start = time.time()
    sessions.clock = lambda: start + sessions.settings.idle_seconds + 1
    assert browser.get("/console").status_code == 303


def test_a_tenant_session_sees_its_own_tenant_only(harness: Harness, browser: Browser) -> None:
    keys = world(harness)
    browser.sign_in(harness.admin.create_tenant_token("acme"))
    listing = browser.get("/console/keys")
    assert keys["acme"]["id"] in listing.text and keys["globex"]["id"] not in listing.text
    assert "globex" not in listing.text.lower()
    # Typing another tenant's key URL: the same 404 as a key that does not exist.
    for path in (
        f"/console/keys/{keys['globex']['id']}",
        f"/console/keys/{keys['globex']['id']}/latency",
        f"/console/keys/{keys['globex']['id']}/usage.csv",
        "/console/tenants/globex",
    ):
        response = browser.get(path)
        assert response.status_code == 404, path
        assert "globex-1" not in response.text
    assert browser.post(f"/console/keys/{keys['globex']['id']}/revoke").status_code == 404
    assert harness.admin.get(f"/v1/admin/keys/{keys['globex']['id']}").json()["status"] == "active"
    # The operator's pages are the API's 403; the overview sends a tenant to its keys.
    assert browser.get("/console/audit").status_code == 403
    assert browser.get("/console/upstreams").status_code == 403
    assert browser.get("/console").headers["location"] == "/console/keys"
    own = browser.get(f"/console/keys/{keys['acme']['id']}")
    assert own.status_code == 200 and "acme-1" in own.text


def _insert_usage(harness: Harness, key: dict[str, Any], count: int) -> None:
    now = time.time()
    events = [
        event(
            f"r{i}",
            tenant_id=key["tenant_id"],
            key_id=key["id"],
            seq=i + 1,
            model="chat" if i % 3 else "embed",
            prompt_tokens=10 + i,
            completion_tokens=i % 7,
            cost_micros=5 * i,
            status=500 if i % 10 == 0 else 200,
            started_at=now - 60 * (i % 50),
        )
        for i in range(count)
    ]
    with harness.ctx.sessions() as session, session.begin():
        write_events(session, events)


def _values(html: str, testid: str) -> dict[str, int]:
    block = html.split(f'data-testid="{testid}"', 1)[1].split("</dl>", 1)[0]
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r'data-field="([a-z_]+)" data-value="(-?\d+)"', block)
    }


def test_key_page_numbers_are_the_api_numbers(harness: Harness, browser: Browser) -> None:
    keys = world(harness)
    key = keys["acme"]
    _insert_usage(harness, key, 200)
    browser.sign_in()
    page = browser.get(f"/console/keys/{key['id']}?range=24h&granularity=hour")
    assert page.status_code == 200
    chart = json.loads(page.text.split('id="usage-data">', 1)[1].split("</script>", 1)[0])
    series = harness.admin.get(
        f"/v1/admin/keys/{key['id']}/usage/series",
        granularity="hour",
        **{"from": chart["start"], "to": chart["end"]},
    ).json()
    models = harness.admin.get(
        f"/v1/admin/keys/{key['id']}/usage/models", **{"from": chart["start"], "to": chart["end"]}
    ).json()
    assert [r[0] for r in chart["rows"]] == [b["start"] for b in series["buckets"]]
    assert [r[1] for r in chart["rows"]] == [b["requests"] for b in series["buckets"]]
    totals = _values(page.text, "series-totals")
    for name in ("requests", "errors", "prompt_tokens", "completion_tokens", "cost_micros"):
        assert totals[name] == models["total"][name] == sum(b[name] for b in series["buckets"])
    assert totals["requests"] == 200
    latency = browser.get(
        f"/console/keys/{key['id']}/latency", params={"from": chart["start"], "to": chart["end"]}
    )
    api_latency = harness.admin.get(
        f"/v1/admin/keys/{key['id']}/usage/latency", **{"from": chart["start"], "to": chart["end"]}
    ).json()
    assert f"{api_latency['ttft_ms']['count']:,}" in latency.text
    export = browser.get(
        f"/console/keys/{key['id']}/usage.csv", params={"from": chart["start"], "to": chart["end"]}
    )
    assert export.status_code == 200 and export.headers["content-type"].startswith("text/csv")
    assert len(export.text.strip().splitlines()) == 201  # header + every row


def test_edits_go_through_the_api_and_its_refusals_come_back(
    harness: Harness, browser: Browser
) -> None:
    keys = world(harness)
    key_id = keys["acme"]["id"]
    browser.sign_in()
    browser.get(f"/console/keys/{key_id}")
    saved = browser.post(
        f"/console/keys/{key_id}/edit",
        {"name": "acme-1", "rpm": "120", "quota_period": "daily", "quota_tokens": "5000"},
    )
    assert saved.status_code == 303
    after = harness.admin.get(f"/v1/admin/keys/{key_id}").json()
    assert after["rpm"] == 120 and after["quota"]["tokens"] == 5000
    refused = browser.post(f"/console/keys/{key_id}/edit", {"name": "acme-1", "rpm": "-5"})
    assert refused.status_code == 422 and "rpm" in refused.text
    assert browser.post(f"/console/keys/{key_id}/revoke").status_code == 303
    assert harness.admin.get(f"/v1/admin/keys/{key_id}").json()["status"] == "revoked"


def test_a_usage_range_past_the_calendar_is_a_range_error(
    harness: Harness, browser: Browser
) -> None:
    key_id = world(harness)["acme"]["id"]
    browser.sign_in()
    page = browser.get(f"/console/keys/{key_id}", params={"from": "9999-12-31T23:30:00-01:00"})
    assert page.status_code == 200, page.text
    assert "between the years 1 and 9999" in page.text


def test_unknown_console_pages_are_html_404s(browser: Browser) -> None:
    browser.sign_in()
    response = browser.get("/console/nowhere")
    assert response.status_code == 404 and "text/html" in response.headers["content-type"]
