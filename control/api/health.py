"""`/healthz` (the process answers) and `/readyz` (core running, snapshot applied, DB reachable).

The usage journal needs no field of its own: `serve` writes the replayed journal to SQL before
the admin port opens (`startup.prepare`), so an answer here means it is drained; later backlog
shows in `sluicegate_usage_backlog` and, past its bound, as 503 `usage_backlog` on the data port.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from control.api.deps import ContextDep
from control.db import ping

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    ready: bool
    core_running: bool
    config_applied: bool
    database: bool
    shutting_down: bool


@router.get("/healthz", summary="Liveness")
def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    summary="Readiness: 503 until the core serves the first snapshot, and from shutdown on",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Not ready"}},
)
def readyz(ctx: ContextDep) -> JSONResponse:
    state = Readiness(
        ready=False,
        core_running=ctx.bridge.running,
        config_applied=ctx.bridge.acknowledged is not None,
        database=ping(ctx.engine),
        shutting_down=ctx.shutting_down.is_set(),
    )
    state.ready = (
        state.core_running and state.config_applied and state.database and not state.shutting_down
    )
    return JSONResponse(state.model_dump(), status_code=200 if state.ready else 503)
