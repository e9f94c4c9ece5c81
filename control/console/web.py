"""What every console page handler gets (`ConsoleDep`): the signed-in session, the admin API
with its token, the form of a change with its CSRF token checked, and rendering.

A request without a live session is sent to the sign-in page (htmx requests are told with
`HX-Redirect`, so a polled panel never swaps the sign-in page into itself). Every change is a
POST carrying the session's CSRF token (a form field, or the `X-CSRF-Token` header) and, when
the browser says where it comes from (`Origin`, `Sec-Fetch-Site`), coming from this origin; the
cookie is also `SameSite=Strict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote

from fastapi import Depends, Request
from starlette.responses import RedirectResponse, Response

from control.console import render
from control.console.api import AdminApi
from control.console.sessions import Session, SessionStore
from control.console.settings import ConsoleSettings

COOKIE = "sluicegate_console"
PREFIX = "/console"


class SignInRequired(Exception):
    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason or "")
        self.reason = reason


class CsrfRefused(Exception):
    pass


@dataclass
class ConsoleState:
    """Kept on `app.state.console`."""

    settings: ConsoleSettings
    sessions: SessionStore
    client: Any  # httpx.AsyncClient into the app itself


def state_of(request: Request) -> ConsoleState:
    state: ConsoleState = request.app.state.console
    return state


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another site."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


def safe_next(target: str | None) -> str:
    """Only a path of the console itself (never `//host` or a scheme)."""
    if target and target.startswith(PREFIX) and not target.startswith("//") and "\\" not in target:
        return target
    return PREFIX


def secure(request: Request, settings: ConsoleSettings) -> bool:
    if settings.secure_cookie == "auto":
        return request.url.scheme == "https"
    return settings.secure_cookie == "always"


class Console:
    def __init__(self, request: Request, state: ConsoleState, session: Session) -> None:
        self.request = request
        self.state = state
        self.session = session
        self.api = AdminApi(request.app, state.client, session.token)

    @property
    def identity(self) -> Any:
        return self.session.identity

    async def form(self) -> dict[str, str]:
        """The POSTed form, after its CSRF token and origin are checked. Repeated names keep
        their last value; `form_lists` has them all."""
        pairs = await self.form_pairs()
        return dict(pairs)

    async def form_pairs(self) -> list[tuple[str, str]]:
        body = (await self.request.body()).decode("utf-8", errors="replace")
        pairs = parse_qsl(body, keep_blank_values=True)
        sent = dict(pairs).get("csrf") or self.request.headers.get("x-csrf-token")
        if not same_origin(self.request) or not self.session.csrf_matches(sent):
            raise CsrfRefused()
        return [(k, v) for k, v in pairs if k != "csrf"]

    def page(self, template: str, http_status: int = 200, **context: Any) -> Response:
        return render.html(template, self.context(context), http_status)

    def context(self, extra: dict[str, Any]) -> dict[str, Any]:
        return {
            "identity": self.identity,
            "csrf": self.session.csrf,
            "path": self.request.url.path,
            "refresh": self.state.settings.refresh_seconds,
            **extra,
        }

    @staticmethod
    def redirect(url: str) -> Response:
        return RedirectResponse(url, status_code=303, headers=render.SECURITY_HEADERS)


def current(request: Request) -> Console:
    state = state_of(request)
    session = state.sessions.get(request.cookies.get(COOKIE))
    if session is None:
        raise SignInRequired()
    return Console(request, state, session)


ConsoleDep = Annotated[Console, Depends(current)]


def sign_in_redirect(request: Request, reason: str | None = None) -> Response:
    target = request.url.path
    if request.url.query:
        target += "?" + request.url.query
    if request.method != "GET" or request.headers.get("hx-request"):
        target = request.headers.get("hx-current-url") or PREFIX
        if "://" in target:
            target = "/" + target.split("://", 1)[1].split("/", 1)[-1]
    url = f"{PREFIX}/sign-in?next={quote(safe_next(target))}"
    if reason:
        url += f"&reason={quote(reason)}"
    if request.headers.get("hx-request"):
        return Response(status_code=401, headers={**render.SECURITY_HEADERS, "HX-Redirect": url})
    response = RedirectResponse(url, status_code=303, headers=render.SECURITY_HEADERS)
    response.delete_cookie(COOKIE, path=PREFIX)
    return response
