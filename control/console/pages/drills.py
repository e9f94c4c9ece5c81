"""Drills (admin tokens): the list, a form to start one (a pool, or one member of it, out for a
while), and a drill's page where its routes' traffic by upstream is watched live (the counters
of `GET /v1/admin/drills/{id}/traffic`, read every few seconds and differenced by the page's
script into requests per second) until it ends or is ended from here."""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from control.console import forms
from control.console.api import ApiError
from control.console.web import ConsoleDep

router = APIRouter()


async def _list(console: ConsoleDep, cursor: str | None = None) -> dict[str, Any]:
    api = console.api
    drills, pools, routes = await api.gather(
        api.get("/v1/admin/drills", limit=50, cursor=cursor),
        api.all_pages("/v1/admin/pools"),
        api.all_pages("/v1/admin/routes"),
    )
    return {
        "drills": drills["items"],
        "next_cursor": drills["next_cursor"],
        "pools": pools,
        "routes": routes,
        "nonce": secrets.token_urlsafe(16),
    }


@router.get("/console/drills")
async def drills_page(console: ConsoleDep, cursor: str | None = None) -> Response:
    return console.page("drills.html", **await _list(console, cursor))


@router.post("/console/drills")
async def start_drill(console: ConsoleDep) -> Response:
    form = await console.form()
    if not console.session.use_nonce(form.get("nonce", "")):
        return console.redirect("/console/drills")
    target = forms.text(form, "target") or ""
    pool, _, member = target.partition(":")
    try:
        body = {
            "pool": pool,
            "member": member or None,
            "route": forms.text(form, "route"),
            "seconds": forms.whole(form, "seconds"),
            "reason": forms.text(form, "reason"),
            "allow_outage": forms.checked(form, "allow_outage"),
        }
        drill = await console.api.call("POST", "/v1/admin/drills", body=body)
    except ApiError as refused:
        if refused.status not in (404, 409, 422):
            raise
        context = await _list(console)
        return console.page(
            "drills.html", http_status=refused.status, form=form, form_error=refused, **context
        )
    return console.redirect(f"/console/drills/{drill['id']}")


@router.get("/console/drills/{drill_id}")
async def drill_page(console: ConsoleDep, drill_id: str) -> Response:
    traffic = await console.api.get(f"/v1/admin/drills/{drill_id}/traffic")
    return console.page("drill.html", traffic=traffic, drill=traffic["drill"])


@router.get("/console/drills/{drill_id}/panel")
async def drill_panel(console: ConsoleDep, drill_id: str) -> Response:
    traffic = await console.api.get(f"/v1/admin/drills/{drill_id}/traffic")
    return console.page("drill_panel.html", traffic=traffic, drill=traffic["drill"])


@router.post("/console/drills/{drill_id}/end")
async def end_drill(console: ConsoleDep, drill_id: str) -> Response:
    await console.form()
    await console.api.call("DELETE", f"/v1/admin/drills/{drill_id}")
    return console.redirect(f"/console/drills/{drill_id}")
