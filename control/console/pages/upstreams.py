"""Providers, pools and routes (admin tokens): one page listing the three with a form to create
each, and a page per object to edit or delete it. Forms become the admin API's bodies here;
its refusals come back to the form in its own words."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from control.console import forms
from control.console.api import ApiError
from control.console.forms import FormError
from control.console.web import ConsoleDep

router = APIRouter()
POLICIES = ("admission", "retry", "ejection", "health_check")
TIMEOUTS = ("connect_ms", "first_byte_ms", "idle_ms", "total_ms")


async def _lists(console: ConsoleDep) -> dict[str, Any]:
    api = console.api
    providers, pools, routes = await api.gather(
        api.all_pages("/v1/admin/providers"),
        api.all_pages("/v1/admin/pools"),
        api.all_pages("/v1/admin/routes"),
    )
    return {"providers": providers, "pools": pools, "routes": routes}


@router.get("/console/upstreams")
async def upstreams_page(console: ConsoleDep) -> Response:
    return console.page("upstreams.html", **await _lists(console))


# --- bodies from forms ---------------------------------------------------------------------


def provider_body(pairs: list[tuple[str, str]], creating: bool) -> dict[str, Any]:
    form = dict(pairs)
    headers: dict[str, str] = {}
    for line in (form.get("headers") or "").splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise FormError("headers", "one `Name: value` per line")
        headers[name.strip()] = value.strip()
    body: dict[str, Any] = {
        "name": forms.text(form, "name"),
        "base_url": forms.text(form, "base_url"),
        "internal": forms.checked(form, "internal"),
        "headers": headers,
        "forward_headers": forms.names(form, "forward_headers") or [],
    }
    if creating:
        body["id"] = forms.text(form, "id")
        body["kind"] = forms.text(form, "kind") or "openai"
    api_version = forms.text(form, "api_version")
    if api_version:
        body["api_version"] = api_version
    auth_header = forms.text(form, "auth_header")
    if auth_header or not creating:
        body["auth_header"] = auth_header or None
    credential = form.get("credential", "")
    if credential:
        body["credential"] = credential
    elif forms.checked(form, "remove_credential"):
        body["credential"] = None
    return body


def _rows(pairs: list[tuple[str, str]], prefix: str) -> list[dict[str, str]]:
    """Repeated fields `prefix.name` grouped into rows, in the order they came."""
    rows: list[dict[str, str]] = []
    for name, value in pairs:
        if not name.startswith(prefix + "."):
            continue
        field = name[len(prefix) + 1 :]
        if not rows or field in rows[-1]:
            rows.append({})
        rows[-1][field] = value.strip()
    return rows


def _json(form: dict[str, str], name: str) -> Any:
    value = forms.text(form, name)
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        raise FormError(name, "is not valid JSON") from None


def pool_body(pairs: list[tuple[str, str]], creating: bool) -> dict[str, Any]:
    form = dict(pairs)
    members = []
    for row in _rows(pairs, "member"):
        if not row.get("provider_id"):
            continue
        member: dict[str, Any] = {"provider_id": row["provider_id"]}
        if row.get("id"):
            member["id"] = row["id"]
        member["weight"] = forms.whole(row, "weight") if row.get("weight") else 1
        member["max_concurrency"] = forms.whole(row, "max_concurrency")
        member["http2"] = row.get("http2") == "on"
        members.append(member)
    body: dict[str, Any] = {"name": forms.text(form, "name"), "members": members}
    timeouts = {t: forms.whole(form, t) for t in TIMEOUTS if forms.text(form, t)}
    if timeouts:
        body["timeouts"] = timeouts
    for policy in POLICIES:
        value = _json(form, policy)
        if value is not None or policy == "health_check":
            body[policy] = value
    if creating:
        body["id"] = forms.text(form, "id")
    return body


def route_body(pairs: list[tuple[str, str]], creating: bool) -> dict[str, Any]:
    form = dict(pairs)
    chain = [
        {"pool": row["pool"], "model": row.get("model", "")}
        for row in _rows(pairs, "chain")
        if row.get("pool")
    ]
    body: dict[str, Any] = {
        "chain": chain,
        "max_output_tokens": forms.whole(form, "max_output_tokens"),
        "slo_ttft_p95_ms": forms.whole(form, "slo_ttft_p95_ms"),
    }
    if creating:
        body["alias"] = forms.text(form, "alias")
    return body


BODIES = {"providers": provider_body, "pools": pool_body, "routes": route_body}


def _no_such_page(console: ConsoleDep) -> Response:
    return console.page("error.html", http_status=404, title="Not found", message="No such page.")


# --- create, edit, delete ------------------------------------------------------------------


@router.post("/console/upstreams/{kind}")
async def create(console: ConsoleDep, kind: str) -> Response:
    if kind not in BODIES:
        return _no_such_page(console)
    pairs = await console.form_pairs()
    try:
        body = BODIES[kind](pairs, True)
        created = await console.api.call("POST", f"/v1/admin/{kind}", body=body)
    except ApiError as refused:
        if refused.status not in (409, 422):
            raise
        return console.page(
            "upstreams.html",
            http_status=refused.status,
            failed=kind,
            form=dict(pairs),
            form_error=refused,
            **await _lists(console),
        )
    ident = created.get("alias") or created["id"]
    return console.redirect(f"/console/upstreams/{kind}/{ident}?notice=created")


async def _object(console: ConsoleDep, kind: str, ident: str) -> dict[str, Any]:
    context: dict[str, Any] = {
        "kind": kind,
        "obj": await console.api.get(f"/v1/admin/{kind}/{ident}"),
    }
    if kind in ("pools", "routes"):
        context.update(await _lists(console))
    return context


@router.get("/console/upstreams/{kind}/{ident:path}")
async def object_page(
    console: ConsoleDep, kind: str, ident: str, notice: str | None = None
) -> Response:
    if kind not in BODIES:
        return _no_such_page(console)
    return console.page("upstream.html", notice=notice, **await _object(console, kind, ident))


def _patch(kind: str, body: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    if kind == "providers":
        credential = body.pop("credential", forms.MISSING)
        out = forms.changes(body, current)
        if credential is not forms.MISSING:
            out["credential"] = credential
        return out
    if kind == "pools":
        out = forms.changes({k: v for k, v in body.items() if k != "timeouts"}, current)
        timeouts = {
            k: v for k, v in body.get("timeouts", {}).items() if current["timeouts"].get(k) != v
        }
        if timeouts:
            out["timeouts"] = timeouts
        return out
    return forms.changes(body, current)


@router.post("/console/upstreams/{kind}/{ident:path}")
async def edit(console: ConsoleDep, kind: str, ident: str) -> Response:
    if kind not in BODIES:
        return _no_such_page(console)
    pairs = await console.form_pairs()
    form = dict(pairs)
    if form.get("action") == "delete":
        await console.api.call("DELETE", f"/v1/admin/{kind}/{ident}")
        return console.redirect(f"/console/upstreams?notice={kind}_deleted")
    current = await console.api.get(f"/v1/admin/{kind}/{ident}")
    try:
        body = BODIES[kind](pairs, False)
        changed = _patch(kind, body, current)
        if changed:
            await console.api.call("PATCH", f"/v1/admin/{kind}/{ident}", body=changed)
    except ApiError as refused:
        if refused.status not in (409, 422):
            raise
        context = await _object(console, kind, ident)
        return console.page(
            "upstream.html", http_status=refused.status, form=form, form_error=refused, **context
        )
    return console.redirect(f"/console/upstreams/{kind}/{ident}?notice=saved")
