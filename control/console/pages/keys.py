"""Keys: the list with filters (tenant, status, prefix), creation (the secret shown once, with a
copy button, never retrievable again), rotation with an overlap, revocation, enable/disable,
and edits of limits, models, priority, expiry and quota."""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from control.console import forms
from control.console.api import ApiError
from control.console.web import ConsoleDep

router = APIRouter()

STATUSES = ("active", "disabled", "expired", "revoked")
LIMITS = ("rpm", "tpm", "max_concurrency")


def key_body(form: dict[str, str]) -> dict[str, Any]:
    """The settings a key form holds, as the API's fields."""
    body: dict[str, Any] = {
        "name": forms.text(form, "name"),
        "models": forms.names(form, "models"),
        "priority": forms.text(form, "priority") or "interactive",
        "expires_at": forms.moment(form, "expires_at"),
        "quota": forms.quota(form),
    }
    for name in LIMITS:
        body[name] = forms.whole(form, name)
    return body


async def _list_context(console: ConsoleDep, query: dict[str, str | None]) -> dict[str, Any]:
    api = console.api
    tenants: list[dict[str, Any]] = await api.all_pages("/v1/admin/tenants")
    error = None
    try:
        page = await api.get("/v1/admin/keys", limit=50, **query)
    except ApiError as refused:
        if refused.status != 422:
            raise
        page, error = {"items": [], "next_cursor": None}, refused.message
    return {
        "keys": page["items"],
        "next_cursor": page["next_cursor"],
        "tenants": tenants,
        "statuses": STATUSES,
        "filters": query,
        "list_error": error,
        "nonce": secrets.token_urlsafe(16),
    }


@router.get("/console/keys")
async def keys_page(
    console: ConsoleDep,
    tenant_id: str | None = None,
    status: str | None = None,
    prefix: str | None = None,
    cursor: str | None = None,
) -> Response:
    query = {"tenant_id": tenant_id, "status": status, "prefix": prefix, "cursor": cursor}
    return console.page("keys.html", **await _list_context(console, query))


@router.post("/console/keys")
async def create_key(console: ConsoleDep) -> Response:
    form = await console.form()
    if not console.session.use_nonce(form.get("nonce", "")):
        # A reloaded or repeated submission: the first one made the key (shown once).
        return console.redirect("/console/keys?notice=already_created")
    tenant = console.identity.tenant_id or form.get("tenant_id", "")
    try:
        body = {"tenant_id": tenant, **key_body(form)}
        created = await console.api.call("POST", "/v1/admin/keys", body=body)
    except ApiError as refused:
        if refused.status not in (409, 422):
            raise
        context = await _list_context(console, {})
        return console.page(
            "keys.html", http_status=refused.status, form=form, form_error=refused, **context
        )
    return console.page("secret.html", key=created, what="created")


@router.post("/console/keys/{key_id}/rotate")
async def rotate_key(console: ConsoleDep, key_id: str) -> Response:
    form = await console.form()
    if not console.session.use_nonce(form.get("nonce", "")):
        return console.redirect(f"/console/keys/{key_id}")
    body: dict[str, Any] = {"overlap_seconds": forms.whole(form, "overlap_seconds") or 0}
    rotated = await console.api.call("POST", f"/v1/admin/keys/{key_id}/rotate", body=body)
    return console.page(
        "secret.html", key=rotated["key"], previous=rotated["previous"], what="rotated"
    )


@router.post("/console/keys/{key_id}/revoke")
async def revoke_key(console: ConsoleDep, key_id: str) -> Response:
    await console.form()
    await console.api.call("POST", f"/v1/admin/keys/{key_id}/revoke")
    return console.redirect(f"/console/keys/{key_id}?notice=revoked")


@router.post("/console/keys/{key_id}/status")
async def key_status(console: ConsoleDep, key_id: str) -> Response:
    form = await console.form()
    status = "disabled" if form.get("status") == "disabled" else "active"
    await console.api.call("PATCH", f"/v1/admin/keys/{key_id}", body={"status": status})
    return console.redirect(f"/console/keys/{key_id}?notice={status}")
