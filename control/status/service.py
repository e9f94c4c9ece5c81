"""The status page: the core's windows per pool and route, and each route's objective."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.bridge.core_bridge import CoreBridge
from control.routes import repository as routes
from control.status.schemas import RouteStatusOut, StatusOut
from control.status.source import DEFAULT_WINDOWS, read_status
from control.timeutil import utcnow


def status(bridge: CoreBridge, session: Session, caller: Caller) -> StatusOut:
    """Admin only: pools are shared infrastructure, their load says something about every tenant."""
    caller.require_admin()
    core = read_status(bridge)
    slos = routes.objectives(session)
    at = datetime.fromtimestamp(core.now, UTC) if core.now else utcnow()
    return StatusOut(
        at=at,
        config_version=core.config_version,
        windows=list(DEFAULT_WINDOWS),
        pools=core.pools,
        routes=[
            RouteStatusOut(**route.model_dump(), slo_ttft_p95_ms=slos.get(route.alias))
            for route in core.routes
        ],
    )
