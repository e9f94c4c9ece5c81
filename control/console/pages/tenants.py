"""Tenants: the list (a tenant session sees its own), creation, edits of limits, models, key cap,
quota and status (admin tokens), each tenant's quota use, and its tenant-scoped admin tokens
(created and shown once, revoked; revoking one ends its console sessions at once)."""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from control.console import forms
from control.console.api import ApiError
from control.console.web import ConsoleDep

router = APIRouter()
LIMITS = ("rpm", "tpm", "max_concurrency", "max_keys")


def tenant_body(form: dict[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": forms.text(form, "name"),
        "models": forms.names(form, "models"),
        "quota": forms.quota(form),
    }
    for name in LIMITS:
        body[name] = forms.whole(form, name)
    return body


@router.get("/console/tenants")
async def tenants_page(console: ConsoleDep, cursor: str | None = None) -> Response:
    page = await console.api.get("/v1/admin/tenants", limit=50, cursor=cursor)
    return console.page("tenants.html", tenants=page["items"], next_cursor=page["next_cursor"])


@router.post("/console/tenants")
async def create_tenant(console: ConsoleDep) -> Response:
    form = await console.form()
    body = {"id": forms.text(form, "id"), **tenant_body(form)}
    try:
        created = await console.api.call("POST", "/v1/admin/tenants", body=body)
    except ApiError as refused:
        if refused.status not in (409, 422):
            raise
        page = await console.api.get("/v1/admin/tenants", limit=50)
        return console.page(
            "tenants.html",
            http_status=refused.status,
            tenants=page["items"],
            next_cursor=page["next_cursor"],
            form=form,
            form_error=refused,
        )
    return console.redirect(f"/console/tenants/{created['id']}?notice=created")


async def _context(console: ConsoleDep, tenant_id: str) -> dict[str, Any]:
    api = console.api
    tenant = await api.get(f"/v1/admin/tenants/{tenant_id}")
    quota = None
    if tenant["quota"] is not None:
        quota = await api.get(f"/v1/admin/tenants/{tenant_id}/quota")
    tokens: list[dict[str, Any]] = []
    if console.identity.is_admin:
        tokens = await api.all_pages("/v1/admin/tokens", tenant_id=tenant_id)
    keys = await api.get("/v1/admin/keys", tenant_id=tenant_id, limit=20)
    return {
        "tenant": tenant,
        "quota": quota,
        "tokens": tokens,
        "keys": keys["items"],
        "more_keys": keys["next_cursor"] is not None,
        "nonce": secrets.token_urlsafe(16),
    }


@router.get("/console/tenants/{tenant_id}")
async def tenant_page(console: ConsoleDep, tenant_id: str, notice: str | None = None) -> Response:
    return console.page("tenant.html", notice=notice, **await _context(console, tenant_id))


@router.post("/console/tenants/{tenant_id}/edit")
async def edit_tenant(console: ConsoleDep, tenant_id: str) -> Response:
    form = await console.form()
    current = await console.api.get(f"/v1/admin/tenants/{tenant_id}")
    try:
        body = forms.changes(tenant_body(form), current)
        if body:
            await console.api.call("PATCH", f"/v1/admin/tenants/{tenant_id}", body=body)
    except ApiError as refused:
        if refused.status not in (409, 422):
            raise
        context = await _context(console, tenant_id)
        return console.page(
            "tenant.html", http_status=refused.status, form=form, form_error=refused, **context
        )
    return console.redirect(f"/console/tenants/{tenant_id}?notice=saved")


@router.post("/console/tenants/{tenant_id}/status")
async def tenant_status(console: ConsoleDep, tenant_id: str) -> Response:
    form = await console.form()
    status = "disabled" if form.get("status") == "disabled" else "active"
    await console.api.call("PATCH", f"/v1/admin/tenants/{tenant_id}", body={"status": status})
    return console.redirect(f"/console/tenants/{tenant_id}?notice={status}")


@router.post("/console/tenants/{tenant_id}/tokens")
async def create_token(console: ConsoleDep, tenant_id: str) -> Response:
    form = await console.form()
    if not console.session.use_nonce(form.get("nonce", "")):
        return console.redirect(f"/console/tenants/{tenant_id}")
    body = {"name": forms.text(form, "name"), "expires_at": forms.moment(form, "expires_at")}
    try:
        created = await console.api.call("POST", f"/v1/admin/tenants/{tenant_id}/tokens", body=body)
    except ApiError as refused:
        if refused.status != 422:
            raise
        context = await _context(console, tenant_id)
        return console.page(
            "tenant.html", http_status=422, token_form=form, token_error=refused, **context
        )
    return console.page("token_secret.html", token=created)


@router.post("/console/tokens/{token_id}/revoke")
async def revoke_token(console: ConsoleDep, token_id: str) -> Response:
    form = await console.form()
    revoked = await console.api.call("DELETE", f"/v1/admin/tokens/{token_id}")
    # Its sessions would end at their next call anyway (the API refuses the token); now at once.
    console.state.sessions.end_token(token_id)
    back = form.get("back") or ""
    target = back if back.startswith("/console/tenants/") else "/console/tenants"
    return console.redirect(f"{target}?notice=token_revoked" if revoked else target)
