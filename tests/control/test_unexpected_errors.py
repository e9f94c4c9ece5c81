"""An exception no handler knows is a 500 in the API's error format that says the connection
ends (Starlette re-raises it after the answer, and uvicorn closes the connection)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from control.api.errors import install_error_handlers


def test_an_unexpected_exception_is_a_500_that_closes_the_connection() -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("secret detail")

    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.get("/boom")
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "internal_error"
    assert "secret detail" not in r.text
    assert r.headers["connection"] == "close"
