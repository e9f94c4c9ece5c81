"""Overview (admin tokens): per pool and route the windowed status (rate, error and timeout
rates, TTFT and TPOT percentiles, queue depth against its bound, members and their state), the
doctor's verdict with its numbers and scale advice, and the drills running now with their
traffic by upstream. The panel refreshes itself (htmx polling)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.responses import Response

from control.console.web import ConsoleDep

router = APIRouter()

WINDOWS = ("1m", "5m", "1h")
ADVICE = {
    0: "no change needed",
    1: "scale upstream compute",
    2: "fix queueing or scheduling",
    3: "the bottleneck is outside compute",
    4: "a backlog is building",
}


async def _panel_context(console: ConsoleDep, window: str) -> dict[str, Any]:
    api = console.api
    status, diagnosis, drills = await api.gather(
        api.get("/v1/admin/status"),
        api.get("/v1/admin/diagnosis"),
        api.get("/v1/admin/drills", active="true", limit=20),
    )
    traffic = await api.gather(
        *(api.get(f"/v1/admin/drills/{d['id']}/traffic") for d in drills["items"])
    )
    doctor = {p["pool"]: p for p in diagnosis["pools"]}
    return {
        "status": status,
        "window": window,
        "windows": WINDOWS,
        "doctor": doctor,
        "diagnosis": diagnosis,
        "advice": ADVICE,
        "drills": traffic,
        "live": {
            "at": status["at"],
            "members": [
                {"series": f"{pool['id']}/{m['id']}", "value": m["inflight"]}
                for pool in status["pools"]
                for m in pool["members"]
            ],
        },
    }


@router.get("/console")
async def overview(console: ConsoleDep, window: str = "1m") -> Response:
    if not console.identity.is_admin:
        return console.redirect("/console/keys")
    window = window if window in WINDOWS else "1m"
    return console.page("overview.html", **await _panel_context(console, window))


@router.get("/console/overview/panel")
async def overview_panel(console: ConsoleDep, window: str = "1m") -> Response:
    window = window if window in WINDOWS else "1m"
    return console.page("overview_panel.html", **await _panel_context(console, window))
