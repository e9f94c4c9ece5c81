"""Debian's Chromium, headless, driven through its own chromedriver by Selenium; and a gateway
under load like `make demo`'s (three simulators, `sluicegate serve`, the load generator)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from sluicegate.demo.config import SHAPE, SIMS, SLOTS

from tests.e2e.helpers import start_serve
from tests.support.procs import Proc, start_sim

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)


def missing_browser() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(path) or shutil.which(os.path.basename(path))):
            return f"{path} is not installed (`make chromium` installs Debian's chromium-driver)"
    return None


def start_driver(profile: Path) -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    return driver


GATEWAY_CONFIG = """
[console]
refresh_seconds = 1

[doctor]
recent_seconds = 20
baseline_seconds = 20

[[bootstrap.tenants]]
id = "acme"
name = "Acme"

[[bootstrap.tenants]]
id = "globex"
name = "Globex"

{providers}
[[bootstrap.pools]]
id = "chat"
members = [
  {{ provider_id = "sim-a", max_concurrency = {a} }},
  {{ provider_id = "sim-b", max_concurrency = {b} }},
]

[[bootstrap.pools]]
id = "chat-fallback"
members = [{{ provider_id = "sim-spare", max_concurrency = {spare} }}]

[[bootstrap.routes]]
alias = "demo-chat"
chain = [{{ pool = "chat", model = "sim-llm" }}, {{ pool = "chat-fallback", model = "sim-llm" }}]

[[bootstrap.prices]]
model = "demo-chat"
input_micros_per_mtok = 500000
output_micros_per_mtok = 1500000
"""


@dataclass
class Gateway:
    serve: Proc
    admin_url: str
    token: str
    data_url: str
    sims: list[Proc]
    load: subprocess.Popen[bytes] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def api(self, method: str, path: str, token: str | None = None, **kwargs: Any) -> Any:
        response = httpx.request(
            method,
            self.admin_url + path,
            headers={"Authorization": f"Bearer {token or self.token}"},
            timeout=30,
            **kwargs,
        )
        assert response.status_code < 300, response.text
        return response.json() if response.content else None

    def stop(self) -> None:
        if self.load is not None and self.load.poll() is None:
            self.load.terminate()
            try:
                self.load.wait(10)
            except subprocess.TimeoutExpired:
                self.load.kill()
        self.serve.stop()
        for sim in self.sims:
            sim.stop()


def start_gateway(tmp: Path) -> Gateway:
    sims = []
    providers = ""
    for name, timing in SIMS.items():
        sim = start_sim(tmp, "--max-concurrency", str(SLOTS[name]), *timing, name=name)
        sims.append(sim)
        providers += (
            f'[[bootstrap.providers]]\nid = "{name}"\nkind = "openai"\n'
            f'base_url = "http://{sim.address}/v1"\n'
        )
    config = GATEWAY_CONFIG.format(
        providers=providers, a=SLOTS["sim-a"], b=SLOTS["sim-b"], spare=SLOTS["sim-spare"]
    )
    serve, admin, token = start_serve(tmp, config)
    data = serve.address
    return Gateway(serve, f"http://{admin}", token, f"http://{data}", sims)


def start_load(gateway: Gateway, key: str, tmp: Path, seconds: int) -> subprocess.Popen[bytes]:
    """Steady demo-shaped load, bounded in time (and stopped with the gateway)."""
    cmd = [sys.executable, "-m", "sluicegate", "bench", "--url", gateway.data_url, "--key", key]
    cmd += ["--model", "demo-chat", "--json", str(tmp / "load.json"), *SHAPE]
    cmd += ["--concurrency", "6", "--duration", f"{seconds}s", "--quiet"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll `check` until it gives a true value. A live panel that htmx swapped between finding
    an element and reading it (`StaleElementReferenceException`) is a "not yet"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except StaleElementReferenceException:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class Pages:
    """The console as a person uses it, in one browser, with screenshots on the way."""

    def __init__(self, driver: WebDriver, base: str, shots: Path) -> None:
        self.driver = driver
        self.base = base
        self.shots = shots
        shots.mkdir(parents=True, exist_ok=True)

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def find(self, css: str) -> Any:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def finds(self, css: str) -> list[Any]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def wait(self, css: str, timeout: float = 15) -> Any:
        return WebDriverWait(self.driver, timeout).until(
            lambda d: d.find_element(By.CSS_SELECTOR, css)
        )

    def heading(self) -> str:
        return str(self.find("h1").text)

    def sign_in(self, token: str) -> None:
        self.driver.delete_all_cookies()
        self.open("/console/sign-in")
        self.find("#token").send_keys(token)
        self.find("form button[type=submit]").click()
        self.wait(".who")

    def shot(self, name: str, width: int = 1280, mobile: bool = False) -> Path:
        """A full-page screenshot at the given width."""
        d = self.driver
        height = int(d.execute_script("return document.documentElement.scrollHeight"))
        metrics = {"width": width, "height": max(600, min(height, 6000)), "deviceScaleFactor": 1}
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "mobile": mobile})
        time.sleep(0.3)  # charts resize on the viewport change
        height = int(d.execute_script("return document.documentElement.scrollHeight"))
        metrics["height"] = max(600, min(height, 6000))
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "mobile": mobile})
        path = self.shots / f"{name}.png"
        path.write_bytes(d.get_screenshot_as_png())
        d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        # The charts resize back too: a click computed meanwhile can land beside its target.
        time.sleep(0.3)
        return path

    def click_when_ready(self, css: str, timeout: float = 15) -> None:
        """Click an element once it is shown and enabled (just revealed, say, by a <details>)."""

        def ready(d: WebDriver) -> Any:
            shown = [e for e in d.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]
            return next((e for e in shown if e.is_enabled()), False)

        WebDriverWait(self.driver, timeout).until(ready).click()

    def dark(self, on: bool) -> None:
        value = "dark" if on else "light"
        self.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": value}]},
        )


def screenshot_dir(tmp: Path) -> Path:
    target = os.environ.get("SLUICEGATE_CONSOLE_SCREENSHOTS")
    return Path(target) if target else tmp / "screenshots"


def fresh_profile() -> Path:
    return Path(tempfile.mkdtemp(prefix="sluicegate-chromium-"))
