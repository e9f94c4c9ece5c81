"""Sign-in with an admin token (global or tenant-scoped), and sign-out.

The sign-in form carries a token of its own, matched against a short-lived cookie (a login
form posted from elsewhere is refused). The token is checked by the admin API itself
(`GET /v1/admin/whoami`); the session then holds it server-side and the browser gets only a
random session id, in an HttpOnly, SameSite=Strict cookie scoped to /console.
"""

from __future__ import annotations

import hmac
import secrets
from datetime import UTC, datetime
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from starlette.responses import Response

from control.console import render
from control.console.api import AdminApi, ApiError
from control.console.sessions import Identity
from control.console.web import (
    COOKIE,
    PREFIX,
    Console,
    ConsoleDep,
    safe_next,
    same_origin,
    secure,
    state_of,
)

router = APIRouter()
FORM_COOKIE = "sluicegate_console_signin"
FORM_SECONDS = 1800
# Why the last session ended: fixed texts only (the query string is the visitor's to write).
REASONS = {
    "token": "The token of that session is no longer accepted (revoked, expired, or its tenant "
    "disabled). Sign in with a valid token.",
    "signed_out": "You are signed out.",
    "expired": "Your session ended. Sign in again.",
}


def _form(request: Request, error: str | None = None, status: int = 200) -> Response:
    nonce = secrets.token_urlsafe(24)
    reason = REASONS.get(request.query_params.get("reason", ""))
    response = render.html(
        "sign_in.html",
        {
            "nonce": nonce,
            "next": safe_next(request.query_params.get("next")),
            "error": error,
            "notice": None if error else reason,
            "identity": None,
        },
        status,
    )
    response.set_cookie(
        FORM_COOKIE,
        nonce,
        max_age=FORM_SECONDS,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=secure(request, state_of(request).settings),
    )
    return response


@router.get("/console/sign-in")
async def sign_in_page(request: Request) -> Response:
    return _form(request)


def _expiry(value: str | None) -> float | None:
    if value is None:
        return None
    moment = datetime.fromisoformat(value)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


@router.post("/console/sign-in")
async def sign_in(request: Request) -> Response:
    state = state_of(request)
    form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
    expected = request.cookies.get(FORM_COOKIE, "")
    sent = form.get("nonce", "")
    if not (expected and sent and same_origin(request)) or not hmac.compare_digest(
        expected.encode(), sent.encode()
    ):
        return _form(request, "The sign-in form expired or came from elsewhere; try again.", 403)
    token = form.get("token", "").strip()
    if not token:
        return _form(request, "Enter an admin token.", 422)
    if not token.isascii() or not token.isprintable():
        # No token of ours holds such characters, and an HTTP header could not carry them.
        return _form(request, "That is not an admin token (it holds characters no token has).", 401)
    try:
        me = await AdminApi(request.app, state.client, token).get("/v1/admin/whoami")
    except ApiError as refused:
        text = {
            401: "That token is unknown, revoked or expired.",
            403: "That token's tenant is disabled.",
            429: "Too many calls with that token; wait a moment.",
        }.get(refused.status, refused.message)
        return _form(request, text, 401 if refused.status == 401 else refused.status)
    identity = Identity(
        token_id=me["token_id"],
        name=me["name"],
        role=me["role"],
        tenant_id=me["tenant_id"],
        token_expires=_expiry(me.get("expires_at")),
    )
    # A sign-in always starts a new session (never one whose id the visitor could have set).
    state.sessions.end(request.cookies.get(COOKIE))
    session_id, _ = state.sessions.create(identity, token)
    response = Console.redirect(safe_next(form.get("next")))
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=state.settings.max_age_seconds,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=secure(request, state.settings),
    )
    response.delete_cookie(FORM_COOKIE, path=PREFIX)
    return response


@router.post("/console/sign-out")
async def sign_out(console: ConsoleDep) -> Response:
    await console.form()
    console.state.sessions.end(console.request.cookies.get(COOKIE))
    response = Console.redirect(f"{PREFIX}/sign-in?reason=signed_out")
    response.delete_cookie(COOKIE, path=PREFIX)
    return response
