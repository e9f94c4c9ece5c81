"""The admin app in-process with its console (SQLite), and sessions in it: a `Browser` is an
HTTP client with its own cookie jar, as one person's browser would be."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sluicegate._core import Core

from control.api.app import create_app
from control.bridge.core_bridge import CoreBridge
from tests.control.conftest import make_settings
from tests.control.helpers import ADMIN_TOKEN, Harness

NONCE = re.compile(r'name="nonce" value="([^"]+)"')
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture
def console_harness(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    started: list[tuple[TestClient, CoreBridge]] = []

    def start(**env: str) -> Harness:
        settings = make_settings(f"sqlite:///{tmp_path}/console.db", **env)
        bridge = CoreBridge(Core(workers=1, expose_upstream=True))
        client = TestClient(create_app(settings, bridge), raise_server_exceptions=False)
        client.__enter__()
        started.append((client, bridge))
        return Harness(client, bridge, settings)

    yield start
    for client, bridge in reversed(started):
        bridge.stop(1.0)
        client.__exit__(None, None, None)


@pytest.fixture
def harness(console_harness: Callable[..., Harness]) -> Harness:
    return console_harness()


class Browser:
    """One browser: its own cookies, following nothing by itself."""

    def __init__(self, harness: Harness) -> None:
        app = harness.client.app
        self.client = TestClient(app, follow_redirects=False)
        self.csrf = ""

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        response = self.client.get(path, **kwargs)
        found = CSRF.search(response.text)
        if found:
            self.csrf = found.group(1)
        return response

    def post(self, path: str, data: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
        body = {"csrf": self.csrf, **(data or {})}
        return self.client.post(path, data=body, **kwargs)

    def sign_in(self, token: str = ADMIN_TOKEN) -> httpx.Response:
        form = self.client.get("/console/sign-in")
        nonce = NONCE.search(form.text)
        assert nonce, form.text
        response = self.client.post(
            "/console/sign-in", data={"nonce": nonce.group(1), "token": token, "next": "/console"}
        )
        if response.status_code == 303:
            self.get("/console/keys")
        return response


@pytest.fixture
def browser(harness: Harness) -> Browser:
    return Browser(harness)
