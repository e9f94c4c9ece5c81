"""Test helpers: an API client with a token, and a harness around the in-process app."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx
import sqlalchemy as sa
from fastapi.testclient import TestClient

from control.bridge.core_bridge import CoreBridge
from control.context import ControlContext
from control.process.settings import Settings
from control.usage.models import UsageRecord

# Canary secrets: tests assert they never show up in responses, logs, errors or audit rows.
ADMIN_TOKEN = "sgt_CANARY-admin-token-7f3a9c1e5b2d4f60"
PEPPER = "CANARY-pepper-0a1b2c3d4e5f6a7b8c9d"
ENCRYPTION_KEY = "Q0FOQVJZLWVuY3J5cHRpb24ta2V5LTAxMjM0NTY3ODk="
UPSTREAM_CREDENTIAL = "sk-CANARY-upstream-credential-5e6f7a8b9c"


class Api:
    """The admin API as one token sees it."""

    def __init__(self, client: TestClient, token: str | None) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.request(method, path, headers=self.headers, **kwargs)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return self.request("POST", path, json=body)

    def patch(self, path: str, body: Any) -> httpx.Response:
        return self.request("PATCH", path, json=body)

    def delete(self, path: str) -> httpx.Response:
        return self.request("DELETE", path)

    def _created(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.post(path, body)
        assert response.status_code == 201, response.text
        data: dict[str, Any] = response.json()
        return data

    def create_tenant(self, **body: Any) -> dict[str, Any]:
        return self._created("/v1/admin/tenants", body)

    def create_key(self, **body: Any) -> dict[str, Any]:
        return self._created("/v1/admin/keys", body)

    def create_provider(self, **body: Any) -> dict[str, Any]:
        body.setdefault("kind", "openai")
        return self._created("/v1/admin/providers", body)

    def create_pool(self, **body: Any) -> dict[str, Any]:
        return self._created("/v1/admin/pools", body)

    def create_route(self, **body: Any) -> dict[str, Any]:
        return self._created("/v1/admin/routes", body)

    def create_tenant_token(self, tenant_id: str, name: str = "tenant-ops") -> str:
        data = self._created(f"/v1/admin/tenants/{tenant_id}/tokens", {"name": name})
        token: str = data["token"]
        return token

    def all_pages(self, path: str, **params: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            query = dict(params, **({"cursor": cursor} if cursor else {}))
            response = self.get(path, **query)
            assert response.status_code == 200, response.text
            page = response.json()
            items.extend(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                return items


def error_fields(response: httpx.Response) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error"}, body
    return {f["field"]: f["message"] for f in body["error"]["fields"]}


@dataclass
class Harness:
    client: TestClient
    bridge: CoreBridge
    settings: Settings

    @property
    def ctx(self) -> ControlContext:
        ctx: ControlContext = self.client.app.state.ctx  # type: ignore[attr-defined]
        return ctx

    @property
    def admin(self) -> Api:
        return Api(self.client, ADMIN_TOKEN)

    def as_token(self, token: str | None) -> Api:
        return Api(self.client, token)

    @property
    def data_url(self) -> str:
        assert self.bridge.address is not None
        return f"http://{self.bridge.address}"


def usage_rows(harness: Harness, expect: int) -> dict[str, UsageRecord]:
    """The ledger's usage rows by request id, once `expect` of them are in (or after 15 s)."""
    deadline = time.monotonic() + 15
    while True:
        with harness.ctx.sessions() as session:
            found = {r.request_id: r for r in session.scalars(sa.select(UsageRecord))}
            session.expunge_all()
        if len(found) >= expect or time.monotonic() > deadline:
            return found
        time.sleep(0.05)
