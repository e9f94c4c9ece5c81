"""The console in Debian's Chromium (headless, Selenium and chromedriver) against a real
`sluicegate serve` under demo-shaped load: sign in; create a key and see its secret once; send
traffic with the openai SDK; the key's chart and totals equal the ledger; revoke it and see the
SDK refused; a tenant session cannot see or reach another tenant's key, also by its URL; a drill
started from the console moves traffic in the overview. Every page is photographed on the way
(`SLUICEGATE_CONSOLE_SCREENSHOTS=docs/console` keeps them: `make console-screenshots`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from tests.console.browser import (
    Gateway,
    Pages,
    fresh_profile,
    missing_browser,
    screenshot_dir,
    start_driver,
    start_gateway,
    start_load,
    wait_for,
)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    problem = missing_browser()
    if problem is not None:
        if __import__("os").environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    tmp = tmp_path_factory.mktemp("console-browser")
    gw = start_gateway(tmp)
    try:
        load_key = gw.api("POST", "/v1/admin/keys", json={"tenant_id": "acme", "name": "load"})
        gw.extra["load_key"] = load_key
        gw.load = start_load(gw, load_key["key"], tmp, seconds=240)
        yield gw
    finally:
        gw.stop()


@pytest.fixture(scope="module")
def pages(gateway: Gateway, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    profile = fresh_profile()
    driver = start_driver(profile)
    try:
        yield Pages(driver, gateway.admin_url, screenshot_dir(tmp_path_factory.mktemp("shots")))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def uplot_data(pages: Pages, css: str) -> list[list[Any]]:
    data: list[list[Any]] = pages.driver.execute_script(
        "const el = document.querySelector(arguments[0]);"
        "return el && el._uplot ? el._uplot.data : null;",
        css,
    )
    return data


def test_sign_in_and_the_overview_under_load(gateway: Gateway, pages: Pages) -> None:
    pages.open("/console")
    assert "/console/sign-in" in pages.driver.current_url
    pages.shot("sign-in")
    pages.find("#token").send_keys("sgt_wrong-token-000000000000000000000000000")
    pages.find("form button[type=submit]").click()
    assert "unknown, revoked or expired" in pages.wait(".alert.error").text
    pages.sign_in(gateway.token)
    assert pages.heading() == "Overview"
    # Under load the pools' windows fill; the live chart gathers a reading per refresh.
    wait_for(
        lambda: float(pages.find('[data-pool="chat"] [data-field="rate"]').text.split("/")[0]) > 0,
        timeout=30,
        what="traffic in the overview",
    )
    wait_for(lambda: len((uplot_data(pages, '[data-chart="live"]') or [[]])[0]) >= 3, what="live")
    assert pages.finds('[data-pool="chat"] [data-member="sim-a"]')
    assert "Doctor" in pages.find('[data-pool="chat"] [data-testid="doctor"]').text
    pages.shot("overview")
    pages.shot("overview-phone", width=390, mobile=True)
    pages.dark(True)
    pages.shot("overview-dark")
    pages.dark(False)


def test_keyboard_reaches_the_skip_link_and_the_navigation(gateway: Gateway, pages: Pages) -> None:
    pages.sign_in(gateway.token)
    pages.open("/console/keys")
    body = pages.find("body")
    body.send_keys(Keys.TAB)
    active = pages.driver.switch_to.active_element
    assert active.text == "Skip to content"
    seen = []
    for _ in range(8):
        pages.driver.switch_to.active_element.send_keys(Keys.TAB)
        seen.append(pages.driver.switch_to.active_element.text)
    assert "Keys" in seen and "Drills" in seen and "Audit log" in seen


def test_a_key_from_creation_to_revocation(gateway: Gateway, pages: Pages) -> None:
    pages.sign_in(gateway.token)
    pages.open("/console/keys")
    Select(pages.find('form.stack select[name="tenant_id"]')).select_by_value("acme")
    pages.find('form.stack input[name="name"]').send_keys("sdk-key")
    pages.shot("keys")
    pages.find("form.stack button[type=submit]").click()
    secret = pages.wait('[data-testid="secret"]').text
    key_id = pages.find('[data-testid="key-id"]').text
    assert secret.startswith("sk-sg-")
    assert "only time" in pages.find(".alert.warn").text
    assert pages.find("button.copy").is_displayed()
    pages.shot("key-created")
    pages.driver.find_element(By.LINK_TEXT, "Go to the key").click()
    pages.wait('[data-testid="series-totals"]')
    assert secret not in pages.driver.page_source  # never retrievable again
    pages.open("/console/keys")
    assert secret not in pages.driver.page_source

    # Traffic with the openai SDK.
    client = openai.OpenAI(base_url=gateway.data_url + "/v1", api_key=secret, max_retries=0)
    sent = 0
    for i in range(9):
        if i % 3 == 0:
            stream = client.chat.completions.create(
                model="demo-chat",
                messages=[{"role": "user", "content": f"stream {i}"}],
                max_tokens=16,
                stream=True,
            )
            assert sum(1 for _ in stream) > 0
        else:
            answer = client.chat.completions.create(
                model="demo-chat",
                messages=[{"role": "user", "content": f"hello {i}"}],
                max_tokens=16,
            )
            assert answer.choices[0].message.content
        sent += 1

    # The ledger has them (the drainer writes within a moment); the page shows exactly that.
    models_path = f"/v1/admin/keys/{key_id}/usage/models"
    wait_for(lambda: gateway.api("GET", models_path)["total"]["requests"] == sent, what="ledger")
    pages.open(f"/console/keys/{key_id}?range=1h&granularity=minute")
    pages.wait('[data-testid="latency"]')
    chart = uplot_data(pages, '[data-usage="requests"]')
    start = pages.driver.execute_script(
        "return JSON.parse(document.getElementById('usage-data').textContent).start"
    )
    end = pages.driver.execute_script(
        "return JSON.parse(document.getElementById('usage-data').textContent).end"
    )
    window = {"from": start, "to": end}
    series = gateway.api(
        "GET", f"/v1/admin/keys/{key_id}/usage/series", params={**window, "granularity": "minute"}
    )
    models = gateway.api("GET", models_path, params=window)
    assert sum(chart[1]) == sum(b["requests"] for b in series["buckets"]) == sent
    by_minute = {b["start"]: b["requests"] for b in series["buckets"]}
    drawn = {x: y for x, y in zip(chart[0], chart[1], strict=True) if y}
    assert sorted(drawn.values()) == sorted(by_minute.values())
    tokens = uplot_data(pages, '[data-usage="tokens"]')
    assert sum(tokens[1]) == models["total"]["prompt_tokens"]
    assert sum(tokens[2]) == models["total"]["completion_tokens"]
    totals = {
        el.get_attribute("data-field"): int(el.get_attribute("data-value"))
        for el in pages.finds('[data-testid="series-totals"] dd')
    }
    for name in ("requests", "prompt_tokens", "completion_tokens", "cost_micros", "errors"):
        assert totals[name] == models["total"][name], name
    total_row = pages.find('[data-testid="models"] tfoot td').get_attribute("data-value")
    assert int(total_row) == sent
    pages.shot("key-detail")
    pages.shot("key-detail-phone", width=390, mobile=True)

    # Revoke from the console: the SDK is refused at once.
    pages.find("details.danger summary").click()
    pages.click_when_ready('form[action$="/revoke"] button')
    assert "revoked" in pages.wait(".alert.ok").text
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(
            model="demo-chat", messages=[{"role": "user", "content": "again"}], max_tokens=4
        )


def test_a_tenant_session_cannot_see_or_reach_another_tenants_key(
    gateway: Gateway, pages: Pages
) -> None:
    theirs = gateway.api(
        "POST", "/v1/admin/keys", json={"tenant_id": "globex", "name": "globex-secret-project"}
    )
    token = gateway.api("POST", "/v1/admin/tenants/acme/tokens", json={"name": "acme-console"})[
        "token"
    ]
    pages.sign_in(token)
    assert pages.heading() == "Keys"
    listing = pages.driver.page_source
    assert theirs["id"] not in listing and "globex-secret-project" not in listing
    assert "load" in pages.find('[data-testid="keys-table"]').text
    pages.shot("keys-tenant")
    pages.open(f"/console/keys/{theirs['id']}")  # typed by hand
    assert pages.heading() == "Not found"
    assert "globex-secret-project" not in pages.driver.page_source
    pages.open("/console/keys?tenant_id=globex")
    assert "globex-secret-project" not in pages.driver.page_source
    pages.open("/console/audit")
    assert pages.heading() == "Not allowed"
    pages.open("/console/tenants/acme")
    pages.shot("tenant-self")


def test_a_drill_started_from_the_console_moves_traffic_in_the_overview(
    gateway: Gateway, pages: Pages
) -> None:
    pages.sign_in(gateway.token)
    pages.open("/console/drills")
    Select(pages.find('select[name="target"]')).select_by_value("chat")
    Select(pages.find('select[name="route"]')).select_by_value("demo-chat")
    seconds = pages.find('input[name="seconds"]')
    seconds.clear()
    seconds.send_keys("40")
    pages.find('input[name="reason"]').send_keys("console rehearsal")
    pages.shot("drills")
    pages.find("form.stack button[type=submit]").click()
    pages.wait('[data-testid="drill-panel"]')
    drill_url = pages.driver.current_url

    pages.open("/console")
    spare = '[data-upstream="demo-chat/chat-fallback/sim-spare"] .rate-now'
    main = '[data-upstream="demo-chat/chat/sim-a"] .rate-now'

    def rate(css: str) -> float | None:
        cells = pages.finds(css)
        value = cells[0].get_attribute("data-value") if cells else ""
        return float(value) if value else None

    wait_for(lambda: (rate(spare) or 0) > 0, timeout=30, what="traffic on the fallback pool")
    wait_for(lambda: rate(main) == 0, timeout=30, what="no traffic on the drilled pool")
    assert "drilled" in pages.find('[data-pool="chat"] h3').text
    assert pages.finds('[data-pool="chat"] .state-drilled')
    pages.shot("overview-drill")
    pages.driver.get(drill_url)
    wait_for(lambda: (rate(spare) or 0) > 0, timeout=20, what="the drill page's live traffic")
    pages.shot("drill-live")
    pages.find('form[action$="/end"] button').click()
    pages.wait('[data-testid="drill-panel"] .state-ended')


def test_the_other_pages(gateway: Gateway, pages: Pages) -> None:
    pages.sign_in(gateway.token)
    for path, name, heading in (
        ("/console/tenants", "tenants", "Tenants"),
        ("/console/tenants/acme", "tenant", "Tenant Acme"),
        ("/console/upstreams", "upstreams", "Providers, pools and routes"),
        ("/console/upstreams/pools/chat", "pool", "Pool chat"),
        ("/console/audit", "audit", "Audit log"),
    ):
        pages.open(path)
        assert pages.heading().startswith(heading), path
        pages.shot(name)
    assert "drill.start" in pages.find('[data-testid="audit-table"]').text
    pages.dark(True)
    pages.open("/console/keys")
    pages.shot("keys-dark")
    pages.dark(False)
