"""The admin API as the console calls it: in-process, through the whole app (the admin gate,
its token check and rate limit, the routers), with the session's token. Every number the
console shows comes from here; the console never reads the database itself."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.types import ASGIApp

from control.console.relay import Streamed, relay

# Never resolved: requests go to the app object, not over the network.
BASE_URL = "http://admin-api.console.invalid"
Params = Mapping[str, str | int | None]


@dataclass
class ApiError(Exception):
    """An error answer of the admin API, in its own words."""

    status: int
    code: str
    message: str
    fields: dict[str, str] = field(default_factory=dict)
    retry_after: str | None = None

    def __str__(self) -> str:
        return self.message

    @classmethod
    def of(cls, response: httpx.Response) -> ApiError:
        return cls.parse(response.status_code, response.content, response.headers)

    @classmethod
    def parse(cls, status: int, content: bytes, headers: Mapping[str, str]) -> ApiError:
        try:
            error = json.loads(content)["error"]
            fields = {f["field"]: f["message"] for f in error.get("fields", [])}
            code, message = str(error["code"]), str(error["message"])
        except (ValueError, KeyError, TypeError):
            code, message, fields = "error", f"the admin API answered {status}", {}
        return cls(status, code, message, fields, headers.get("retry-after"))

    @property
    def ends_session(self) -> bool:
        """The token itself is no longer good: unknown, revoked, expired, or its tenant off."""
        return self.status == 401 or self.code == "tenant_disabled"


def _query(params: Params | None) -> dict[str, str | int]:
    return {k: v for k, v in (params or {}).items() if v is not None and v != ""}


class AdminApi:
    """One session's view of the admin API."""

    def __init__(self, app: ASGIApp, client: httpx.AsyncClient, token: str) -> None:
        self._app = app
        self._client = client
        self._headers = {"Authorization": f"Bearer {token}"}

    async def call(
        self, method: str, path: str, *, params: Params | None = None, body: Any = None
    ) -> Any:
        response = await self._client.request(
            method, path, params=_query(params), json=body, headers=self._headers
        )
        if response.status_code >= 400:
            raise ApiError.of(response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    async def get(self, path: str, **params: str | int | None) -> Any:
        return await self.call("GET", path, params=params)

    async def gather(self, *calls: Awaitable[Any]) -> list[Any]:
        """Several reads at once; the first error is raised."""
        return list(await asyncio.gather(*calls))

    async def all_pages(self, path: str, limit: int = 10, **params: str | int | None) -> list[Any]:
        """Every item of a list, at most `limit` pages of 200."""
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(limit):
            page = await self.get(path, limit=200, cursor=cursor, **params)
            items.extend(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        return items

    async def stream(self, path: str, params: Params | None = None) -> Streamed:
        """A streamed answer (the CSV export), relayed chunk by chunk: httpx's ASGI transport
        would hold a whole export in memory first."""
        streamed = await relay(self._app, path, _query(params), self._headers)
        if streamed.status >= 400:
            content = b"".join([chunk async for chunk in streamed.body])
            raise ApiError.parse(streamed.status, content, streamed.headers)
        return streamed


def client_for(app: ASGIApp) -> httpx.AsyncClient:
    # The app's own exceptions become 500 answers, as for any client.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=60)
