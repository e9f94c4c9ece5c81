"""Mounting the console on the admin app: its pages at /console (kept out of the OpenAPI
document: they are not the API), its static files (htmx, uPlot, its own script and styles,
shipped in the package: no CDN, no Node.js at run time), and the answers to what its pages
raise: a session that must sign in again, a stale form, the admin API's refusals."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from control.console import render
from control.console.api import ApiError, client_for
from control.console.pages import (
    audit,
    auth,
    drills,
    key_detail,
    keys,
    overview,
    tenants,
    upstreams,
)
from control.console.sessions import SessionStore
from control.console.settings import ConsoleSettings
from control.console.web import (
    COOKIE,
    ConsoleState,
    CsrfRefused,
    SignInRequired,
    sign_in_redirect,
    state_of,
)

STATIC = Path(__file__).parent / "static"
ROUTERS = (auth, overview, keys, key_detail, tenants, drills, audit, upstreams)


def _error_page(request: Request, status: int, title: str, message: str) -> Response:
    state = state_of(request)
    session = state.sessions.get(request.cookies.get(COOKIE))
    context = {
        "identity": session.identity if session else None,
        "csrf": session.csrf if session else "",
        "path": request.url.path,
        "title": title,
        "message": message,
        "status": status,
    }
    return render.html("error.html", context, status)


async def _sign_in(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    return sign_in_redirect(request, exc.reason)


async def _csrf(request: Request, exc: Exception) -> Response:
    return _error_page(
        request,
        403,
        "Form refused",
        "This form is stale or was sent from another site. Reload the page and try again.",
    )


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    if exc.ends_session:
        state = state_of(request)
        session = state.sessions.get(request.cookies.get(COOKIE))
        if session is not None:
            state.sessions.end_token(session.identity.token_id)
        return sign_in_redirect(request, "token")
    titles = {403: "Not allowed", 404: "Not found", 409: "Conflict", 429: "Slow down"}
    message = exc.message
    if exc.status == 403:
        message = f"{exc.message}. This page needs an admin token with more rights."
    elif exc.status == 429 and exc.retry_after:
        message = f"{exc.message} (retry in {exc.retry_after} s)"
    return _error_page(request, exc.status, titles.get(exc.status, "Error"), message)


def mount_console(app: FastAPI, settings: ConsoleSettings) -> None:
    if not settings.enabled:
        return
    app.state.console = ConsoleState(settings, SessionStore(settings), client_for(app))
    for module in ROUTERS:
        app.include_router(module.router, include_in_schema=False)
    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")
    app.add_exception_handler(SignInRequired, _sign_in)
    app.add_exception_handler(CsrfRefused, _csrf)
    app.add_exception_handler(ApiError, _api_error)

    @app.get("/console/{rest:path}", include_in_schema=False)
    async def not_found(request: Request, rest: str) -> Response:
        return _error_page(request, 404, "Not found", "There is no such page.")
