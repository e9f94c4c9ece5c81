"""Pages from Jinja2 templates (autoescaped), with the filters that format the API's numbers,
and the headers every console answer carries."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.responses import HTMLResponse, Response

TEMPLATES = Path(__file__).parent / "templates"
# What an absent value reads as (an en dash).
NONE = "\u2013"

# Nothing from elsewhere: scripts and styles are the package's own files (no inline script,
# no inline style), the page cannot be framed, forms post only here.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    # Pages hold tenants' data and, once, a secret: never kept by a cache or the history.
    "Cache-Control": "no-store",
}


def number(value: Any) -> str:
    if value is None:
        return NONE
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def millis(value: Any) -> str:
    return NONE if value is None else f"{float(value):,.1f} ms"


def percent(value: Any) -> str:
    return NONE if value is None else f"{float(value) * 100:.2f}%"


def cost(micros: Any) -> str:
    """Micro-units of the prices' currency, as units with six decimals."""
    if micros is None:
        return NONE
    whole, part = divmod(int(micros), 1_000_000)
    return f"{whole:,}.{part:06d}"


def when(value: Any) -> str:
    if not value:
        return NONE
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def rate(value: Any) -> str:
    return NONE if value is None else f"{float(value):,.2f}/s"


environment = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
environment.filters.update(
    number=number, ms=millis, percent=percent, cost=cost, when=when, rate=rate
)


def html(template: str, context: dict[str, Any], status: int = 200) -> Response:
    body = environment.get_template(template).render(context)
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)
