"""The status page: the windows per pool and route (the whole fleet's: every live replica's
reading merged), each route's objective, and the replicas."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.context import ControlContext
from control.fleet import service as fleet
from control.fleet.schemas import ReplicaOut
from control.routes import repository as routes
from control.status.schemas import RouteStatusOut, StatusOut
from control.status.source import DEFAULT_WINDOWS, peer_readings, read_fleet_status
from control.timeutil import utcnow


def status(ctx: ControlContext, session: Session, caller: Caller) -> StatusOut:
    """Admin only: pools are shared infrastructure, their load says something about every tenant."""
    caller.require_admin()
    dead_after = ctx.settings.fleet.dead_after_ms
    peers = peer_readings(ctx.sessions, ctx.replica.id, dead_after, DEFAULT_WINDOWS)
    core = read_fleet_status(ctx.bridge, DEFAULT_WINDOWS, peers)
    slos = routes.objectives(session)
    at = datetime.fromtimestamp(core.now, UTC) if core.now else utcnow()
    return StatusOut(
        at=at,
        config_version=core.config_version,
        replicas=[ReplicaOut.model_validate(r) for r in fleet.live(session, dead_after)],
        windows=list(DEFAULT_WINDOWS),
        pools=core.pools,
        routes=[
            RouteStatusOut(**route.model_dump(), slo_ttft_p95_ms=slos.get(route.alias))
            for route in core.routes
        ],
    )
